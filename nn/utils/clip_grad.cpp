// clip_grad_norm_: per-tensor norms and the scaling through the multi-tensor
// kernels for contiguous gradients (bucketed by device and dtype), through
// the tensor ops for the others, with PyTorch's arithmetic in between.
#include "nn/utils/clip_grad.h"

#include <charconv>
#include <cmath>
#include <string>

#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/runtime.h"
#include "tensor/ops/shape_ops.h"

namespace tandem::nn::utils {

namespace {

struct Bucket {
  Device device;
  Dtype dtype;
  std::vector<Tensor> grads;
};

// A float as Python's str() prints it ("2.0", "inf", "3.5"): the shortest
// form that reads back, with ".0" on whole numbers.
std::string python_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  std::string out(buf, end);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    TANDEM_CHECK(p.defined(), ValueError, "clip_grad_norm_: a parameter is an undefined tensor");
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return tensor(0.0f);
  const Device first_device = grads[0].device();

  // The per-gradient norms: multi-tensor kernels for the contiguous ones,
  // one norm op for each of the others.
  std::vector<Bucket> buckets;
  std::vector<Tensor> loose;  // not contiguous
  for (const Tensor& g : grads) {
    TANDEM_CHECK(g.is_floating_point(), DtypeError, "clip_grad_norm_: a gradient is ", g.dtype(),
                 "; gradients are floating point");
    if (!g.is_contiguous()) {
      loose.push_back(g);
      continue;
    }
    Bucket* bucket = nullptr;
    for (auto& b : buckets)
      if (b.device == g.device() && b.dtype == g.dtype()) bucket = &b;
    if (bucket == nullptr) bucket = &buckets.emplace_back(Bucket{g.device(), g.dtype(), {}});
    bucket->grads.push_back(g);
  }
  std::vector<Tensor> norms;
  for (const Bucket& b : buckets) {
    Tensor out = empty({static_cast<int64_t>(b.grads.size())}, TensorOptions(b.dtype).device(b.device));
    switch (backend_of(b.device)) {
      case Backend::CPU: cpu::foreach_norm(b.grads, norm_type, out); break;
      case Backend::CUDA: gpu::foreach_norm(b.grads, norm_type, out); break;
    }
    norms.push_back(out.to(first_device));
  }
  for (const Tensor& g : loose) norms.push_back(g.norm(norm_type).reshape({1}).to(first_device));
  // PyTorch: the max of the norms for inf, else the norm of their stack.
  const Tensor all = cat(norms);
  const Tensor total_norm = std::isinf(norm_type) && norm_type > 0 ? all.amax() : all.norm(norm_type);

  if (error_if_nonfinite) {
    const double total = total_norm.item<double>();
    TANDEM_CHECK(std::isfinite(total), ValueError, "The total norm of order ", python_float(norm_type),
                 " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error ",
                 "and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False` ",
                 "(error_if_nonfinite = false in C++)");
  }
  const Tensor clip_coef = full_like(total_norm, max_norm).div(total_norm.add(1e-6));
  const Tensor clip_coef_clamped = clip_coef.clamp_max(1.0);
  for (const Bucket& b : buckets) {
    const Tensor coef = clip_coef_clamped.to(b.device, b.dtype);
    switch (backend_of(b.device)) {
      case Backend::CPU: cpu::foreach_mul_(b.grads, coef); break;
      case Backend::CUDA: gpu::foreach_mul_(b.grads, coef); break;
    }
    for (const Tensor& g : b.grads) g.storage()->bump_version();
  }
  for (const Tensor& g : loose) {
    Tensor view = g.detach();
    view.mul_(clip_coef_clamped.to(g.device(), g.dtype()));
  }
  return total_norm;
}

Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

}  // namespace tandem::nn::utils
