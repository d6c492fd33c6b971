// clip_grad_norm_: the gradients grouped by device and dtype, each group's
// norms and scaling through the multi-tensor ops (tensor/ops/foreach.h),
// with PyTorch's arithmetic in between.
#include "nn/utils/clip_grad.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "tensor/core/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/foreach.h"
#include "tensor/ops/reduce.h"
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
  for (const Tensor& p : parameters)
    TANDEM_CHECK(p.defined(), ValueError, "clip_grad_norm_: a parameter is an undefined tensor");
  // Each parameter once, as Module::parameters() lists a tied weight: its
  // gradient counted once in the norm and scaled once. Repeats found by
  // sorting (parameter, position) pairs: a few microseconds for hundreds of
  // parameters, a third of what a hash set takes.
  std::vector<std::pair<const TensorImpl*, size_t>> order(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) order[i] = {parameters[i].impl(), i};
  std::sort(order.begin(), order.end());
  std::vector<uint8_t> repeat(parameters.size(), 0);
  for (size_t k = 1; k < order.size(); ++k)
    if (order[k].first == order[k - 1].first) repeat[order[k].second] = 1;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i)
    if (!repeat[i] && parameters[i].grad().defined()) grads.push_back(parameters[i].grad());
  if (grads.empty()) return tensor(0.0f);
  const Device first_device = grads[0].device();

  // One multi-tensor norm per device and dtype (PyTorch's
  // _group_tensors_by_device_and_dtype), gathered on the first gradient's
  // device.
  std::vector<Bucket> buckets;
  for (const Tensor& g : grads) {
    TANDEM_CHECK(g.is_floating_point(), DtypeError, "clip_grad_norm_: a gradient is ", g.dtype(),
                 "; gradients are floating point");
    Bucket* bucket = nullptr;
    for (auto& b : buckets)
      if (b.device == g.device() && b.dtype == g.dtype()) bucket = &b;
    if (bucket == nullptr) bucket = &buckets.emplace_back(Bucket{g.device(), g.dtype(), {}});
    bucket->grads.push_back(g);
  }
  std::vector<Tensor> norms;
  for (const Bucket& b : buckets) norms.push_back(detail::foreach_norm(b.grads, norm_type).to(first_device));
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
  for (const Bucket& b : buckets) detail::foreach_mul_(b.grads, clip_coef_clamped.to(b.device, b.dtype));
  return total_norm;
}

Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

}  // namespace tandem::nn::utils
