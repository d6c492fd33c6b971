// The transforms (ToFloat, Normalize, RandomHorizontalFlip, RandomCrop,
// Lambda, Compose) on every device: values against hand-built expectations,
// the seeded draws recomputed from raw Philox words, every error and the
// printed names; TransformDataset over a TensorDataset.
#include <bit>
#include <cmath>
#include <set>

#include "data/transforms.h"
#include "helpers.h"
#include "tensor/core/philox.h"

using namespace tandem;
using namespace tandem::data;

namespace {
using namespace tandem::data::transforms;

// The draws transforms.cpp documents, recomputed from the raw Philox words:
// one counter per random transform, a uniform double from words 0-1, crop
// offsets from words 0-1 (top) and 2-3 (left).
Philox4x32 counter_words(uint64_t seed, uint64_t counter) { return philox(counter, 0, seed); }
bool expected_flip(uint64_t seed, uint64_t counter, double p) {
  Philox4x32 r = counter_words(seed, counter);
  uint64_t x = (static_cast<uint64_t>(r.w[1]) << 32) | r.w[0];
  return std::ldexp(static_cast<double>(x >> 11), -53) < p;
}
std::pair<int64_t, int64_t> expected_crop_offset(uint64_t seed, uint64_t counter, int64_t rows, int64_t cols) {
  Philox4x32 r = counter_words(seed, counter);
  uint64_t top = (static_cast<uint64_t>(r.w[1]) << 32) | r.w[0];
  uint64_t left = (static_cast<uint64_t>(r.w[3]) << 32) | r.w[2];
  return {static_cast<int64_t>(top % static_cast<uint64_t>(rows)),
          static_cast<int64_t>(left % static_cast<uint64_t>(cols))};
}

// An image (C, H, W) with values 1, 2, ... in row-major order (no zeros, so
// that padding shows).
Tensor counting_image(int64_t c, int64_t h, int64_t w, Device device, Dtype dtype = kUInt8) {
  std::vector<double> v(static_cast<size_t>(c * h * w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  return test::make(v, {c, h, w}, dtype, device);
}

// The (C, h, w) window at (top, left) of x (C, H, W) zero-padded by pad on
// every side, built element by element.
std::vector<double> window(const std::vector<double>& x, int64_t c, int64_t height, int64_t width, int64_t pad,
                           int64_t top, int64_t left, int64_t h, int64_t w) {
  std::vector<double> out;
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < w; ++j) {
        int64_t r = top + i - pad, q = left + j - pad;
        bool inside = r >= 0 && r < height && q >= 0 && q < width;
        out.push_back(inside ? x[static_cast<size_t>((k * height + r) * width + q)] : 0.0);
      }
    }
  }
  return out;
}
}  // namespace

DEVICE_TEST_CASE("ToFloat converts and scales", "[data][transforms]") {
  Tensor x = test::make({0, 1, 2, 127, 128, 255}, {1, 2, 3}, kUInt8, device);
  Tensor y = ToFloat()(x);
  REQUIRE(y.dtype() == kFloat32);
  REQUIRE(y.device() == device);
  test::check_values(y, {0, 1 / 255.0, 2 / 255.0, 127 / 255.0, 128 / 255.0, 1});
  CHECK(x.to_vector<int>() == std::vector<int>{0, 1, 2, 127, 128, 255});

  Tensor d = ToFloat(0.5, kFloat64)(x);
  REQUIRE(d.dtype() == kFloat64);
  test::check_values(d, {0, 0.5, 1, 63.5, 64, 127.5}, test::Tolerance{0, 0});
  Tensor one = ToFloat(1.0)(x);
  test::check_values(one, {0, 1, 2, 127, 128, 255}, test::Tolerance{0, 0});

  // A floating input of the same dtype is scaled into a new tensor.
  Tensor f = test::make({2, -4}, {2}, kFloat32, device);
  test::check_values(ToFloat(0.25)(f), {0.5, -1});
  test::check_values(f, {2, -4});
  test::check_values(ToFloat(1.0, kFloat16)(f), {2, -4});

  CHECK(ToFloat().name() == "ToFloat(scale=0.00392157)");
  CHECK(ToFloat(2, kFloat64).name() == "ToFloat(scale=2, dtype=float64)");
  CHECK_FALSE(ToFloat().random());
  REQUIRE_THROWS_ERROR(ToFloat(1.0, kInt64), DtypeError,
                       "ToFloat: dtype must be a floating dtype (float32, float64, float16 or bfloat16); got int64");
}

