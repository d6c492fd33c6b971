// The simulated build's <cuda_runtime_api.h>: kernels/cuda/sim/api.h.
#pragma once
#include "kernels/cuda/sim/api.h"
