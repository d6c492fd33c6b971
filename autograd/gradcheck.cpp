// gradcheck and gradgradcheck (see gradcheck.h).
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/autograd.h"
#include "tensor/core/shape.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/random.h"

namespace tandem::autograd {

namespace {

// Element k (row-major) of t as a 0-dim view, to read and write in place.
Tensor element(const Tensor& t, int64_t k) {
  int64_t offset = t.storage_offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (k % t.size(d)) * t.stride(d);
    k /= t.size(d);
  }
  return detail::make_view(t, {}, {}, offset);
}

std::vector<double> flat(const Tensor& t) { return t.detach().to_vector<double>(); }

// fn(inputs) as one flat list of doubles, without recording.
std::vector<double> evaluate(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  std::vector<double> all;
  for (const Tensor& out : fn(inputs)) {
    std::vector<double> v = flat(out);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace

std::string gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  std::ostringstream report;
  int mismatches = 0;
  std::vector<Tensor> diff;  // the inputs that require grad
  std::vector<size_t> diff_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      diff.push_back(inputs[i]);
      diff_index.push_back(i);
    }
  }
  TANDEM_CHECK(!diff.empty(), ValueError, "gradcheck: no input requires grad");

  // Analytical: row j of the Jacobian from a backward pass seeded with e_j.
  std::vector<Tensor> outputs = fn(inputs);
  std::vector<std::vector<std::vector<double>>> analytical(diff.size());  // [input][out element][in element]
  int64_t total_out = 0;
  for (const Tensor& out : outputs) total_out += out.numel();
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& out = outputs[o];
    for (int64_t j = 0; j < out.numel(); ++j) {
      std::vector<double> seed(out.numel(), 0.0);
      seed[j] = 1.0;
      Tensor g = tensor(seed, TensorOptions(out.dtype()).device(out.device())).view(out.sizes());
      std::vector<Tensor> gs;
      if (out.requires_grad()) gs = grad({out}, diff, {g}, /*retain_graph=*/true, false, /*allow_unused=*/true);
      for (size_t i = 0; i < diff.size(); ++i) {
        const Tensor& gi = gs.empty() ? Tensor() : gs[i];
        if (gi.defined()) {
          if (gi.sizes() != diff[i].sizes() || gi.device() != diff[i].device() || gi.dtype() != diff[i].dtype()) {
            report << "input " << diff_index[i] << ": gradient of shape " << shape_str(gi.sizes()) << ", "
                   << dtype_name(gi.dtype()) << " on " << gi.device().str() << " for an input of shape "
                   << shape_str(diff[i].sizes()) << ", " << dtype_name(diff[i].dtype()) << " on "
                   << diff[i].device().str() << "\n";
            return report.str();
          }
          analytical[i].push_back(flat(gi));
        } else {
          analytical[i].push_back(std::vector<double>(diff[i].numel(), 0.0));
        }
      }
    }
  }

  // Numerical: column k from two forward passes with element k moved by +-eps.
  for (size_t i = 0; i < diff.size(); ++i) {
    for (int64_t k = 0; k < diff[i].numel(); ++k) {
      Tensor e = element(diff[i], k);
      double x0;
      std::vector<double> plus, minus;
      {
        NoGradGuard no_grad;
        x0 = e.item<double>();
        e.fill_(x0 + options.eps);
        plus = evaluate(fn, inputs);
        e.fill_(x0 - options.eps);
        minus = evaluate(fn, inputs);
        e.fill_(x0);
      }
      for (int64_t j = 0; j < total_out; ++j) {
        double numerical = (plus[j] - minus[j]) / (2 * options.eps);
        double a = analytical[i][j][k];
        bool ok = std::abs(a - numerical) <= options.atol + options.rtol * std::abs(numerical) ||
                  (std::isnan(a) && std::isnan(numerical));
        if (!ok && mismatches++ < 8) {
          report << "input " << diff_index[i] << ", element " << k << ", output element " << j << ": analytical " << a
                 << " vs numerical " << numerical << "\n";
        }
      }
    }
  }
  if (mismatches > 8) report << "... " << mismatches << " mismatches in all\n";
  return report.str();
}

std::string gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  std::vector<Tensor> outputs = fn(inputs);
  std::vector<Tensor> v;
  for (const Tensor& out : outputs) v.push_back(randn(out.sizes(), TensorOptions(out.dtype()).device(out.device())));
  std::vector<Tensor> diff;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) diff.push_back(t);
  GradcheckFn first = [&](const std::vector<Tensor>& in) {
    bool outer = GradMode::is_enabled();  // off while gradcheck evaluates: then no graph on the result
    EnableGradGuard enable;
    std::vector<Tensor> outs = fn(in);
    std::vector<Tensor> d;
    for (const Tensor& t : in)
      if (t.defined() && t.requires_grad()) d.push_back(t);
    std::vector<Tensor> roots, seeds;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].requires_grad()) continue;
      roots.push_back(outs[i]);
      seeds.push_back(v[i]);
    }
    if (roots.empty()) return std::vector<Tensor>{};
    std::vector<Tensor> gs = grad(roots, d, seeds, true, /*create_graph=*/outer, true);
    std::vector<Tensor> result;
    for (size_t i = 0; i < gs.size(); ++i) result.push_back(gs[i].defined() ? gs[i] : zeros_like(d[i]));
    return result;
  };
  return gradcheck(first, inputs, options);
}

}  // namespace tandem::autograd
