// Elementwise kernels, both backends (kernels/contract.h): cpu:: in
// kernels/cpu/elementwise.cpp, cuda:: in kernels/cuda/elementwise.cu (copy:
// copy.cu). Outputs are allocated and shaped by the caller; inputs broadcast
// to the output's shape and already have the dtype the op computes in
// (comparisons: out is bool). On CUDA they launch on the current stream of
// the output's device.
//
// unary:       out = op(in), with the op's parameters (tensor/core/op_table.h).
// binary:      out = op(a, b); alpha for add and sub (a +- alpha * b); params:
//              an activation backward's forward parameters.
// where:       out = cond ? a : b; cond is bool, a and b have out's dtype.
// masked_fill: out = mask ? value : in; mask is bool.
// fill:        every element of out = value.
// copy:        dst = src converted to dst's dtype; src broadcasts to dst's shape.
#pragma once

#include "kernels/contract.h"
#include "tensor/core/op_table.h"
#include "tensor/core/tensor.h"

#define TANDEM_ELEMENTWISE_KERNELS(K)                                                                  \
  K(void, unary, (UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& params = {}))    \
  K(void, binary,                                                                                      \
    (BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1,        \
     const UnaryParams& params = {}))                                                                  \
  K(void, where, (const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b))            \
  K(void, masked_fill, (const Tensor& out, const Tensor& in, const Tensor& mask, const Scalar& value)) \
  K(void, fill, (const Tensor& out, const Scalar& value))                                              \
  K(void, copy, (const Tensor& dst, const Tensor& src))

TANDEM_KERNELS(TANDEM_ELEMENTWISE_KERNELS)
