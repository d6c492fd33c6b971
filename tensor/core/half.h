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

// The conversions below have no branches: each computes every case and
// selects by masks (pick), so that a CPU loop converting 16-bit elements
// vectorizes (a branch per element stalled it: torch.relu on bfloat16 ran
// 14x slower than on float32). They give the same bits as the branching
// forms for every input (checked for all 2^32 floats).

// a where c, else b; both computed.
TANDEM_HD_INLINE uint32_t pick(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

// IEEE binary32 -> binary16, round to nearest, ties to even.
TANDEM_HD_INLINE uint16_t float_to_half_bits(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;  // |f|; compared as signed, which vectorizes without AVX-512
  // |f| >= 65520 rounds past half's largest: inf, or a quiet nan.
  const uint32_t special = pick(static_cast<int32_t>(a) > 0x7f800000, 0x7e00u, 0x7c00u);
  // Below 2^-14, a half subnormal or zero: adding 0.5f aligns the half's
  // subnormal grid to the float's last mantissa bits, so the FPU's own
  // round-to-nearest-even does the work.
  const uint32_t subnormal = float_bits(bits_float(a) + 0.5f) - float_bits(0.5f);
  // Rebias the exponent (-112 << 23) and round; an overflow lands on 0x7c00 (inf).
  const uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  const uint32_t out = pick(static_cast<int32_t>(a) >= 0x47800000, special,
                            pick(static_cast<int32_t>(a) < 0x38800000, subnormal, normal));
  return static_cast<uint16_t>(out | sign);
}

TANDEM_HD_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t bits = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa at float's places
  const uint32_t exp = bits & 0x0f800000u;
  const uint32_t normal = bits + (112u << 23);   // rebias 15 -> 127
  const uint32_t special = bits + (224u << 23);  // inf, nan: exponent 255
  // A subnormal, mantissa * 2^-24: 2^-14 * (1 + mantissa / 1024) - 2^-14, exact.
  const uint32_t subnormal = float_bits(bits_float(bits + (113u << 23)) - bits_float(113u << 23));
  return bits_float(pick(exp == 0x0f800000u, special, pick(exp == 0, subnormal, normal)) | sign);
}

TANDEM_HD_INLINE uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(pick(static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000, quiet_nan, rounded));
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
