// The simulated build's <cublas_api.h>: kernels/cuda/sim/cublas.h.
#pragma once
#include "kernels/cuda/sim/cublas.h"
