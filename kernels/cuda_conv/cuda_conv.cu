#include <cuda_bf16.h>
#include <mma.h>

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "roofbench/cuda.hpp"
#include "roofbench/hopper_host.hpp"
#include "roofbench/kernels/cuda_conv.hpp"

namespace roofbench::kernels {
namespace {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

// A block computes a kBlockM x BN tile of Y with 8 warps, walking the RSC dimension in slabs of kBlockK
// through a kStages-deep ring of shared-memory buffers filled by cp.async, so that the loads of slab
// t + 2 overlap the tensor-core work on slab t.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBlockM = 128;
constexpr int kBlockK = 32;
constexpr int kStages = 3;
constexpr int kChunk = 8;                        // bf16 per 16-byte copy
constexpr int kChunksPerRow = kBlockK / kChunk;  // 4
// Rows of the staged slabs are padded by 16 bytes so that the 16 rows one WMMA load reads start on
// different banks.
constexpr int kSmemRow = kBlockK + 8;

struct ConvArgs {
  const bf16* x;
  const bf16* w;
  bf16* y;
  int n, h, w_in, c, k, r, s, stride, pad, ho, wo;
  int rsc;        // the GEMM's reduction length
  long long m;    // N Ho Wo
};

__device__ __forceinline__ void cp_async_16(void* shared, const void* global, bool valid) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled (padding, edges)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

template <int BN, int WM, int WN>
struct Tile {
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kWarpsM = kBlockM / WM;
  static_assert(kWarpsM * kWarpsN == kWarps);
  static constexpr int kFragM = WM / 16, kFragN = WN / 16;
  static constexpr int kEpilogueRow = WN + 4;  // floats; padded like the slabs
  static constexpr int kPipelineBytes = kStages * (kBlockM + BN) * kSmemRow * int(sizeof(bf16));
  static constexpr int kEpilogueBytes = kWarps * WM * kEpilogueRow * int(sizeof(float));
  static constexpr int kSharedBytes = kPipelineBytes > kEpilogueBytes ? kPipelineBytes : kEpilogueBytes;
};

// Row `row` of the A tile: the output pixel it stands for, as the first input row/column its window
// touches and the start of its image; `valid` is false past the last pixel.
struct PixelRow {
  const bf16* image;
  int h0, w0;
  bool valid;
};

__device__ __forceinline__ PixelRow pixel_row(const ConvArgs& a, long long m) {
  PixelRow p{a.x, 0, 0, m < a.m};
  if (!p.valid) return p;
  const int hw = a.ho * a.wo;
  const int image = int(m / hw);
  const int rem = int(m - (long long)image * hw);
  const int ho = rem / a.wo, wo = rem - (rem / a.wo) * a.wo;
  p.image = a.x + (long long)image * a.h * a.w_in * a.c;
  p.h0 = ho * a.stride - a.pad;
  p.w0 = wo * a.stride - a.pad;
  return p;
}

// Element (row, kk) of the implicit A: kk = (r S + s) C + c. Returns the offset into the image or -1
// for zero padding.
__device__ __forceinline__ long long receptive_offset(const ConvArgs& a, const PixelRow& p, int kk) {
  if (!p.valid || kk >= a.rsc) return -1;
  const int rs = kk / a.c, ch = kk - rs * a.c;
  const int r = rs / a.s, s = rs - r * a.s;
  const int hi = p.h0 + r, wi = p.w0 + s;
  if (hi < 0 || hi >= a.h || wi < 0 || wi >= a.w_in) return -1;
  return ((long long)hi * a.w_in + wi) * a.c + ch;
}

template <int BN, int WM, int WN, bool kVectorized>
__global__ void __launch_bounds__(kThreads, 2) conv2d_implicit_gemm_kernel(ConvArgs a) {
  using T = Tile<BN, WM, WN>;
  extern __shared__ __align__(128) unsigned char shared_raw[];
  bf16* a_slabs = reinterpret_cast<bf16*>(shared_raw);        // [kStages][kBlockM][kSmemRow]
  bf16* b_slabs = a_slabs + kStages * kBlockM * kSmemRow;     // [kStages][BN][kSmemRow]

  const int thread = threadIdx.x, warp = thread / 32, lane = thread % 32;
  const int tiles_n = (a.k + BN - 1) / BN;
  const long long m0 = (long long)(blockIdx.x / tiles_n) * kBlockM;  // consecutive blocks share an A tile
  const int n0 = int(blockIdx.x % tiles_n) * BN;

  // Each thread copies the same two rows of every A slab (rows thread/4 and thread/4 + 64, one 16-byte
  // chunk each), so their pixel geometry is worked out once.
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;  // 64
  constexpr int kPasses = kBlockM / kRowsPerPass;          // 2
  const int chunk_col = (thread % kChunksPerRow) * kChunk;
  PixelRow rows[kPasses];
#pragma unroll
  for (int i = 0; i < kPasses; ++i) rows[i] = pixel_row(a, m0 + thread / kChunksPerRow + i * kRowsPerPass);

  auto load_slab = [&](int stage, int slab) {
    const int kk0 = slab * kBlockK;
    bf16* a_dst = a_slabs + stage * kBlockM * kSmemRow;
    bf16* b_dst = b_slabs + stage * BN * kSmemRow;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      bf16* dst = a_dst + (thread / kChunksPerRow + i * kRowsPerPass) * kSmemRow + chunk_col;
      if constexpr (kVectorized) {
        const long long offset = receptive_offset(a, rows[i], kk0 + chunk_col);
        cp_async_16(dst, offset < 0 ? a.x : rows[i].image + offset, offset >= 0);
      } else {
#pragma unroll
        for (int e = 0; e < kChunk; ++e) {
          const long long offset = receptive_offset(a, rows[i], kk0 + chunk_col + e);
          dst[e] = offset < 0 ? __float2bfloat16(0.0f) : rows[i].image[offset];
        }
      }
    }
    for (int chunk = thread; chunk < BN * kChunksPerRow; chunk += kThreads) {
      const int row = chunk / kChunksPerRow, col = (chunk % kChunksPerRow) * kChunk;
      const int out_channel = n0 + row;
      bf16* dst = b_dst + row * kSmemRow + col;
      const bf16* src = a.w + (long long)out_channel * a.rsc + kk0 + col;
      if constexpr (kVectorized) {
        const bool valid = out_channel < a.k && kk0 + col < a.rsc;
        cp_async_16(dst, valid ? src : a.w, valid);
      } else {
#pragma unroll
        for (int e = 0; e < kChunk; ++e)
          dst[e] = (out_channel < a.k && kk0 + col + e < a.rsc) ? src[e] : __float2bfloat16(0.0f);
      }
    }
  };

