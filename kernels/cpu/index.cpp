// CPU kernels of gather, scatter_add, index_select and one_hot. Each walks an
// ElementwisePlan built from explicit strides: the indexed tensor is viewed
// with stride 0 along dim and the index value supplies that offset.
#include "kernels/index.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/loops.h"
#include "kernels/cuda/device_check.h"
#include "kernels/functors/elementwise.h"

namespace tandem::cpu {

namespace {

// t's strides in bytes, with `dim` zeroed (the index supplies that offset).
// A tensor with fewer dims than the walk (a 0-dim one beside a 1-dim index)
// does not move at all.
Shape byte_strides(const Tensor& t, size_t ndim, int64_t zero_dim = -1) {
  Shape out(ndim, 0);
  if (static_cast<size_t>(t.dim()) != ndim) return out;
  int64_t es = static_cast<int64_t>(t.element_size());
  for (size_t d = 0; d < ndim; ++d) out[d] = static_cast<int64_t>(d) == zero_dim ? 0 : t.stride(d) * es;
  return out;
}

int64_t dim_stride_bytes(const Tensor& t, int64_t dim) {
  return t.dim() == 0 ? 0 : t.stride(dim) * static_cast<int64_t>(t.element_size());
}
int64_t dim_size(const Tensor& t, int64_t dim) { return t.dim() == 0 ? 1 : t.size(dim); }

// The first out-of-range index a loop met, kept until the loop is over: an
// exception must not leave an OpenMP region. Then thrown for a cpu tensor;
// for a cuda one (an emulated device) recorded for the next wait, as a GPU's
// kernel does (kernels/cuda/device_check.h).
class BadIndex {
 public:
  void record(int64_t value) {
    if (!found_.exchange(true, std::memory_order_relaxed)) value_ = value;
  }
  void report_if_found(const Tensor& t, const char* op, int64_t dim, int64_t size) const {
    if (!found_.load()) return;
    cuda::detail::found_bad_value(t.device().is_cuda() ? t.device().index() : -1, cuda::detail::CheckKind::Index, op,
                                  dim, size, value_);
  }

 private:
  std::atomic<bool> found_{false};
  int64_t value_ = 0;
};

// out = self[.. idx ..] for a plan of (out, self with stride 0 at dim, index).
// Runs where the index does not move (index_select's inner dims) read it once.
template <typename T, typename Idx>
void gather_plan(const ElementwisePlan<3>& plan, int64_t self_dim_stride, int64_t size, BadIndex& bad) {
  parallel_for(0, plan.numel, kElementwiseGrain, [&](int64_t b, int64_t e) {
    plan_for_each<3>(plan, b, e, [&](char** ptrs, const int64_t* st, int64_t n) {
      char *po = ptrs[0], *ps = ptrs[1], *pi = ptrs[2];
      if (st[2] == 0) {
        int64_t i = static_cast<int64_t>(*reinterpret_cast<const Idx*>(pi));
        if (i < 0 || i >= size) return bad.record(i);
        const char* src = ps + i * self_dim_stride;
        if (st[0] == static_cast<int64_t>(sizeof(T)) && st[1] == static_cast<int64_t>(sizeof(T))) {
          std::memcpy(po, src, static_cast<size_t>(n) * sizeof(T));
        } else {
          for (int64_t k = 0; k < n; ++k)
            *reinterpret_cast<T*>(po + k * st[0]) = *reinterpret_cast<const T*>(src + k * st[1]);
        }
        return;
      }
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = static_cast<int64_t>(*reinterpret_cast<const Idx*>(pi + k * st[2]));
        if (i < 0 || i >= size) {
          bad.record(i);
          continue;
        }
        *reinterpret_cast<T*>(po + k * st[0]) = *reinterpret_cast<const T*>(ps + k * st[1] + i * self_dim_stride);
      }
    });
  });
}

}  // namespace

void gather(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  size_t nd = static_cast<size_t>(index.dim());
  auto plan = strided_plan<3>(
      index.sizes(),
      {static_cast<char*>(out.data_ptr()), static_cast<char*>(self.data_ptr()), static_cast<char*>(index.data_ptr())},
      {byte_strides(out, nd), byte_strides(self, nd, dim), byte_strides(index, nd)});
  BadIndex bad;
  int64_t size = dim_size(self, dim);
  dispatch_all(out.dtype(), "gather (cpu)",
               [&]<typename T>() { gather_plan<T, int64_t>(plan, dim_stride_bytes(self, dim), size, bad); });
  bad.report_if_found(out, "gather", dim, size);
}

