// CPU random fills: one Philox call per counter, its words spread over the
// elements that counter serves (tensor/ops/random.h has the map).
#include "kernels/random.h"

#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/functors/random.h"

namespace tandem::cpu {

namespace {

// A Philox call costs about as much as a few elementwise ops.
constexpr int64_t kRandomGrain = 8192;

template <typename T>
T* contiguous_data(const Tensor& out) {
  TANDEM_INTERNAL_ASSERT(out.is_contiguous(), "random fills write contiguous outputs");
  return out.data_ptr<T>();
}

// Calls f(i, philox_output, first_word) for every element i < n, where
// element i takes Per consecutive words of counter offset + i / (4 / Per).
// Threads split the counters, so each Philox call happens once.
template <int Per, typename F>
void for_each_counter(int64_t n, PhiloxState st, const F& f) {
  constexpr int64_t kPerCounter = 4 / Per;
  int64_t counters = (n + kPerCounter - 1) / kPerCounter;
  parallel_for(0, counters, kRandomGrain / kPerCounter, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      Philox4x32 r = philox(st.offset + static_cast<uint64_t>(c), 0, st.seed);
      int64_t first = c * kPerCounter;
      int64_t count = first + kPerCounter <= n ? kPerCounter : n - first;
      for (int64_t j = 0; j < count; ++j) f(first + j, r, static_cast<int>(j * Per));
    }
  });
}

}  // namespace

void uniform(const Tensor& out, PhiloxState st, double from, double to) {
  int64_t n = out.numel();
  dispatch_floating(out.dtype(), "uniform (cpu)", [&]<typename T>() {
    T* p = contiguous_data<T>(out);
    if constexpr (std::is_same_v<T, double>) {
      const double range = to - from;
      for_each_counter<2>(n, st, [&](int64_t i, const Philox4x32& r, int w) {
        p[i] = uniform_from_u64(philox_u64(r.w[w], r.w[w + 1])) * range + from;
      });
    } else {
      const float lo = static_cast<float>(from), range = static_cast<float>(to) - lo;
      for_each_counter<1>(n, st, [&](int64_t i, const Philox4x32& r, int w) {
        p[i] = static_cast<T>(uniform_from_u32(r.w[w], kUniformDigits<T>) * range + lo);
      });
    }
  });
}

void normal(const Tensor& out, PhiloxState st, double mean, double std) {
  int64_t n = out.numel();
  dispatch_floating(out.dtype(), "normal (cpu)", [&]<typename T>() {
    T* p = contiguous_data<T>(out);
    parallel_for(0, n, kRandomGrain / 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        Philox4x32 r = philox(st.offset + static_cast<uint64_t>(i), 0, st.seed);
        if constexpr (std::is_same_v<T, double>) {
          p[i] = normal_from_philox64(r) * std + mean;
        } else {
          p[i] = static_cast<T>(static_cast<float>(normal_from_philox32(r) * std + mean));
        }
      }
    });
  });
}

void randint(const Tensor& out, PhiloxState st, int64_t low, int64_t high) {
  int64_t n = out.numel();
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  dispatch_all(out.dtype(), "randint (cpu)", [&]<typename T>() {
    T* p = contiguous_data<T>(out);
    for_each_counter<2>(n, st, [&](int64_t i, const Philox4x32& r, int w) {
      p[i] = fn::from_int<T>(randint_from_u64(philox_u64(r.w[w], r.w[w + 1]), low, range));
    });
  });
}

}  // namespace tandem::cpu
