// The per-example transforms of data/transforms.h, built from tensor ops so
// that they run on every device, and TransformDataset.
//
// Random draws: each application of a random transform reserves one Philox
// counter from the generator it is given and takes its numbers from that
// counter's 128 bits (a flip: one uniform double from words 0-1; a crop: the
// top offset from words 0-1 and the left one from words 2-3). So the result
// depends only on the generator's seed and offset, and a Compose advances the
// offset by one per random transform whatever the draws decide.
#include "data/transforms.h"

#include <cmath>
#include <mutex>
#include <sstream>
#include <utility>

#include "tensor/core/errors.h"
#include "tensor/core/shape.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/index.h"

namespace tandem::data {

namespace transforms {

namespace {

std::string list_str(const std::vector<double>& values) {
  std::ostringstream ss;
  ss << "[";
  for (size_t i = 0; i < values.size(); ++i) ss << (i ? ", " : "") << values[i];
  ss << "]";
  return ss.str();
}

void check_probability(const char* op, double p) {
  TANDEM_CHECK(p >= 0 && p <= 1, ValueError, op, ": p must be a probability in [0, 1]; got ", p);
}

// The 128 random bits of one reserved counter.
Philox4x32 draw(Generator& gen) {
  PhiloxState st = gen.reserve(1);
  return philox(st.offset, 0, st.seed);
}

// (W - 1, ..., 1, 0) as int64 on the cpu, cached per width: every copy of one
// flip transform shares the cache, and loader threads read it concurrently.
// Cuda indices are made per call instead: a cached one would be read on
// other threads' streams before the kernel that wrote it was known to be done.
class ReversedIndexCache {
 public:
  Tensor get(int64_t width, Device device) {
    if (!device.is_cpu()) return arange(width - 1, -1, -1, TensorOptions(kInt64).device(device));
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [w, index] : entries_) {
      if (w == width) return index;
    }
    Tensor index = arange(width - 1, -1, -1, TensorOptions(kInt64));
    entries_.emplace_back(width, index);
    return index;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<int64_t, Tensor>> entries_;
};

}  // namespace

Transform::Transform(std::string name, Fn fn, bool random)
    : name_(std::move(name)), fn_(std::move(fn)), random_(random) {
  TANDEM_CHECK(fn_ != nullptr, ValueError, "Transform '", name_, "': the function is empty");
}

Tensor Transform::operator()(const Tensor& x) const {
  if (!random_) {
    Generator unused;
    return fn_(x, unused);
  }
  TANDEM_CHECK(!detail::loader_thread_state().active, ValueError, "Transform '", name_,
               "' was called without a generator inside a DataLoader: its random draws would depend on the ",
               "threads' timing instead of the example; pass a generator seeded for the example, ",
               "transform(x, Generator(data::example_seed(index))), as TransformDataset does");
  // One counter of the default generator seeds this call's own: the default
  // one advances by one per call whatever the transform draws.
  Philox4x32 r = draw(default_generator());
  Generator gen(philox_u64(r.w[0], r.w[1]));
  return fn_(x, gen);
}

// ---- ToFloat

namespace {
std::string to_float_name(double scale, Dtype dtype) {
  std::ostringstream ss;
  ss << "ToFloat(scale=" << scale;
  if (dtype != kFloat32) ss << ", dtype=" << dtype_name(dtype);
  ss << ")";
  return ss.str();
}

// 1 / scale when it is an integer to within a few ulps (255 for 1.0 / 255),
// else 0: dividing by it rounds once, as torchvision's x.float().div(255).
double integer_divisor(double scale) {
  if (scale == 0 || !std::isfinite(scale)) return 0;
  double inverse = std::abs(1 / scale);
  double n = std::nearbyint(inverse);
  if (n < 1 || n > 0x1p52) return 0;
  double ulp = std::nextafter(n, INFINITY) - n;
  return std::abs(inverse - n) <= 4 * ulp ? std::copysign(n, scale) : 0;
}
}  // namespace

ToFloat::ToFloat(double scale, Dtype dtype)
    : Transform(
          to_float_name(scale, dtype),
          [scale, dtype, divisor = integer_divisor(scale)](const Tensor& x, Generator&) {
            TANDEM_CHECK(x.defined(), ValueError, "ToFloat: the input is an undefined tensor");
            if (scale == 1) return x.to(dtype);
            if (x.dtype() == dtype) return divisor != 0 ? x.div(divisor) : x.mul(scale);
            Tensor y = x.to(dtype);  // a new tensor: scaling it in place changes nothing of x's
            if (divisor != 0) {
              y.div_(divisor);
            } else {
              y.mul_(scale);
            }
            return y;
          },
          false) {
  TANDEM_CHECK(is_floating_point(dtype), DtypeError, "ToFloat: dtype must be a floating dtype (float32, float64, ",
               "float16 or bfloat16); got ", dtype_name(dtype),
               ". To convert to an integer dtype, use a Lambda calling .to()");
}

// ---- Normalize

namespace {
struct NormalizeParams {
  std::vector<double> mean, std;
  bool uniform;  // one mean and one std for every channel
};

Tensor normalize(const NormalizeParams& p, const Tensor& x) {
  TANDEM_CHECK(x.defined(), ValueError, "Normalize: the input is an undefined tensor");
  TANDEM_CHECK(x.is_floating_point(), DtypeError, "Normalize: input tensor should be a float tensor. Got ",
               dtype_name(x.dtype()), "; add transforms::ToFloat() before Normalize");
  // One value each needs no channel dim: any shape is fine, a 2-D (H, W) image too.
  if (p.mean.size() > 1 || p.std.size() > 1) {
    TANDEM_CHECK(x.dim() >= 3, ShapeError, "Normalize: expected a tensor image of size (..., C, H, W) for ",
                 "per-channel mean and std, got shape ", shape_str(x.sizes()),
                 "; give one mean and one std value to normalize a tensor of any shape");
    int64_t channels = x.size(-3);
    auto fits = [channels](size_t n) { return n == 1 || static_cast<int64_t>(n) == channels; };
    TANDEM_CHECK(fits(p.mean.size()) && fits(p.std.size()), ShapeError, "Normalize: mean has ", p.mean.size(),
                 " values and std ", p.std.size(), ", but the image of shape ", shape_str(x.sizes()), " has ", channels,
                 " channels; give one value per channel, or one for all");
  }
  if (p.uniform) {
    Tensor out = x.sub(p.mean[0]);
    out.div_(p.std[0]);
    return out;
  }
  Tensor out = x.clone();
  for (int64_t c = 0; c < out.size(-3); ++c) {
    Tensor channel = out.select(-3, c);
    channel.sub_(p.mean[p.mean.size() == 1 ? 0 : c]);
    channel.div_(p.std[p.std.size() == 1 ? 0 : c]);
  }
  return out;
}

NormalizeParams normalize_params(std::vector<double> mean, std::vector<double> std) {
  TANDEM_CHECK(!mean.empty() && !std.empty(), ValueError, "Normalize: mean and std need at least one value each; got ",
               mean.size(), " and ", std.size());
  TANDEM_CHECK(mean.size() == std.size() || mean.size() == 1 || std.size() == 1, ValueError, "Normalize: mean has ",
               mean.size(), " values and std ", std.size(), "; give as many of each (one per channel), or one");
  for (size_t i = 0; i < std.size(); ++i) {
    TANDEM_CHECK(std[i] != 0, ValueError, "Normalize: std evaluated to zero (std[", i,
                 "] = 0), leading to division by zero");
  }
  auto all_equal = [](const std::vector<double>& v) {
    for (double e : v) {
      if (e != v[0]) return false;
    }
    return true;
  };
  bool uniform = all_equal(mean) && all_equal(std);
  return {std::move(mean), std::move(std), uniform};
}
}  // namespace

Normalize::Normalize(std::vector<double> mean, std::vector<double> std)
    : Transform(
          "Normalize(mean=" + list_str(mean) + ", std=" + list_str(std) + ")",
          [p = normalize_params(mean, std)](const Tensor& x, Generator&) { return normalize(p, x); }, false) {}

// ---- RandomHorizontalFlip

RandomHorizontalFlip::RandomHorizontalFlip(double p)
    : Transform(tandem::detail::str_cat("RandomHorizontalFlip(p=", p, ")"),
                [p, cache = std::make_shared<ReversedIndexCache>()](const Tensor& x, Generator& gen) {
                  TANDEM_CHECK(x.defined(), ValueError, "RandomHorizontalFlip: the input is an undefined tensor");
                  TANDEM_CHECK(x.dim() >= 2, ShapeError,
                               "RandomHorizontalFlip: expected an image (..., H, W) with at least 2 dims, got shape ",
                               shape_str(x.sizes()));
                  Philox4x32 r = draw(gen);
                  if (!(uniform_from_u64(philox_u64(r.w[0], r.w[1])) < p)) return x;
                  return x.index_select(-1, cache->get(x.size(-1), x.device()));
                }) {
  check_probability("RandomHorizontalFlip", p);
}

// ---- RandomCrop

namespace {
Tensor random_crop(const Tensor& x, int64_t h, int64_t w, int64_t pad, Generator& gen) {
  TANDEM_CHECK(x.defined(), ValueError, "RandomCrop: the input is an undefined tensor");
  TANDEM_CHECK(x.dim() >= 2, ShapeError, "RandomCrop: expected an image (..., H, W) with at least 2 dims, got shape ",
               shape_str(x.sizes()));
  int64_t height = x.size(-2), width = x.size(-1);
  int64_t padded_h = height + 2 * pad, padded_w = width + 2 * pad;
  TANDEM_CHECK(h <= padded_h && w <= padded_w, ValueError, "RandomCrop: Required crop size (", h, ", ", w,
               ") is larger than input image size (", padded_h, ", ", padded_w, ")",
               pad ? tandem::detail::str_cat(" (", height, ", ", width, ") after padding ", pad) : std::string(),
               "; crop smaller or pad more");
  Philox4x32 r = draw(gen);
  // Offsets into the padded image: top in 0..padded_h - h, left in 0..padded_w - w.
  int64_t top = randint_from_u64(philox_u64(r.w[0], r.w[1]), 0, static_cast<uint64_t>(padded_h - h + 1));
  int64_t left = randint_from_u64(philox_u64(r.w[2], r.w[3]), 0, static_cast<uint64_t>(padded_w - w + 1));
  // The window in the unpadded image's coordinates: rows [r0, r0 + h), cols [c0, c0 + w).
  int64_t r0 = top - pad, c0 = left - pad;
  if (r0 >= 0 && c0 >= 0 && r0 + h <= height && c0 + w <= width) {
    return x.narrow(-2, r0, h).narrow(-1, c0, w);  // inside the image: a view, as torchvision's crop
  }
  Shape out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes[out_sizes.size() - 2] = h;
  out_sizes[out_sizes.size() - 1] = w;
  Tensor out = zeros(out_sizes, x.options());
  // The part of the window that the image covers; the rest stays zero.
  int64_t row_begin = std::max<int64_t>(r0, 0), row_end = std::min(r0 + h, height);
  int64_t col_begin = std::max<int64_t>(c0, 0), col_end = std::min(c0 + w, width);
  if (row_begin < row_end && col_begin < col_end) {
    out.narrow(-2, row_begin - r0, row_end - row_begin)
        .narrow(-1, col_begin - c0, col_end - col_begin)
        .copy_(x.narrow(-2, row_begin, row_end - row_begin).narrow(-1, col_begin, col_end - col_begin));
  }
  return out;
}

std::string random_crop_name(int64_t h, int64_t w, int64_t pad) {
  return tandem::detail::str_cat("RandomCrop(size=(", h, ", ", w, ")",
                                 pad ? tandem::detail::str_cat(", padding=", pad) : "", ")");
}

int64_t check_crop(int64_t h, int64_t w, int64_t pad) {
  TANDEM_CHECK(h > 0 && w > 0, ValueError, "RandomCrop: the crop size must be positive; got (", h, ", ", w, ")");
  TANDEM_CHECK(pad >= 0, ValueError, "RandomCrop: padding must be >= 0; got ", pad);
  return pad;
}
}  // namespace

RandomCrop::RandomCrop(int64_t size, int64_t padding) : RandomCrop(size, size, padding) {}

RandomCrop::RandomCrop(int64_t height, int64_t width, int64_t padding)
    : Transform(random_crop_name(height, width, padding),
                [height, width, pad = check_crop(height, width, padding)](const Tensor& x, Generator& gen) {
                  return random_crop(x, height, width, pad, gen);
                }) {}

// ---- Lambda, Compose

Lambda::Lambda(std::string name, std::function<Tensor(const Tensor&)> fn)
    : Transform(
          name, [fn](const Tensor& x, Generator&) { return fn(x); }, false) {
  TANDEM_CHECK(fn != nullptr, ValueError, "Lambda '", name, "': the function is empty");
}

namespace {
Transform compose(std::vector<Transform> transforms) {
  std::string name = "Compose(";
  bool random = false;
  for (size_t i = 0; i < transforms.size(); ++i) {
    name += (i ? ", " : "") + transforms[i].name();
    random = random || transforms[i].random();
  }
  name += ")";
  return Transform(
      std::move(name),
      [ts = std::move(transforms)](const Tensor& x, Generator& gen) {
        Tensor y = x;
        for (const Transform& t : ts) y = t(y, gen);
        return y;
      },
      random);
}
}  // namespace

Compose::Compose(std::vector<Transform> transforms) : Transform(compose(std::move(transforms))) {}

}  // namespace transforms

// ---- TransformDataset

TransformDataset::TransformDataset(std::shared_ptr<Dataset> base, transforms::Transform transform)
    : base_(std::move(base)), transform_(std::move(transform)) {
  TANDEM_CHECK(base_ != nullptr, ValueError, "TransformDataset: the base dataset is null");
  if (const auto* inner = dynamic_cast<const TransformDataset*>(base_.get())) depth_ = inner->depth_ + 1;
}

Example<> TransformDataset::get(size_t index) {
  Example<> example = base_->get(index);
  Generator gen(detail::mix_seed(example_seed(index), depth_, kSeedSalt));
  example.data = transform_(example.data, gen);
  return example;
}

std::string TransformDataset::name() const {
  return tandem::detail::str_cat("TransformDataset(", base_->name(), ", ", transform_.name(), ")");
}

}  // namespace tandem::data
