// The DataLoader's delivery on a real GPU (this binary exits 77, skipped,
// without one): batches copied on the workers' side streams must land
// before kernels on the consumer's stream read them, and their memory must
// not be handed to the next copy while those kernels still run. Emulated
// devices copy synchronously and cannot show either; here the consumer's
// stream is kept busy so that a missing event wait or record_stream would
// read the wrong bytes.
#include <catch2/catch.hpp>

#include "helpers.h"

using namespace tandem;
using data::DataLoader;
using data::DataLoaderOptions;
using data::Example;

namespace {

// Example i: `width` float64 values all equal to i (sums stay exact), target i.
class ConstantDataset : public data::Dataset {
 public:
  ConstantDataset(size_t n, int64_t width) : n_(n), width_(width) {}
  Example<> get(size_t i) override {
    return {full({width_}, static_cast<double>(i), TensorOptions(kFloat64)),
            full({}, static_cast<int64_t>(i), TensorOptions(kInt64))};
  }
  std::optional<size_t> size() const override { return n_; }

 private:
  size_t n_;
  int64_t width_;
};

// One epoch with the consumer's stream busy before each read: the example
// sums are queued without a sync and checked at the end.
void check_epoch(int64_t width, int64_t busy, bool pin, bool on_pool_stream) {
  const size_t n = 48;
  auto ds = std::make_shared<ConstantDataset>(n, width);
  DataLoader loader(
      ds, DataLoaderOptions(4).shuffle(true).seed(11).num_workers(4).pin_memory(pin).device(Device("cuda:0")));
  std::optional<cuda::StreamGuard> guard;
  if (on_pool_stream) guard.emplace(cuda::get_stream_from_pool(0));
  Tensor work = randn({busy, busy}, TensorOptions().device("cuda:0"));
  std::vector<Tensor> sums, targets;
  for (Example<>& batch : loader) {
    Tensor w = work;
    for (int r = 0; r < 4; ++r) w = w.mm(work).mul(1e-3);            // queued work, no sync
    sums.push_back(batch.data.sum({1}) + w.sum().to(kFloat64) * 0);  // reads the batch after the busy work
    targets.push_back(batch.target.clone());
  }
  cuda::synchronize(0);
  REQUIRE(sums.size() == n / 4);
  std::vector<bool> seen(n, false);
  for (size_t b = 0; b < sums.size(); ++b) {
    Tensor t = targets[b].cpu(), s = sums[b].cpu();
    for (int64_t j = 0; j < t.numel(); ++j) {
      auto i = t.select(0, j).item().to<int64_t>();
      REQUIRE(i >= 0);
      REQUIRE(i < static_cast<int64_t>(n));
      CHECK_FALSE(seen[static_cast<size_t>(i)]);
      seen[static_cast<size_t>(i)] = true;
      CHECK(s.select(0, j).item().to<double>() == static_cast<double>(i * width));
    }
  }
}

}  // namespace

TEST_CASE("gpu: delivered batches are read after their copies land, on any consumer stream", "[gpu][data]") {
  for (bool pin : {true, false}) {
    for (bool pool : {false, true}) {
      INFO("pin_memory " << pin << ", consumer on a pool stream " << pool);
      check_epoch(1 << 16, 256, pin, pool);
    }
  }
}

TEST_CASE("gpu: 32 MB batches behind queued matrix products", "[gpu][data][large]") {
  for (bool pool : {false, true}) {
    INFO("consumer on a pool stream " << pool);
    check_epoch(1 << 20, 2048, true, pool);
  }
}

TEST_CASE("gpu: pinned batches without a device are pinned host memory", "[gpu][data]") {
  auto ds = std::make_shared<ConstantDataset>(16, 1024);
  DataLoader loader(ds, DataLoaderOptions(8).num_workers(2).pin_memory(true));
  for (Example<>& batch : loader) {
    CHECK(batch.data.is_pinned());
    CHECK(batch.data.device() == Device(kCPU));
    // A non-blocking copy from it is asynchronous and correct.
    Tensor d = batch.data.to(Device("cuda:0"), /*non_blocking=*/true);
    test::check_equal(d.cpu(), batch.data);
  }
}