DEVICE_TEST_CASE("ToFloat gives torchvision's values bit for bit", "[data][transforms]") {
  // torchvision's ToTensor is x.float().div(255): one rounding of v / 255
  // (torch 1.13 gives exactly static_cast<float>(v) / 255.0f for all 256).
  // Multiplying by the float 1/255 instead differs in the last bit for 126 of
  // them. The expected values are float divisions done here, apart from any
  // tensor op.
  std::vector<double> all(256);
  for (size_t v = 0; v < all.size(); ++v) all[v] = static_cast<double>(v);
  Tensor x = test::make(all, {1, 16, 16}, kUInt8, device);
  std::vector<float> got = ToFloat()(x).to_vector<float>();
  std::vector<float> torchvision = x.to(kFloat32).div(255).to_vector<float>();
  REQUIRE(got.size() == 256);
  int differs_from_multiplying = 0;
  for (size_t v = 0; v < 256; ++v) {
    INFO("pixel value " << v);
    float expected = static_cast<float>(v) / 255.0f;
    CHECK(std::bit_cast<uint32_t>(got[v]) == std::bit_cast<uint32_t>(expected));
    CHECK(std::bit_cast<uint32_t>(got[v]) == std::bit_cast<uint32_t>(torchvision[v]));
    differs_from_multiplying += static_cast<float>(v) * static_cast<float>(1.0 / 255) != expected;
  }
  CHECK(differs_from_multiplying == 126);  // the test tells the two apart
  // float64: v / 255.0 in double; a scale whose inverse is no integer multiplies.
  std::vector<double> d = ToFloat(1.0 / 255, kFloat64)(x).to_vector<double>();
  std::vector<double> by_three = ToFloat(3, kFloat64)(x).to_vector<double>();
  for (size_t v = 0; v < 256; ++v) {
    INFO("pixel value " << v);
    CHECK(std::bit_cast<uint64_t>(d[v]) == std::bit_cast<uint64_t>(static_cast<double>(v) / 255.0));
    CHECK(by_three[v] == 3.0 * static_cast<double>(v));
  }
  // -1/255 divides by -255; 1.0 / 3 divides by 3 (its inverse is 3 to the last bit).
  test::check_values(ToFloat(-1.0 / 255)(x.narrow(-1, 0, 3).narrow(-2, 0, 1)), {-0.0, -1.0f / 255.0f, -2.0f / 255.0f},
                     test::Tolerance{0, 0});
  test::check_values(ToFloat(1.0 / 3)(x.narrow(-1, 0, 4).narrow(-2, 0, 1)), {0, 1.0f / 3.0f, 2.0f / 3.0f, 1.0f},
                     test::Tolerance{0, 0});
}

