// The foreach ops' front ends: the list's checks (one device, one floating
// dtype, no graph expected), contiguous operands, and the backend switch to
// the multi-tensor kernels.
#include "tensor/ops/foreach.h"

#include <algorithm>
#include <cmath>

#include "kernels/optim.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/dispatch.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/runtime.h"
#include "tensor/ops/shape_ops.h"

namespace tandem::detail {

namespace {

// Not empty, every tensor defined, one device, one floating dtype, and no
// tensor that would need a graph.
void check_list(const char* op, const std::vector<Tensor>& tensors) {
  TANDEM_CHECK(!tensors.empty(), ValueError, op, ": expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    TANDEM_CHECK(tensors[i].defined(), ValueError, op, ": tensors[", i,
                 "] is an undefined tensor (a default-constructed Tensor)");
  check_same_device(op, "tensors", tensors);
  const Dtype dtype = tensors[0].dtype();
  TANDEM_CHECK(is_floating_point(dtype), DtypeError, op, ": expected floating point tensors (float32, float64, ",
               "float16, bfloat16), but tensors[0] is ", dtype);
  for (size_t i = 1; i < tensors.size(); ++i)
    TANDEM_CHECK(tensors[i].dtype() == dtype, DtypeError, op, ": expected one dtype, but tensors[0] is ", dtype,
                 " and tensors[", i, "] is ", tensors[i].dtype(), "; group the tensors by dtype (one call per dtype)");
  if (!GradMode::is_enabled()) return;
  for (size_t i = 0; i < tensors.size(); ++i)
    TANDEM_CHECK(!tensors[i].requires_grad(), ValueError, op, ": records no graph, but grad mode is on and tensors[", i,
                 "] requires grad; call it inside a NoGradGuard");
}

}  // namespace

Tensor foreach_norm(const std::vector<Tensor>& tensors, double p) {
  const char* op = "foreach_norm";
  check_list(op, tensors);
  TANDEM_CHECK(!std::isnan(p), ValueError, op, ": the order p must be a number, got nan");
  // As tandem::norm: the max, min and negative orders have no value for an
  // empty tensor (the CUDA kernel would give 0, the CPU one the identity).
  if (p < 0 || std::isinf(p))
    for (size_t i = 0; i < tensors.size(); ++i)
      TANDEM_CHECK(tensors[i].numel() > 0, ValueError, op, ": linalg.vector_norm cannot compute the ", p,
                   " norm on an empty tensor because the operation does not have an identity (tensors[", i,
                   "] has shape ", shape_str(tensors[i].sizes()), ")");
  const Device device = tensors[0].device();
  // The list as it is when every tensor is contiguous (no copy of hundreds
  // of handles), else with contiguous copies in place of the others.
  std::vector<Tensor> copies;
  if (!std::all_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.is_contiguous(); })) {
    copies.reserve(tensors.size());
    for (const Tensor& t : tensors) copies.push_back(t.contiguous());
  }
  const std::vector<Tensor>& dense = copies.empty() ? tensors : copies;
  Tensor out = make_result({static_cast<int64_t>(tensors.size())}, tensors[0].dtype(), device,
                           Origin::computed(op, tensors[0].origin()));
  dispatch(device, cpu::foreach_norm, cuda::foreach_norm, dense, p, out);
  return out;
}

void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale) {
  const char* op = "foreach_mul_";
  check_list(op, tensors);
  check_defined(op, {{"scale", scale}});
  check_same_device(op, {{"tensors[0]", tensors[0]}, {"scale", scale}});
  TANDEM_CHECK(scale.numel() == 1, ShapeError, op, ": expected a one-element scale, but got shape ",
               shape_str(scale.sizes()));
  TANDEM_CHECK(!GradMode::is_enabled() || !scale.requires_grad(), ValueError, op,
               ": records no graph, but grad mode is on and scale requires grad; call it inside a NoGradGuard");
  Tensor s = scale.to(tensors[0].dtype());
  // A scale inside one of the tensors would change while a GPU kernel reads it.
  if (std::any_of(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.shares_storage(s); })) s = s.clone();
  // The kernel takes the contiguous tensors (the list itself when that is
  // all of them), the elementwise op the others.
  std::vector<Tensor> some, strided;
  const bool all_dense = std::all_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.is_contiguous(); });
  if (!all_dense)
    for (const Tensor& t : tensors) (t.is_contiguous() ? some : strided).push_back(t);
  const std::vector<Tensor>& dense = all_dense ? tensors : some;
  if (!dense.empty()) {
    dispatch(s.device(), cpu::foreach_mul_, cuda::foreach_mul_, dense, s);
    // Written in place: bumped as an in-place op would.
    for (const Tensor& t : dense) t.storage()->bump_version();
  }
  if (!strided.empty()) {
    NoGradGuard no_grad;
    const Tensor s0 = s.reshape({});
    for (const Tensor& t : strided) Tensor(t).mul_(s0);
  }
}

