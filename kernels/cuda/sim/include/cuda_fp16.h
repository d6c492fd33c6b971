// The simulated build's <cuda_fp16.h>.
#pragma once
#include "kernels/cuda/sim/half.h"