DEVICE_TEST_CASE("Normalize subtracts the mean and divides by the std per channel", "[data][transforms]") {
  // x: (2, 2, 2); channel 0 is 1..4, channel 1 is 10, 20, 30, 40.
  Tensor x = test::make({1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 2}, kFloat32, device);
  Tensor y = Normalize({0.5, 10}, {2, 4})(x);
  REQUIRE(y.device() == device);
  test::check_values(y, {0.25, 0.75, 1.25, 1.75, 0, 2.5, 5, 7.5});
  test::check_values(x, {1, 2, 3, 4, 10, 20, 30, 40});  // the input is left alone

  // One mean for both channels, one std per channel.
  test::check_values(Normalize({1}, {1, 10})(x), {0, 1, 2, 3, 0.9, 1.9, 2.9, 3.9});
  // One value each: any shape, a 2-D (H, W) image or a batch (N, C, H, W).
  test::check_values(Normalize({2}, {0.5})(x.select(0, 0)), {-2, 0, 2, 4});
  test::check_values(Normalize({0.5, 10}, {2, 4})(x.unsqueeze(0)), {0.25, 0.75, 1.25, 1.75, 0, 2.5, 5, 7.5});
  Tensor d = Normalize({1, 2}, {2, 2})(x.to(kFloat64));
  REQUIRE(d.dtype() == kFloat64);
  test::check_values(d, {0, 0.5, 1, 1.5, 4, 9, 14, 19});

  CHECK(Normalize({0.286}, {0.353}).name() == "Normalize(mean=[0.286], std=[0.353])");
  CHECK(Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}).name() ==
        "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])");

  Tensor u8 = test::make({1, 2}, {1, 1, 2}, kUInt8, device);
  REQUIRE_THROWS_ERROR(Normalize({0.5}, {0.5})(u8), DtypeError,
                       "Normalize: input tensor should be a float tensor. Got uint8; add transforms::ToFloat() before "
                       "Normalize");
  REQUIRE_THROWS_ERROR(Normalize({0.5, 0.5, 0.5}, {1, 1, 1})(x), ShapeError,
                       "Normalize: mean has 3 values and std 3, but the image of shape [2, 2, 2] has 2 channels");
  REQUIRE_THROWS_ERROR(Normalize({0.5, 1}, {1})(x.select(0, 0)), ShapeError,
                       "Normalize: expected a tensor image of size (..., C, H, W) for per-channel mean and std, got "
                       "shape [2, 2]");
  REQUIRE_THROWS_ERROR(Normalize({0.5}, {1, 0}), ValueError,
                       "Normalize: std evaluated to zero (std[1] = 0), leading to division by zero");
  REQUIRE_THROWS_ERROR(Normalize({}, {1}), ValueError, "Normalize: mean and std need at least one value each");
  REQUIRE_THROWS_ERROR(Normalize({1, 2}, {1, 2, 3}), ValueError,
                       "Normalize: mean has 2 values and std 3; give as many of each");
}

DEVICE_TEST_CASE("RandomHorizontalFlip flips the last dim with probability p", "[data][transforms]") {
  Tensor x = counting_image(2, 2, 3, device);
  Tensor flipped = RandomHorizontalFlip(1.0)(x);
  REQUIRE(flipped.device() == device);
  test::check_equal(flipped, test::make({3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}, {2, 2, 3}, kUInt8, device));
  test::check_equal(RandomHorizontalFlip(0.0)(x), x);
  // Width 1 and a plain 2-D image.
  Tensor col = counting_image(1, 3, 1, device);
  test::check_equal(RandomHorizontalFlip(1.0)(col), col);
  test::check_equal(RandomHorizontalFlip(1.0)(x.select(0, 1)),
                    test::make({9, 8, 7, 12, 11, 10}, {2, 3}, kUInt8, device));

  // Over 2000 seeds the fraction flipped is near p, and each draw is the
  // documented one.
  RandomHorizontalFlip flip(0.3);
  int flips = 0;
  for (uint64_t s = 0; s < 2000; ++s) {
    Generator gen(s * 7919 + 1);
    Tensor y = flip(x, gen);
    REQUIRE(gen.offset() == 1);
    bool did = y.to_vector<int>() != x.to_vector<int>();
    REQUIRE(did == expected_flip(s * 7919 + 1, 0, 0.3));
    flips += did;
  }
  CHECK(std::abs(flips / 2000.0 - 0.3) < 0.05);  // 5 standard deviations

  CHECK(RandomHorizontalFlip().name() == "RandomHorizontalFlip(p=0.5)");
  REQUIRE_THROWS_ERROR(RandomHorizontalFlip(1.5), ValueError,
                       "RandomHorizontalFlip: p must be a probability in [0, 1]; got 1.5");
  REQUIRE_THROWS_ERROR(RandomHorizontalFlip(-0.1), ValueError, "got -0.1");
  REQUIRE_THROWS_ERROR(RandomHorizontalFlip(1.0)(test::make({1, 2}, {2}, kUInt8, device)), ShapeError,
                       "RandomHorizontalFlip: expected an image (..., H, W) with at least 2 dims, got shape [2]");
}

