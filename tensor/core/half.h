// Float16 and BFloat16 storage types with round-to-nearest-even conversion
// from float, usable from both g++ and nvcc. Arithmetic goes through float.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/core/macros.h"

namespace tandem {

namespace detail {
TANDEM_HD_INLINE uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
TANDEM_HD_INLINE float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// IEEE binary32 -> binary16, round to nearest, ties to even.
TANDEM_HD_INLINE uint16_t float_to_half_bits(float f) {
  uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  uint16_t out;
  if (u >= 0x47800000u) {  // |f| >= 65536, inf or nan: too large for half
    out = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {  // below 2^-14: half subnormal or zero
    // Adding 0.5f aligns the half's subnormal grid to the float's last
    // mantissa bits, so the FPU's own round-to-nearest-even does the work.
    const float magic = 0.5f;
    uint32_t r = float_bits(bits_float(u) + magic);
    out = static_cast<uint16_t>(r - float_bits(magic));
  } else {
    const uint32_t odd = (u >> 13) & 1u;
    u += 0xc8000fffu + odd;                // rebias exponent (-112 << 23) and round
    out = static_cast<uint16_t>(u >> 13);  // overflow lands on 0x7c00 (inf)
  }
  return static_cast<uint16_t>(out | sign);
}

TANDEM_HD_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    return bits_float(float_bits(v) | sign);
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

TANDEM_HD_INLINE uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet nan
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

TANDEM_HD_INLINE float bfloat16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }
}  // namespace detail

struct alignas(2) Half {
  uint16_t x;
  struct from_bits_t {};
  Half() = default;
  TANDEM_HOST_DEVICE constexpr Half(uint16_t bits, from_bits_t) : x(bits) {}
  TANDEM_HOST_DEVICE Half(float f) : x(detail::float_to_half_bits(f)) {}
  TANDEM_HOST_DEVICE operator float() const { return detail::half_bits_to_float(x); }
  static TANDEM_HOST_DEVICE constexpr Half from_bits(uint16_t bits) { return Half(bits, from_bits_t{}); }
};

struct alignas(2) BFloat16 {
  uint16_t x;
  struct from_bits_t {};
  BFloat16() = default;
  TANDEM_HOST_DEVICE constexpr BFloat16(uint16_t bits, from_bits_t) : x(bits) {}
  TANDEM_HOST_DEVICE BFloat16(float f) : x(detail::float_to_bfloat16_bits(f)) {}
  TANDEM_HOST_DEVICE operator float() const { return detail::bfloat16_bits_to_float(x); }
  static TANDEM_HOST_DEVICE constexpr BFloat16 from_bits(uint16_t bits) { return BFloat16(bits, from_bits_t{}); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace tandem
