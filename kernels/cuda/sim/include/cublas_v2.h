// The simulated build's <cublas_v2.h>: kernels/cuda/sim/cublas.h.
#pragma once
#include "kernels/cuda/sim/cublas.h"
