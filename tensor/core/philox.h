// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11; the generator of cuRAND and PyTorch's CUDA backend) and the maps from
// its 32-bit words to numbers. Host+device, so the CPU kernels and a CUDA
// kernel running one thread per element draw identical bits.
#pragma once

#include <math.h>  // ::log, ::cos, ::sqrt: callable from host and device code alike
#include <stdint.h>

#include "tensor/core/half.h"
#include "tensor/core/macros.h"

namespace tandem {

// One Philox output: 128 bits as four 32-bit words.
struct Philox4x32 {
  uint32_t w[4];
};

// Where one random fill draws from: counters offset, offset + 1, ... under
// key seed (tensor/ops/random.h defines which element uses which counter).
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

namespace detail {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // round multipliers
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments: golden ratio, sqrt(3) - 1
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

TANDEM_HD_INLINE uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

TANDEM_HD_INLINE Philox4x32 philox_round(Philox4x32 c, uint32_t k0, uint32_t k1) {
  uint32_t hi0, hi1;
  uint32_t lo0 = mulhilo32(kPhiloxM0, c.w[0], &hi0);
  uint32_t lo1 = mulhilo32(kPhiloxM1, c.w[2], &hi1);
  return Philox4x32{{hi1 ^ c.w[1] ^ k0, lo1, hi0 ^ c.w[3] ^ k1, lo0}};
}
}  // namespace detail

// The raw bijection: 10 rounds of Philox4x32 on counter ctr under key (k0, k1),
// exactly Random123's philox4x32_R(10, ctr, key).
TANDEM_HD_INLINE Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += detail::kPhiloxW0;
      k1 += detail::kPhiloxW1;
    }
    ctr = detail::philox_round(ctr, k0, k1);
  }
  return ctr;
}

// The 128-bit counter is (counter, subsequence) as two little-endian 64-bit
// halves and the key is the 64-bit seed, as in cuRAND's
// curand_init(seed, subsequence, 4 * counter).
TANDEM_HD_INLINE Philox4x32 philox(uint64_t counter, uint64_t subsequence, uint64_t key) {
  Philox4x32 c{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                static_cast<uint32_t>(subsequence), static_cast<uint32_t>(subsequence >> 32)}};
  return philox4x32_10(c, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
}

// ---- words to numbers (the definitions tensor/ops/random.h documents)

// Two words as one 64-bit draw: lo is the lower half.
TANDEM_HD_INLINE uint64_t philox_u64(uint32_t lo, uint32_t hi) { return (static_cast<uint64_t>(hi) << 32) | lo; }

// Significant bits of a uniform draw per dtype, so that a float16 or
// bfloat16 draw can never round up to 1.0 (tensor/ops/random.h).
template <typename T>
inline constexpr int kUniformDigits = 24;
template <>
inline constexpr int kUniformDigits<Half> = 11;
template <>
inline constexpr int kUniformDigits<BFloat16> = 8;

// The top `digits` bits of x scaled into [0, 1): every value is exactly
// representable in a float with `digits` significant bits, so no rounding can
// reach 1. digits: 24 float32, 11 float16, 8 bfloat16.
TANDEM_HD_INLINE float uniform_from_u32(uint32_t x, int digits) {
  return static_cast<float>(x >> (32 - digits)) * (1.0f / static_cast<float>(1u << digits));
}
// 53 bits into [0, 1) for float64.
TANDEM_HD_INLINE double uniform_from_u64(uint64_t x) { return static_cast<double>(x >> 11) * 0x1p-53; }

// Box-Muller, cos branch, in double whatever the output dtype, so that a CUDA
// kernel rounds to the same float as the CPU (the double functions differ by
// an ulp at most, far below float's rounding step). u1 is mapped into (0, 1]
// so that log(u1) is finite.
//   32-bit dtypes: u1 = (w0 + 1) 2^-32, u2 = w1 2^-32
//   float64:       u1 = (bits53(w0, w1) + 1) 2^-53, u2 = bits53(w2, w3) 2^-53
TANDEM_HD_INLINE double box_muller(double u1, double u2) {
  const double two_pi = 6.283185307179586476925286766559;
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(two_pi * u2);
}
TANDEM_HD_INLINE double normal_from_philox32(Philox4x32 r) {
  return box_muller((static_cast<double>(r.w[0]) + 1.0) * 0x1p-32, static_cast<double>(r.w[1]) * 0x1p-32);
}
TANDEM_HD_INLINE double normal_from_philox64(Philox4x32 r) {
  double u1 = (static_cast<double>(philox_u64(r.w[0], r.w[1]) >> 11) + 1.0) * 0x1p-53;
  return box_muller(u1, uniform_from_u64(philox_u64(r.w[2], r.w[3])));
}

// low + (x mod range), range = high - low > 0 as an unsigned 64-bit count.
// Modulo bias: a value is at most 1 + range / 2^64 times likelier than
// another (below 2^-32 relative for any range under 2^32).
TANDEM_HD_INLINE int64_t randint_from_u64(uint64_t x, int64_t low, uint64_t range) {
  return static_cast<int64_t>(static_cast<uint64_t>(low) + x % range);
}

}  // namespace tandem