namespace {

// amp_unscale_ and amp_check_finite_: inv_scale undefined only checks.
void unscale_or_check(const char* op, const std::vector<Tensor>& grads, const Tensor& found_inf,
                      const Tensor& inv_scale) {
  const bool write = inv_scale.defined();
  check_list(op, grads);
  check_defined(op, {{"found_inf", found_inf}});
  if (write) {
    check_same_device(op, {{"grads[0]", grads[0]}, {"found_inf", found_inf}, {"inv_scale", inv_scale}});
  } else {
    check_same_device(op, {{"grads[0]", grads[0]}, {"found_inf", found_inf}});
  }
  for (const auto& [name, t] :
       {std::pair<const char*, const Tensor&>{"found_inf", found_inf}, {"inv_scale", inv_scale}}) {
    if (!t.defined()) continue;
    TANDEM_CHECK(t.numel() == 1 && t.dtype() == kFloat32 && t.is_contiguous(), ValueError, op, ": ", name,
                 " must be a one-element float32 tensor, but got shape ", shape_str(t.sizes()), " and dtype ",
                 t.dtype());
  }
  TANDEM_CHECK(!GradMode::is_enabled() ||
                   std::none_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.requires_grad(); }),
               ValueError, op,
               ": records no graph, but grad mode is on and a gradient requires grad; call it inside a NoGradGuard");
  std::vector<Tensor> dense;
  std::vector<std::pair<Tensor, Tensor>> write_back;  // (strided grad, its contiguous copy)
  for (const Tensor& g : grads) {
    if (g.is_contiguous()) {
      dense.push_back(g);
    } else {
      write_back.emplace_back(g, g.contiguous());
      dense.push_back(write_back.back().second);
    }
  }
  dispatch(found_inf.device(), cpu::amp_unscale_, cuda::amp_unscale_, dense, found_inf, inv_scale);
  found_inf.storage()->bump_version();
  if (!write) return;
  for (const Tensor& g : grads) g.storage()->bump_version();
  NoGradGuard no_grad;
  for (auto& [g, c] : write_back) Tensor(g).copy_(c);
}

}  // namespace

void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  check_defined("amp_unscale_", {{"inv_scale", inv_scale}});
  unscale_or_check("amp_unscale_", grads, found_inf, inv_scale);
}

void amp_check_finite_(const std::vector<Tensor>& grads, const Tensor& found_inf) {
  unscale_or_check("amp_check_finite_", grads, found_inf, Tensor());
}

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                       double backoff_factor, int64_t growth_interval) {
  const char* op = "amp_update_scale_";
  check_defined(op, {{"scale", scale}, {"growth_tracker", growth_tracker}, {"found_inf", found_inf}});
  check_same_device(op, {{"scale", scale}, {"growth_tracker", growth_tracker}, {"found_inf", found_inf}});
  TANDEM_CHECK(scale.numel() == 1 && scale.dtype() == kFloat32 && found_inf.numel() == 1 &&
                   found_inf.dtype() == kFloat32 && growth_tracker.numel() == 1 && growth_tracker.dtype() == kInt32,
               ValueError, op,
               ": expected one-element scale (float32), growth_tracker (int32) and found_inf (float32)");
  dispatch(scale.device(), cpu::amp_update_scale_, cuda::amp_update_scale_, scale, growth_tracker, found_inf,
           growth_factor, backoff_factor, growth_interval);
  scale.storage()->bump_version();
  growth_tracker.storage()->bump_version();
}

}  // namespace tandem::detail
