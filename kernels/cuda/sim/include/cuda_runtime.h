// The simulated build's <cuda_runtime.h>: the runtime API, and what kernels
// see (kernels/cuda/sim/device.h) and how they launch (launch.h).
#pragma once
#include "kernels/cuda/sim/api.h"
#include "kernels/cuda/sim/device.h"
#include "kernels/cuda/sim/launch.h"
