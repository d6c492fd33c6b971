// CPU kernels of embedding, forward and backward (contract in
// kernels/cpu/norm.h): row copies, and a deterministic scatter-add of
// gradient rows in which each task owns a range of table rows.
#include "kernels/embedding.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cuda/device_check.h"
#include "tensor/core/dtype.h"
#include "tensor/core/errors.h"

namespace tandem::cpu {

namespace {

// Below this many values an op runs on one thread (as the norm kernels).
constexpr int64_t kEmbeddingGrain = 32768;

// The indices' check, before anything is written: false when one is outside
// [0, num_weights), after throwing for a cpu tensor or recording the error
// for the next wait on an emulated cuda device (kernels/cuda/device_check.h),
// where the op then writes nothing.
template <typename I>
bool indices_valid(const Tensor& t, cuda::detail::CheckKind kind, const char* op, const I* idx, int64_t K,
                   int64_t num_weights) {
  for (int64_t k = 0; k < K; ++k) {
    const int64_t v = static_cast<int64_t>(idx[k]);
    if (v < 0 || v >= num_weights) {
      cuda::detail::found_bad_value(t.device().is_cuda() ? t.device().index() : -1, kind, op, 0, num_weights, v);
      return false;
    }
  }
  return true;
}

template <typename T, typename I>
void embedding_backward_rows(const Tensor& grad_weight, const Tensor& grad_out, const I* idx, int64_t K,
                             int64_t padding_idx, bool scale_grad_by_freq) {
  using M = opmath_t<T>;
  const int64_t num = grad_weight.size(0), D = grad_weight.size(1);
  T* gw = grad_weight.data_ptr<T>();
  const T* g = grad_out.data_ptr<T>();
  std::vector<int64_t> counts(scale_grad_by_freq ? num : 0, 0);
  for (int64_t k = 0; k < K && scale_grad_by_freq; ++k) ++counts[static_cast<int64_t>(idx[k])];
  // Each task owns the table rows [r0, r1) and adds the gradient rows that
  // land there in the order of k: deterministic for any thread count.
  const int64_t work = std::max<int64_t>(K * D, 1);
  const int64_t grain = std::max<int64_t>(1, num * kEmbeddingGrain / work);
  parallel_for(0, num, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) std::fill(gw + r * D, gw + (r + 1) * D, static_cast<T>(M(0)));
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = static_cast<int64_t>(idx[k]);
      if (r < r0 || r >= r1 || r == padding_idx) continue;
      const M scale = scale_grad_by_freq ? M(1) / static_cast<M>(counts[r]) : M(1);
      T* dst = gw + r * D;
      const T* src = g + k * D;
      TANDEM_SIMD
      for (int64_t j = 0; j < D; ++j) dst[j] = static_cast<T>(static_cast<M>(dst[j]) + static_cast<M>(src[j]) * scale);
    }
  });
}

}  // namespace

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t K = indices.numel(), num = weight.size(0), D = weight.size(1);
  const size_t row_bytes = static_cast<size_t>(D) * weight.element_size();
  const auto* src = static_cast<const char*>(weight.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  dispatch_index(indices.dtype(), "embedding (cpu)", [&]<typename I>() {
    const I* idx = indices.data_ptr<I>();
    if (!indices_valid(out, cuda::detail::CheckKind::Embedding, "embedding", idx, K, num)) return;
    if (row_bytes == 0) return;
    parallel_for(0, K, std::max<int64_t>(1, kEmbeddingGrain / std::max<int64_t>(D, 1)), [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k)
        std::memcpy(dst + k * row_bytes, src + static_cast<int64_t>(idx[k]) * row_bytes, row_bytes);
    });
  });
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices, int64_t padding_idx,
                        bool scale_grad_by_freq) {
  dispatch_floating(grad_weight.dtype(), "embedding_backward (cpu)", [&]<typename T>() {
    dispatch_index(indices.dtype(), "embedding_backward (cpu)", [&]<typename I>() {
      const I* idx = indices.data_ptr<I>();
      if (!indices_valid(grad_weight, cuda::detail::CheckKind::EmbeddingBackward, "embedding_backward", idx,
                         indices.numel(), grad_weight.size(0))) {
        std::memset(grad_weight.data_ptr(), 0, grad_weight.nbytes());
        return;
      }
      embedding_backward_rows<T>(grad_weight, grad_out, idx, indices.numel(), padding_idx, scale_grad_by_freq);
    });
  });
}

}  // namespace tandem::cpu
