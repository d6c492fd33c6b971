#pragma once
#include <cstdint>
#include <vector>

// A bfloat16 matrix operand (rows x cols): element (i, j) at data[i * rs + j * cs].
struct BfOperand {
  const uint16_t* data;
  int64_t rs, cs;
};
struct TScratch {
  std::vector<float> a, b, c;
};

void tandem_gemm_bf16(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, uint16_t* c, int64_t ldc, TScratch& s);
void tandem_convert_only(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, const float* c_src, uint16_t* c,
                         int64_t ldc, TScratch& s);
void better_gemm_bf16(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, uint16_t* c, int64_t ldc, TScratch& s);
void better_convert_only(int64_t M, int64_t N, int64_t K, BfOperand a, BfOperand b, const float* c_src, uint16_t* c,
                         int64_t ldc, TScratch& s);
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n);
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void tandem_as_compute(const uint16_t* src, int64_t n, std::vector<float>& buf);
void tandem_round_out(const float* src, uint16_t* dst, int64_t rows, int64_t L);
