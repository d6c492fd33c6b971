// CUDA copy: dst = src converted to dst's dtype, src broadcast to dst's
// shape. Contiguous copies of one dtype are a cudaMemcpyAsync; other copies
// of one dtype move raw bits by element size, through a shared-memory tile
// when the copy transposes; conversions apply fn::Cast through gpu_kernel.
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
  dispatch_all(dst.dtype(), "copy (cuda)", [&]<typename To>() {
    dispatch_all(src.dtype(), "copy (cuda)", [&]<typename From>() {
      if constexpr (!std::is_same_v<To, From>) {
        // To a 16-bit float, the cast stops at float and the store rounds
        // once, as static_cast<Half>(x) does through float on the CPU.
        using CastTo = std::conditional_t<std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>, float, To>;
        gpu_kernel<To, From>(dst, {&src}, fn::Cast<CastTo>{});
      }
    });
  });
}

}  // namespace tandem::cuda
