// CUDA copy: dst = src converted to dst's dtype, src broadcast to dst's
// shape. Contiguous copies of one dtype are a cudaMemcpyAsync; other copies
// of one dtype move raw bits by element size, through a shared-memory tile
// when the copy transposes. Conversions apply fn::Cast: between the float
// dtypes (autocast's casts, which must stream at full bandwidth) through
// gpu_kernel's vector and strided kernels, one pair per kernel; to or from
// an integer or bool through one kernel per destination dtype that reads
// its source dtype from an argument (a switch a thread, as PyTorch's
// dynamic casting), which keeps 88 kernels down to 8.
#include "kernels/cuda/loops.cuh"
#include "kernels/elementwise.h"
#include "kernels/functors/elementwise.h"

namespace tandem::cuda {

namespace {

// The unsigned integer of each element size, to copy bits without caring
// what they mean.
template <size_t Bytes>
struct BitsOf;
template <>
struct BitsOf<1> {
  using type = uint8_t;
};
template <>
struct BitsOf<2> {
  using type = uint16_t;
};
template <>
struct BitsOf<4> {
  using type = uint32_t;
};
template <>
struct BitsOf<8> {
  using type = uint64_t;
};

// A transposing copy goes by kTile x kTile tiles through shared memory, so
// that both the reads and the writes of a warp are contiguous; a block of
// kTile x kTileRows threads moves one tile.
constexpr int kTile = 32;
constexpr int kTileRows = 8;
static_assert(kTile % kTileRows == 0, "a tile is made of whole passes of the block");

// dst(i, j) = src(i, j) for each matrix of the batch, where
// dst(i, j) = dst[i * dst_ld + j] and src(i, j) = src[i + j * src_ld] (in
// elements), and outer gives the byte offsets of each matrix.
struct TileGeometry {
  uint32_t rows, cols, row_tiles, col_tiles;
  int32_t dst_ld, src_ld;
};

template <typename T>
__global__ void __launch_bounds__(kTile* kTileRows)
    transpose_kernel(OffsetCalculator<2> outer, char* dst_base, const char* src_base, TileGeometry g) {
  // +1 column: the reads of a tile column hit distinct banks.
  __shared__ T tile[kTile][kTile + 1];
  const uint32_t tiles = g.row_tiles * g.col_tiles;
  const uint32_t matrix = blockIdx.x / tiles, t = blockIdx.x % tiles;
  const Offsets<2> off = outer.get(matrix);
  T* dst = reinterpret_cast<T*>(dst_base + off.at[0]);
  const T* src = reinterpret_cast<const T*>(src_base + off.at[1]);
  const uint32_t i0 = t / g.col_tiles * kTile, j0 = t % g.col_tiles * kTile;
  // Read along i, src's contiguous dim: tile[j][i].
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const uint32_t i = i0 + threadIdx.x, j = j0 + r;
    if (i < g.rows && j < g.cols)
      tile[r][threadIdx.x] = src[static_cast<int32_t>(i) + static_cast<int32_t>(j) * g.src_ld];
  }
  __syncthreads();
  // Write along j, dst's contiguous dim.
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const uint32_t i = i0 + r, j = j0 + threadIdx.x;
    if (i < g.rows && j < g.cols)
      dst[static_cast<int32_t>(i) * g.dst_ld + static_cast<int32_t>(j)] = tile[threadIdx.x][r];
  }
}

// Whether a plan piece copies through a transpose: one operand contiguous
// along the innermost dim, the other along the dim outside it, both dims
// long enough to fill a good part of a tile (shorter ones cache well).
constexpr int64_t kMinTileSide = 8;
bool swapped_inner_dims(const ElementwisePlan<2>& p, int64_t elem) {
  if (p.ndim < 2 || p.sizes[p.ndim - 1] < kMinTileSide || p.sizes[p.ndim - 2] < kMinTileSide) return false;
  const int64_t* inner = p.strides[p.ndim - 1];
  const int64_t* outer = p.strides[p.ndim - 2];
  return (inner[0] == elem && outer[1] == elem && inner[1] != elem) ||
         (inner[1] == elem && outer[0] == elem && inner[0] != elem);
}

template <typename T>
void copy_tiles(const ElementwisePlan<2>& p, cudaStream_t stream) {
  const int last = p.ndim - 1;
  constexpr int64_t elem = sizeof(T);
  const bool dst_inner = p.strides[last][0] == elem;
  const int di = dst_inner ? last - 1 : last, dj = dst_inner ? last : last - 1;
  TileGeometry g;
  g.rows = static_cast<uint32_t>(p.sizes[di]);
  g.cols = static_cast<uint32_t>(p.sizes[dj]);
  g.row_tiles = static_cast<uint32_t>(ceil_div(g.rows, kTile));
  g.col_tiles = static_cast<uint32_t>(ceil_div(g.cols, kTile));
  // Every byte stride of a tensor is a multiple of its element size.
  g.dst_ld = static_cast<int32_t>(p.strides[di][0] / elem);
  g.src_ld = static_cast<int32_t>(p.strides[dj][1] / elem);
  const int64_t matrices = p.numel / (int64_t{g.rows} * g.cols);
  const int64_t blocks = matrices * g.row_tiles * g.col_tiles;
  TANDEM_LAUNCH(static_cast<unsigned>(blocks), dim3(kTile, kTileRows), 0, stream, transpose_kernel<T>)
  (OffsetCalculator<2>(p, p.ndim - 2), p.data[0], p.data[1], g);
  TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
}