void index_select(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  size_t nd = static_cast<size_t>(out.dim());
  // The index moves only along dim: a (K) vector laid along out's dim.
  Shape index_strides(nd, 0);
  if (nd > 0 && index.dim() == 1) index_strides[dim] = index.stride(0) * static_cast<int64_t>(index.element_size());
  auto plan = strided_plan<3>(
      out.sizes(),
      {static_cast<char*>(out.data_ptr()), static_cast<char*>(self.data_ptr()), static_cast<char*>(index.data_ptr())},
      {byte_strides(out, nd), byte_strides(self, nd, dim), index_strides});
  BadIndex bad;
  int64_t size = dim_size(self, dim);
  dispatch_all(out.dtype(), "index_select (cpu)", [&]<typename T>() {
    dispatch_index(index.dtype(), "index_select (cpu)",
                   [&]<typename Idx>() { gather_plan<T, Idx>(plan, dim_stride_bytes(self, dim), size, bad); });
  });
  bad.report_if_found(out, "index_select", dim, size);
}

void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  // The plan walks every coordinate but dim; the loop over dim runs inside one
  // plan position, so two threads never add into the same element of self.
  size_t nd = static_cast<size_t>(index.dim());
  Shape rest = index.sizes().vec();
  if (nd > 0) rest[dim] = 1;
  auto plan = strided_plan<3>(
      rest,
      {static_cast<char*>(self.data_ptr()), static_cast<char*>(index.data_ptr()), static_cast<char*>(src.data_ptr())},
      {byte_strides(self, nd), byte_strides(index, nd), byte_strides(src, nd)});
  const int64_t n_dim = dim_size(index, dim), size = dim_size(self, dim);
  const int64_t self_d = dim_stride_bytes(self, dim), index_d = dim_stride_bytes(index, dim),
                src_d = dim_stride_bytes(src, dim);
  BadIndex bad;
  dispatch_all(self.dtype(), "scatter_add (cpu)", [&]<typename T>() {
    using Op = opmath_t<T>;
    const fn::Add<Op> add{Op(1)};
    auto one = [&](char* ps, const char* pi, const char* pc) {
      int64_t i = *reinterpret_cast<const int64_t*>(pi);
      if (i < 0 || i >= size) return bad.record(i);
      T& dst = *reinterpret_cast<T*>(ps + i * self_d);
      dst = static_cast<T>(add(static_cast<Op>(dst), static_cast<Op>(*reinterpret_cast<const T*>(pc))));
    };
    int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n_dim, 1));
    parallel_for(0, plan.numel, grain, [&](int64_t b, int64_t e) {
      plan_for_each<3>(plan, b, e, [&](char** ptrs, const int64_t* st, int64_t n) {
        // Either order adds into each element of self in increasing k; walk
        // the index along whichever of the two axes is closer in memory.
        if (std::abs(index_d) <= std::abs(st[1])) {
          for (int64_t j = 0; j < n; ++j)
            for (int64_t k = 0; k < n_dim; ++k)
              one(ptrs[0] + j * st[0], ptrs[1] + j * st[1] + k * index_d, ptrs[2] + j * st[2] + k * src_d);
        } else {
          for (int64_t k = 0; k < n_dim; ++k)
            for (int64_t j = 0; j < n; ++j)
              one(ptrs[0] + j * st[0], ptrs[1] + j * st[1] + k * index_d, ptrs[2] + j * st[2] + k * src_d);
        }
      });
    });
  });
  bad.report_if_found(self, "scatter_add", dim, size);
}

void one_hot(const Tensor& out, const Tensor& in) {
  std::memset(out.data_ptr(), 0, out.nbytes());
  size_t nd = static_cast<size_t>(in.dim());
  const int64_t classes = out.size(-1);
  // out viewed at in's shape: its contiguous strides scaled by the class count.
  Shape out_strides = contiguous_strides(in.sizes());
  for (auto& s : out_strides) s *= classes * static_cast<int64_t>(sizeof(int64_t));
  auto plan = strided_plan<2>(in.sizes(), {static_cast<char*>(out.data_ptr()), static_cast<char*>(in.data_ptr())},
                              {out_strides, byte_strides(in, nd)});
  parallel_for(0, plan.numel, kElementwiseGrain, [&](int64_t b, int64_t e) {
    plan_for_each<2>(plan, b, e, [&](char** ptrs, const int64_t* st, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        int64_t c = *reinterpret_cast<const int64_t*>(ptrs[1] + k * st[1]);
        reinterpret_cast<int64_t*>(ptrs[0] + k * st[0])[c] = 1;
      }
    });
  });
}

}  // namespace tandem::cpu