  const int warp_m = warp / T::kWarpsN, warp_n = warp % T::kWarpsN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[T::kFragM][T::kFragN];
#pragma unroll
  for (int i = 0; i < T::kFragM; ++i)
#pragma unroll
    for (int j = 0; j < T::kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  const int slabs = (a.rsc + kBlockK - 1) / kBlockK;
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < slabs) load_slab(stage, stage);
    cp_async_commit();
  }
  for (int slab = 0; slab < slabs; ++slab) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // slab `slab` is in place, and every warp is done with the buffer refilled next
    const int next = slab + kStages - 1;
    if (next < slabs) load_slab(next % kStages, next);
    cp_async_commit();

    const bf16* a_tile = a_slabs + (slab % kStages) * kBlockM * kSmemRow + warp_m * WM * kSmemRow;
    const bf16* b_tile = b_slabs + (slab % kStages) * BN * kSmemRow + warp_n * WN * kSmemRow;
#pragma unroll
    for (int kk = 0; kk < kBlockK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a_frag[T::kFragM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b_frag[T::kFragN];
#pragma unroll
      for (int i = 0; i < T::kFragM; ++i) wmma::load_matrix_sync(a_frag[i], a_tile + i * 16 * kSmemRow + kk, kSmemRow);
#pragma unroll
      for (int j = 0; j < T::kFragN; ++j) wmma::load_matrix_sync(b_frag[j], b_tile + j * 16 * kSmemRow + kk, kSmemRow);
#pragma unroll
      for (int i = 0; i < T::kFragM; ++i)
#pragma unroll
        for (int j = 0; j < T::kFragN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the slabs' memory is reused for the epilogue

  // Each warp parks its fp32 tile in shared memory, then writes it out row by row as bf16, 8 channels
  // (16 bytes) per lane, so that a warp's stores cover whole 64-byte row segments.
  float* park = reinterpret_cast<float*>(shared_raw) + warp * WM * T::kEpilogueRow;
#pragma unroll
  for (int i = 0; i < T::kFragM; ++i)
#pragma unroll
    for (int j = 0; j < T::kFragN; ++j)
      wmma::store_matrix_sync(park + i * 16 * T::kEpilogueRow + j * 16, acc[i][j], T::kEpilogueRow,
                              wmma::mem_row_major);
  __syncwarp();
  constexpr int kLanesPerRow = WN / kChunk;
  constexpr int kRowsPerStep = 32 / kLanesPerRow;
  const int col = (lane % kLanesPerRow) * kChunk;
  const int out_channel = n0 + warp_n * WN + col;
  for (int row = lane / kLanesPerRow; row < WM; row += kRowsPerStep) {
    const long long m = m0 + warp_m * WM + row;
    if (m >= a.m) break;
    const float* src = park + row * T::kEpilogueRow + col;
    bf16* dst = a.y + m * a.k + out_channel;
    if (kVectorized && a.k % kChunk == 0 && out_channel + kChunk <= a.k) {
      __align__(16) __nv_bfloat162 packed[kChunk / 2];
#pragma unroll
      for (int e = 0; e < kChunk / 2; ++e) packed[e] = __floats2bfloat162_rn(src[2 * e], src[2 * e + 1]);
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(packed);
    } else {
      for (int e = 0; e < kChunk && out_channel + e < a.k; ++e) dst[e] = __float2bfloat16_rn(src[e]);
    }
  }
}

template <int BN, int WM, int WN, bool kVectorized>
void launch_tile(const ConvArgs& args, cudaStream_t stream) {
  using T = Tile<BN, WM, WN>;
  auto* kernel = conv2d_implicit_gemm_kernel<BN, WM, WN, kVectorized>;
  roofbench::cuda::allow_dynamic_shared_memory(kernel, T::kSharedBytes);
  const long long tiles = ((args.m + kBlockM - 1) / kBlockM) * ((args.k + BN - 1) / BN);
  if (tiles > INT_MAX) throw Error("cuda_conv: too many tiles for one grid");
  kernel<<<unsigned(tiles), kThreads, T::kSharedBytes, stream>>>(args);
  ROOFBENCH_CUDA_LAUNCH();
}

// Output channels up to 64 (the 56x56 stage, the stem) would leave half of a 128-wide tile idle.
bool narrow_tile(const ConvShape& s) { return s.k <= 64; }
bool vectorized(const ConvShape& s, const void* x, const void* w, const void* y) {
  auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return s.c % kChunk == 0 && aligned(x) && aligned(w) && aligned(y);
}

}  // namespace

std::string conv2d_implicit_gemm_bf16_variant(const ConvShape& shape) {
  const std::string tile = narrow_tile(shape) ? "128x64" : "128x128";
  return "wmma bf16 " + tile + "x" + std::to_string(kBlockK) + " tile, " + std::to_string(kStages) + "-stage " +
         (shape.c % kChunk == 0 ? "cp.async" : "element-wise gather");
}

void launch_conv2d_implicit_gemm_bf16(const bf16* x, const bf16* w, bf16* y, const ConvShape& s, cudaStream_t stream) {
  if (s.output_elements() == 0) return;
  for (const std::int64_t extent : {s.n, s.h, s.w, s.c, s.k, s.r * s.s * s.c, s.out_h() * s.out_w()})
    if (extent > INT_MAX) throw Error("cuda_conv: a dimension exceeds the kernel's 32-bit indexing");
  const ConvArgs args{x,
                      w,
                      y,
                      int(s.n),
                      int(s.h),
                      int(s.w),
                      int(s.c),
                      int(s.k),
                      int(s.r),
                      int(s.s),
                      int(s.stride),
                      int(s.pad),
                      int(s.out_h()),
                      int(s.out_w()),
                      int(s.r * s.s * s.c),
                      (long long)(s.n * s.out_h() * s.out_w())};
  const bool vec = vectorized(s, x, w, y);
  if (narrow_tile(s)) {
    vec ? launch_tile<64, 32, 32, true>(args, stream) : launch_tile<64, 32, 32, false>(args, stream);
  } else {
    vec ? launch_tile<128, 64, 32, true>(args, stream) : launch_tile<128, 64, 32, false>(args, stream);
  }
}

std::string conv2d_implicit_gemm_wgmma_unsupported(const ConvShape& s) {
  for (const std::int64_t extent : {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride, s.out_h(), s.out_w()})
    if (extent <= 0) return "cuda_conv: the wgmma kernel needs every extent of the convolution positive";
  if (s.c % 64 != 0 && s.r * s.s * s.c > kWgmmaMaxElementReduction)
    return "cuda_conv: the wgmma kernel gathers C % 64 != 0 element by element through a table of R S C <= " +
           std::to_string(kWgmmaMaxElementReduction) + " entries, got " + std::to_string(s.r * s.s * s.c);
  if (s.k % 8 != 0)
    return "cuda_conv: the wgmma kernel stores 8 output channels at a time and needs K % 8 == 0, got K = " +
           std::to_string(s.k);
  for (const std::int64_t extent : {s.n * s.h * s.w, s.k, s.r * s.s * s.c, s.n * s.out_h() * s.out_w()})
    if (extent > INT_MAX) return "cuda_conv: a dimension exceeds the wgmma kernel's 32-bit indexing";
  return "";
}

bool conv2d_implicit_gemm_wgmma_available(int device) { return roofbench::hopper::hopper_path_available(device); }

}  // namespace roofbench::kernels
