// The simulated build's <cuda_bf16.h>.
#pragma once
#include "kernels/cuda/sim/half.h"