DEVICE_TEST_CASE("RandomCrop pads with zeros and crops at the drawn offset", "[data][transforms]") {
  struct Case {
    int64_t c, height, width, h, w, pad;
  };
  for (Case k : {Case{1, 5, 5, 5, 5, 2}, Case{2, 4, 5, 3, 2, 1}, Case{1, 6, 4, 3, 3, 0}, Case{1, 2, 2, 4, 4, 1}}) {
    DYNAMIC_SECTION("(" << k.c << ", " << k.height << ", " << k.width << ") crop " << k.h << "x" << k.w << " padding "
                        << k.pad) {
      Tensor x = counting_image(k.c, k.height, k.width, device);
      std::vector<double> xv = x.to_vector<double>();
      RandomCrop crop(k.h, k.w, k.pad);
      int64_t rows = k.height + 2 * k.pad - k.h + 1, cols = k.width + 2 * k.pad - k.w + 1;
      std::set<std::pair<int64_t, int64_t>> seen;
      for (uint64_t s = 0; s < 300; ++s) {
        Generator gen(s);
        Tensor y = crop(x, gen);
        REQUIRE(gen.offset() == 1);
        REQUIRE(y.device() == device);
        REQUIRE(y.dtype() == kUInt8);
        REQUIRE(y.sizes() == IntArrayRef{k.c, k.h, k.w});
        auto [top, left] = expected_crop_offset(s, 0, rows, cols);
        INFO("seed " << s << ": top " << top << ", left " << left);
        REQUIRE(y.to_vector<double>() == window(xv, k.c, k.height, k.width, k.pad, top, left, k.h, k.w));
        seen.insert({top, left});
      }
      CHECK(static_cast<int64_t>(seen.size()) == rows * cols);  // every offset turns up
    }
  }
  SECTION("a window inside the image is a view, as torchvision's") {
    Tensor x = counting_image(1, 6, 6, device);
    Generator gen(3);
    CHECK(RandomCrop(4)(x, gen).shares_storage(x));
  }
  SECTION("errors and printing") {
    Tensor x = counting_image(1, 28, 28, device);
    REQUIRE_THROWS_ERROR(RandomCrop(33, 2)(x), ValueError,
                         "RandomCrop: Required crop size (33, 33) is larger than input image size (32, 32) (28, 28) "
                         "after padding 2");
    REQUIRE_THROWS_ERROR(RandomCrop(29)(x), ValueError,
                         "Required crop size (29, 29) is larger than input image size (28, 28); crop smaller");
    REQUIRE_THROWS_ERROR(RandomCrop(28, -1), ValueError, "RandomCrop: padding must be >= 0; got -1");
    REQUIRE_THROWS_ERROR(RandomCrop(0, 5, 0), ValueError, "RandomCrop: the crop size must be positive; got (0, 5)");
    REQUIRE_THROWS_ERROR(RandomCrop(2)(test::make({1, 2}, {2}, kUInt8, device)), ShapeError,
                         "RandomCrop: expected an image (..., H, W) with at least 2 dims, got shape [2]");
    CHECK(RandomCrop(28, 2).name() == "RandomCrop(size=(28, 28), padding=2)");
    CHECK(RandomCrop(24, 20, 0).name() == "RandomCrop(size=(24, 20))");
  }
}

