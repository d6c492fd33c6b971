// __half and __nv_bfloat16 for the simulated build: 16-bit storage with the
// hardware's conversions (round to nearest even; tensor/core/half.h does the
// arithmetic in software, bit for bit as the GPU's cvt instructions, NaN
// payloads aside). Arithmetic on them goes through float, as in Tandem's
// kernels.
#pragma once

#include <cstdint>

#include "tensor/core/half.h"

struct __half {
  unsigned short x;
};
struct __nv_bfloat16 {
  unsigned short x;
};
using __half_raw = __half;
using __nv_bfloat16_raw = __nv_bfloat16;

inline __half __ushort_as_half(unsigned short v) { return __half{v}; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline float __half2float(__half h) { return ::tandem::detail::half_bits_to_float(h.x); }
inline __half __float2half_rn(float f) { return __half{::tandem::detail::float_to_half_bits(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short v) { return __nv_bfloat16{v}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
inline float __bfloat162float(__nv_bfloat16 h) { return ::tandem::detail::bfloat16_bits_to_float(h.x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{::tandem::detail::float_to_bfloat16_bits(f)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