// dst = src of the same dtype, as raw bits of its size.
template <typename T>
void copy_bits(const Tensor& dst, const Tensor& src) {
  const ElementwisePlan<2> plan = make_plan<2>({&dst, &src});
  DeviceGuard guard(dst.device().index());
  cudaStream_t stream = stream_of(dst);
  for_each_32bit_piece<2>(plan, [&](const ElementwisePlan<2>& piece) {
    if (swapped_inner_dims(piece, sizeof(T)))
      copy_tiles<T>(piece, stream);
    else
      detail::launch_piece<T, T>(piece, fn::Cast<T>{}, stream);
  });
}

// To a 16-bit float, the cast stops at float and the store rounds once, as
// static_cast<Half>(x) does through float on the CPU.
template <typename To>
using cast_to_t = std::conditional_t<std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>, float, To>;

// f.template operator()<T>() with T the C++ type of a dtype, on the device.
template <typename F>
TANDEM_DEVICE_INLINE void with_dtype(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::Float32: return f.template operator()<float>();
    case Dtype::Float64: return f.template operator()<double>();
    case Dtype::Float16: return f.template operator()<Half>();
    case Dtype::BFloat16: return f.template operator()<BFloat16>();
    case Dtype::Int64: return f.template operator()<int64_t>();
    case Dtype::Int32: return f.template operator()<int32_t>();
    case Dtype::UInt8: return f.template operator()<uint8_t>();
    case Dtype::Bool: return f.template operator()<bool>();
  }
}

// dst = src converted, with src's dtype known at run time: the strided
// kernel's layout (kStridedUnroll elements a thread, a block's threads on
// adjacent elements, every load before the first store). A contiguous piece
// (src_elem > 0: src's element size) skips the offset calculator.
template <typename To>
__global__ void __launch_bounds__(kStridedThreads)
    cast_kernel(OffsetCalculator<2> calc, detail::Pointers<2> data, uint32_t numel, Dtype from, int32_t src_elem) {
  const uint32_t first = blockIdx.x * (kStridedThreads * kStridedUnroll) + threadIdx.x;
  // The offsets do not depend on the dtype: computed once, outside the switch.
  int32_t out_off[kStridedUnroll], in_off[kStridedUnroll];
#pragma unroll
  for (int j = 0; j < kStridedUnroll; ++j) {
    const uint32_t idx = first + j * kStridedThreads;
    if (idx < numel && src_elem > 0) {
      out_off[j] = static_cast<int32_t>(idx * sizeof(To));
      in_off[j] = static_cast<int32_t>(idx) * src_elem;
    } else if (idx < numel) {
      const Offsets<2> off = calc.get(idx);
      out_off[j] = off.at[0];
      in_off[j] = off.at[1];
    }
  }
  with_dtype(from, [&]<typename From>() {
    opmath_t<From> x[kStridedUnroll];
#pragma unroll
    for (int j = 0; j < kStridedUnroll; ++j)
      if (first + j * kStridedThreads < numel)
        x[j] = detail::to_opmath(*reinterpret_cast<const From*>(data.at[1] + in_off[j]));
#pragma unroll
    for (int j = 0; j < kStridedUnroll; ++j)
      if (first + j * kStridedThreads < numel)
        *reinterpret_cast<To*>(data.at[0] + out_off[j]) = detail::to_out<To>(fn::Cast<cast_to_t<To>>{}(x[j]));
  });
}

template <typename To>
void cast_copy(const Tensor& dst, const Tensor& src) {
  const ElementwisePlan<2> plan = make_plan<2>({&dst, &src});
  DeviceGuard guard(dst.device().index());
  cudaStream_t stream = stream_of(dst);
  for_each_32bit_piece<2>(plan, [&](const ElementwisePlan<2>& piece) {
    detail::Pointers<2> data{{piece.data[0], piece.data[1]}};
    const auto numel = static_cast<uint32_t>(piece.numel);
    const int64_t blocks = ceil_div(numel, kStridedThreads * kStridedUnroll);
    const auto src_elem = static_cast<int32_t>(src.element_size());
    const bool contiguous =
        piece.ndim == 1 && piece.strides[0][0] == int64_t{sizeof(To)} && piece.strides[0][1] == src_elem;
    TANDEM_LAUNCH(static_cast<unsigned>(blocks), kStridedThreads, 0, stream, cast_kernel<To>)
    (OffsetCalculator<2>(piece), data, numel, src.dtype(), contiguous ? src_elem : 0);
    TANDEM_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;  // an empty tensor may wrap a null pointer (from_blob)
  if (dst.dtype() == src.dtype()) {
    if (dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes()) {
      DeviceGuard guard(dst.device().index());
      TANDEM_CUDA_CHECK(
          cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream_of(dst)));
      return;
    }
    switch (dst.element_size()) {
      case 1: return copy_bits<BitsOf<1>::type>(dst, src);
      case 2: return copy_bits<BitsOf<2>::type>(dst, src);
      case 4: return copy_bits<BitsOf<4>::type>(dst, src);
      case 8: return copy_bits<BitsOf<8>::type>(dst, src);
    }
    TANDEM_INTERNAL_ASSERT(false, "copy (cuda): element size ", dst.element_size());
  }
  if (is_floating_point(dst.dtype()) && is_floating_point(src.dtype())) {
    return dispatch_floating(dst.dtype(), "copy (cuda)", [&]<typename To>() {
      dispatch_floating(src.dtype(), "copy (cuda)", [&]<typename From>() {
        if constexpr (!std::is_same_v<To, From>) gpu_kernel<To, From>(dst, {&src}, fn::Cast<cast_to_t<To>>{});
      });
    });
  }
  dispatch_all(dst.dtype(), "copy (cuda)", [&]<typename To>() { cast_copy<To>(dst, src); });
}

}  // namespace tandem::cuda