DEVICE_TEST_CASE("Compose, Lambda and seeded determinism", "[data][transforms]") {
  // A 28x28 uint8 image with no symmetry and no zeros.
  std::vector<double> v(784);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % 251 + 1);
  Tensor x = test::make(v, {1, 28, 28}, kUInt8, device);

  Compose chain({ToFloat(), Normalize({0.286}, {0.353}), RandomHorizontalFlip(0.5), RandomCrop(28, 2)});
  CHECK(chain.name() ==
        "Compose(ToFloat(scale=0.00392157), Normalize(mean=[0.286], std=[0.353]), RandomHorizontalFlip(p=0.5), "
        "RandomCrop(size=(28, 28), padding=2))");

  // The chain is its transforms applied in order, drawing from one generator.
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    Generator gen(seed), again(seed), by_hand(seed);
    Tensor y = chain(x, gen);
    REQUIRE(gen.offset() == 2);  // one counter per random transform
    REQUIRE(y.device() == device);
    REQUIRE(y.dtype() == kFloat32);
    REQUIRE(y.sizes() == IntArrayRef{1, 28, 28});
    test::check_equal(chain(x, again), y);
    Tensor z = Normalize({0.286}, {0.353})(ToFloat()(x, by_hand), by_hand);
    z = RandomHorizontalFlip(0.5)(z, by_hand);
    test::check_equal(RandomCrop(28, 2)(z, by_hand), y);
  }
  // Different examples get different crops.
  std::set<std::vector<float>> distinct;
  for (size_t i = 0; i < 20; ++i) {
    Generator gen(example_seed(i));
    distinct.insert(chain(x, gen).to_vector<float>());
  }
  CHECK(distinct.size() >= 15);
  // A generator made in the call.
  test::check_equal(chain(x, Generator(7)), [&] {
    Generator seven(7);
    return chain(x, seven);
  }());

  Lambda square("Square", [](const Tensor& t) { return t.mul(t); });
  CHECK(square.name() == "Square");
  test::check_values(square(test::make({-2, 3}, {2}, kFloat32, device)), {4, 9});
  Compose none({});
  CHECK(none.name() == "Compose()");
  CHECK(none(x).is_same(x));
  CHECK(Compose({square, RandomCrop(1)}).name() == "Compose(Square, RandomCrop(size=(1, 1)))");
  REQUIRE_THROWS_ERROR(Lambda("nothing", nullptr), ValueError, "Lambda 'nothing': the function is empty");
  REQUIRE_THROWS_ERROR(Transform("raw", nullptr), ValueError, "Transform 'raw': the function is empty");
}

