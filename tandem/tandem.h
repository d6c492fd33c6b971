// The umbrella header: everything a program embedding Tandem needs.
//   #include <tandem/tandem.h>
#pragma once

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "nn/functional/loss.h"
#include "nn/modules/loss.h"
#include "nn/nn.h"
#include "tandem/version.h"
#include "tensor/core/device.h"
#include "tensor/core/dtype.h"
#include "tensor/core/errors.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/tensor.h"
#include "tensor/ops/cuda.h"
#include "tensor/ops/cuda_matmul.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/index.h"
#include "tensor/ops/linalg.h"
#include "tensor/ops/random.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/shape_ops.h"
