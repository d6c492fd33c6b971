// Dtype names and the promotion table.
#include "tensor/core/dtype.h"

#include <ostream>

namespace tandem {

std::string_view dtype_name(Dtype dtype) {
  switch (dtype) {
    case kFloat32: return "float32";
    case kFloat64: return "float64";
    case kFloat16: return "float16";
    case kBFloat16: return "bfloat16";
    case kInt64: return "int64";
    case kInt32: return "int32";
    case kUInt8: return "uint8";
    case kBool: return "bool";
  }
  return "unknown";
}

std::string_view torch_scalar_name(Dtype dtype) {
  switch (dtype) {
    case kFloat32: return "Float";
    case kFloat64: return "Double";
    case kFloat16: return "Half";
    case kBFloat16: return "BFloat16";
    case kInt64: return "Long";
    case kInt32: return "Int";
    case kUInt8: return "Byte";
    case kBool: return "Bool";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, Dtype dtype) { return os << dtype_name(dtype); }

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  // clang-format off
  // torch.promote_types, rows and columns in enum order:
  // f32 f64 f16 bf16 i64 i32 u8 b
  constexpr Dtype f4 = kFloat32, f8 = kFloat64, f2 = kFloat16, bf = kBFloat16, i8 = kInt64,
                  i4 = kInt32, u1 = kUInt8, b1 = kBool;
  static constexpr Dtype table[kNumDtypes][kNumDtypes] = {
      /* f32 */ {f4, f8, f4, f4, f4, f4, f4, f4},
      /* f64 */ {f8, f8, f8, f8, f8, f8, f8, f8},
      /* f16 */ {f4, f8, f2, f4, f2, f2, f2, f2},
      /* bf16*/ {f4, f8, f4, bf, bf, bf, bf, bf},
      /* i64 */ {f4, f8, f2, bf, i8, i8, i8, i8},
      /* i32 */ {f4, f8, f2, bf, i8, i4, i4, i4},
      /* u8  */ {f4, f8, f2, bf, i8, i4, u1, u1},
      /* b   */ {f4, f8, f2, bf, i8, i4, u1, b1},
  };
  // clang-format on
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

namespace detail {
void throw_unsupported_dtype(const char* op, Dtype dtype) {
  throw NotImplementedError(str_cat(op, " is not implemented for dtype ", dtype_name(dtype)));
}
}  // namespace detail

}  // namespace tandem