DEVICE_TEST_CASE("Transforms without a generator draw from the default one, and refuse inside a loader",
                 "[data][transforms]") {
  std::vector<double> v(784);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % 251 + 1);
  Tensor x = test::make(v, {1, 28, 28}, kUInt8, device);
  Compose chain({ToFloat(), RandomHorizontalFlip(0.5), RandomCrop(28, 2)});
  CHECK(chain.random());
  CHECK(RandomCrop(2).random());
  CHECK(RandomHorizontalFlip().random());
  CHECK(Transform("mine", [](const Tensor& t, Generator&) { return t; }).random());
  CHECK_FALSE(Compose({ToFloat(), Normalize({0.5}, {0.5}), Lambda("id", [](const Tensor& t) { return t; })}).random());
  CHECK_FALSE(Compose({}).random());

  // As torchvision's transform(x) draws from torch's global generator: one
  // counter of the cpu default generator seeds each call's own generator.
  manual_seed(123);
  std::vector<Tensor> first;
  for (uint64_t call = 0; call < 10; ++call) {
    Philox4x32 r = counter_words(123, call);
    Generator expected_gen((static_cast<uint64_t>(r.w[1]) << 32) | r.w[0]);
    first.push_back(chain(x));
    REQUIRE(default_generator().offset() == call + 1);
    test::check_equal(first.back(), chain(x, expected_gen));
  }
  std::set<std::vector<float>> distinct;
  for (const Tensor& t : first) distinct.insert(t.to_vector<float>());
  CHECK(distinct.size() >= 6);  // calls differ (of 50 flip and crop outcomes)
  manual_seed(123);
  for (const Tensor& t : first) test::check_equal(chain(x), t);  // repeatable after manual_seed
  // A transform that draws nothing leaves the default generator alone.
  ToFloat()(x);
  Normalize({0.5}, {0.5})(ToFloat()(x));
  CHECK(default_generator().offset() == 10);

  // Inside a DataLoader a random transform needs the example's generator.
  data::detail::LoaderThreadGuard guard({true, 5, 1, 0, 1});
  REQUIRE_THROWS_ERROR(
      chain(x), ValueError,
      "Transform 'Compose(ToFloat(scale=0.00392157), RandomHorizontalFlip(p=0.5), RandomCrop(size=(28, "
      "28), padding=2))' was called without a generator inside a DataLoader: its random draws would "
      "depend on the threads' timing instead of the example; pass a generator seeded for the "
      "example, transform(x, Generator(data::example_seed(index))), as TransformDataset does");
  REQUIRE_THROWS_ERROR(RandomCrop(4)(x), ValueError, "Transform 'RandomCrop(size=(4, 4))' was called without a");
  CHECK(default_generator().offset() == 10);
  test::check_equal(ToFloat()(x), x.to(kFloat32).div(255));  // draws nothing: fine anywhere
  Generator gen(example_seed(3));
  test::check_equal(chain(x, Generator(example_seed(3))), chain(x, gen));
}

TEST_CASE("TransformDataset applies a seeded transform to each example", "[data][transforms][dataset]") {
  std::vector<double> v(6 * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 200 + 1);
  Tensor data = test::make(v, {6, 1, 4, 4}, kUInt8);
  Tensor target = test::make({0, 1, 2, 3, 4, 5}, {6}, kInt64);
  Compose chain({ToFloat(), RandomHorizontalFlip(), RandomCrop(4, 1)});
  TransformDataset ds(TensorDataset(data, target), chain);
  REQUIRE(ds.size() == 6);
  CHECK(ds.depth() == 0);
  CHECK(ds.name() ==
        "TransformDataset(TensorDataset(data [6, 1, 4, 4], target [6]), Compose(ToFloat(scale=0.00392157), "
        "RandomHorizontalFlip(p=0.5), RandomCrop(size=(4, 4), padding=1)))");
  std::set<std::vector<float>> distinct;
  for (size_t i = 0; i < 6; ++i) {
    Example<> ex = ds.get(i);
    Generator gen(data::detail::mix_seed(example_seed(i), 0, TransformDataset::kSeedSalt));
    Tensor expected = chain(data.select(0, static_cast<int64_t>(i)), gen);
    test::check_equal(ex.data, expected);
    test::check_equal(ds.get(i).data, expected);  // the same every time
    CHECK(ex.target.item<int64_t>() == static_cast<int64_t>(i));
    distinct.insert(ex.data.to_vector<float>());
  }
  CHECK(distinct.size() == 6);

  // Inside a loader the seed comes from the loader's seed and epoch.
  {
    data::detail::LoaderThreadGuard guard({true, 5, 1, 0, 1});
    Generator gen(data::detail::mix_seed(data::detail::mix_seed(5, 1, 3), 0, TransformDataset::kSeedSalt));
    test::check_equal(ds.get(3).data, chain(data.select(0, 3), gen));
  }
  REQUIRE_THROWS_ERROR(ds.get(6), IndexError, "TensorDataset: index 6 is out of range for 6 examples");
  REQUIRE_THROWS_ERROR(TransformDataset(std::shared_ptr<Dataset>(), chain), ValueError,
                       "TransformDataset: the base dataset is null");
  auto shared = std::make_shared<TensorDataset>(data, target);
  TransformDataset from_shared(shared, ToFloat());
  CHECK(from_shared.base() == shared);
  CHECK(from_shared.transform().name() == "ToFloat(scale=0.00392157)");
}

namespace {
// A dataset of its own that flips each (1, 1, 2) image [1, 2] with
// probability 0.5, drawing from Generator(example_seed(index)) as docs/data.md
// suggests.
class SelfFlipping : public Dataset {
 public:
  explicit SelfFlipping(size_t n) : n_(n) {}
  Example<> get(size_t index) override {
    Generator gen(example_seed(index));
    return {RandomHorizontalFlip(0.5)(test::make({1, 2}, {1, 1, 2}, kUInt8), gen),
            test::make({static_cast<double>(index)}, {}, kInt64)};
  }
  std::optional<size_t> size() const override { return n_; }

 private:
  size_t n_;
};

bool flipped(const Tensor& image) { return image.to_vector<int>() == std::vector<int>{2, 1}; }
}  // namespace

TEST_CASE("Nested TransformDatasets draw independent numbers", "[data][transforms][dataset]") {
  // Two flips with p = 0.5 over 2000 examples: with independent draws both
  // fire for about a quarter of them (standard deviation 0.01), with shared
  // ones for half, and never just one of them.
  const size_t n = 2000;
  Tensor data = test::make(std::vector<double>(2 * n, 1), {static_cast<int64_t>(n), 1, 1, 2}, kUInt8);
  data.narrow(-1, 1, 1).fill_(2);  // every image is [1, 2]
  Tensor target = zeros({static_cast<int64_t>(n)}, kInt64);
  auto tensors = std::make_shared<TensorDataset>(data, target);

  auto count = [&](Dataset& inner, Dataset& outer) {
    size_t both = 0, one = 0;
    for (size_t i = 0; i < n; ++i) {
      Tensor in = inner.get(i).data, out = outer.get(i).data;
      bool inner_flip = flipped(in), outer_flip = in.to_vector<int>() != out.to_vector<int>();
      both += inner_flip && outer_flip;
      one += inner_flip != outer_flip;
      if (i % 100 == 0) test::check_equal(outer.get(i).data, out);  // the same every time
    }
    return std::pair<double, double>{static_cast<double>(both) / n, static_cast<double>(one) / n};
  };

  SECTION("a TransformDataset over a TransformDataset") {
    auto inner = std::make_shared<TransformDataset>(tensors, RandomHorizontalFlip(0.5));
    TransformDataset outer(inner, RandomHorizontalFlip(0.5));
    CHECK(inner->depth() == 0);
    CHECK(outer.depth() == 1);
    CHECK(TransformDataset(std::make_shared<TransformDataset>(inner, ToFloat()), ToFloat()).depth() == 2);
    auto [both, one] = count(*inner, outer);
    CHECK(both > 0.15);
    CHECK(both < 0.35);
    CHECK(one > 0.4);
    CHECK(one < 0.6);
    // The outer level draws from its own seed.
    for (size_t i : {0u, 7u, 1999u}) {
      Generator gen(data::detail::mix_seed(example_seed(i), 1, TransformDataset::kSeedSalt));
      test::check_equal(outer.get(i).data, RandomHorizontalFlip(0.5)(inner->get(i).data, gen));
    }
  }
  SECTION("a TransformDataset over a dataset drawing from example_seed(index)") {
    auto inner = std::make_shared<SelfFlipping>(n);
    TransformDataset outer(inner, RandomHorizontalFlip(0.5));
    CHECK(outer.depth() == 0);
    auto [both, one] = count(*inner, outer);
    CHECK(both > 0.15);
    CHECK(both < 0.35);
    CHECK(one > 0.4);
    CHECK(one < 0.6);
  }
}
