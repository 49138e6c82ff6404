// The implicit-GEMM forward on Hopper's warp-group MMA (sm_90a; compiled for that target alone, see
// CMakeLists.txt). The GEMM is cuda_conv.cu's: Y (M x K) = A (M x RSC) B (RSC x K), M = N Ho Wo, A's row m the
// receptive field of output pixel m gathered from x on the fly, B the KRSC filter.
//
// A block of three warp groups computes a 128 x BN tile of Y. The producer group gathers each reduction slab
// (64 channels of one filter tap: 128 bytes a row, so a row of A is one contiguous 128-byte run of x, or zeros
// where the tap falls in the padding) and the filter's matching slab with 16-byte cp.async copies, written in
// the 128-byte swizzle the wgmma descriptors read, into a ring of kStages stages; each copy's completion
// arrives on the stage's mbarrier (cp.async.mbarrier.arrive.noinc). The two consumer groups each multiply
// 64 rows of the stage by the BN filter rows with four m64nBNk16 wgmmas, keep one slab's products in flight,
// and free the stage before (an mbarrier the producer waits on) once its products have completed.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <string>

#include "roofbench/cuda.hpp"
#include "roofbench/hopper.cuh"
#include "roofbench/kernels/cuda_conv.hpp"

namespace roofbench::kernels {
namespace {

namespace hw = roofbench::hopper;
using bf16 = __nv_bfloat16;

constexpr int kBlockM = 128;              // two consumer warp groups of 64 rows
constexpr int kSlab = 64;                 // reduction elements a stage: 64 channels of one tap, 128-byte rows
constexpr int kStages = 4;
constexpr int kGroupThreads = 128;
constexpr int kThreads = 3 * kGroupThreads;  // the producer group, then two consumer groups
constexpr int kRowChunks = kSlab / 8;        // 16-byte chunks a row
constexpr int kRowsAPass = kGroupThreads / kRowChunks;  // rows the producer group copies at once: 16
constexpr int kSwizzleAtomBytes = 1024;

template <int BN>
struct WgmmaTile {
  static_assert(BN == 64 || BN == 128);
  static constexpr int kABytes = kBlockM * kSlab * 2;
  static constexpr int kBBytes = BN * kSlab * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kBarrierBytes = 2 * kStages * 8;
  // The ring and its barriers, with room to align the ring to the swizzle's 1024-byte atom.
  static constexpr int kSharedBytes = kStages * kStageBytes + kBarrierBytes + kSwizzleAtomBytes;
  static constexpr int kARowsPerThread = kBlockM / kRowsAPass;
  static constexpr int kBRowsPerThread = BN / kRowsAPass;
  static constexpr int kAccumulators = BN / 2;  // floats a thread holds for m64nBN
};

struct WgmmaArgs {
  const bf16* x;
  const bf16* w;
  bf16* y;
  int h, w_in, c, k, s, stride, pad, ho, wo;
  int rsc;    // the reduction length R S C
  int slabs;  // R S C / kSlab
  long long m;
};

// Byte offset of 16-byte chunk `chunk` of row `row` in a K-major tile of 128-byte rows in the 128-byte swizzle.
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

__device__ __forceinline__ void cp_async_16(char* shared, const void* global, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled (padding, past the last row)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(hw::shared_address(shared)), "l"(global),
               "r"(bytes)
               : "memory");
}
// An arrival on `bar` once this thread's earlier cp.async copies have landed; the barrier's arrival count
// includes it (noinc).
__device__ __forceinline__ void cp_async_arrive(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(hw::shared_address(bar)) : "memory");
}

// A wait that ends the kernel with a trap after about 2^32 cycles (a second or two) instead of hanging the
// GPU, should a phase never complete. Out of line, so that the spin loop's registers stay out of the callers.
__device__ __noinline__ void wait_timed_out() { __trap(); }
__device__ __forceinline__ void wait_phase(std::uint64_t* bar, std::uint32_t parity) {
  if (hw::mbarrier_try_wait(bar, parity)) return;
  const long long start = clock64();
  while (!hw::mbarrier_try_wait(bar, parity))
    if (clock64() - start > (1ll << 32)) wait_timed_out();
}

// The producer group's thread `t` copies chunk t % 8 of rows t / 8 + 16 i of each slab.
template <int BN>
__device__ void produce(const WgmmaArgs& a, char* ring, std::uint64_t* full, std::uint64_t* empty, long long m0,
                        int n0, int t) {
  using Tile = WgmmaTile<BN>;
  const int chunk = t % kRowChunks, first_row = t / kRowChunks;
  // Each of this thread's A rows as the window's first input row and column and the pixel index (n H + h0) W + w0;
  // a row past the last output pixel gets a window far outside the image, so every tap reads as padding.
  int h0[Tile::kARowsPerThread], w0[Tile::kARowsPerThread], pixel[Tile::kARowsPerThread];
  const int hw_out = a.ho * a.wo;
#pragma unroll
  for (int i = 0; i < Tile::kARowsPerThread; ++i) {
    const long long m = m0 + first_row + i * kRowsAPass;
    h0[i] = -(1 << 20);
    w0[i] = 0;
    pixel[i] = 0;
    if (m < a.m) {
      const int image = int(m / hw_out), rem = int(m % hw_out);
      h0[i] = (rem / a.wo) * a.stride - a.pad;
      w0[i] = (rem % a.wo) * a.stride - a.pad;
      pixel[i] = (image * a.h + h0[i]) * a.w_in + w0[i];
    }
  }
  int r = 0, s = 0, c0 = 0, stage = 0;
  std::uint32_t phase = 0;
  for (int slab = 0; slab < a.slabs; ++slab) {
    wait_phase(&empty[stage], phase ^ 1);
    char* a_tile = ring + stage * Tile::kStageBytes;
    char* b_tile = a_tile + Tile::kABytes;
    const int tap = r * a.w_in + s;
#pragma unroll
    for (int i = 0; i < Tile::kARowsPerThread; ++i) {
      const int row = first_row + i * kRowsAPass;
      const bool valid = unsigned(h0[i] + r) < unsigned(a.h) && unsigned(w0[i] + s) < unsigned(a.w_in);
      const bf16* src = valid ? a.x + (long long)(pixel[i] + tap) * a.c + c0 + chunk * 8 : a.x;
      cp_async_16(a_tile + swizzled(row, chunk), src, valid);
    }
#pragma unroll
    for (int i = 0; i < Tile::kBRowsPerThread; ++i) {
      const int row = first_row + i * kRowsAPass;
      const bool valid = n0 + row < a.k;  // slab `slab` of filter row k starts at k R S C + slab * 64
      const bf16* src = valid ? a.w + (long long)(n0 + row) * a.rsc + slab * kSlab + chunk * 8 : a.w;
      cp_async_16(b_tile + swizzled(row, chunk), src, valid);
    }
    cp_async_arrive(&full[stage]);
    if ((c0 += kSlab) == a.c) {
      c0 = 0;
      if (++s == a.s) s = 0, ++r;
    }
    if (++stage == kStages) stage = 0, phase ^= 1;
  }
}

// Consumer group `group` (0, 1) multiplies rows 64 group .. 64 group + 63 of each stage, then stores its
// 64 x BN part of the tile.
template <int BN>
__device__ void consume(const WgmmaArgs& a, char* ring, std::uint64_t* full, std::uint64_t* empty, long long m0,
                        int n0, int group, int t) {
  using Tile = WgmmaTile<BN>;
  float d[Tile::kAccumulators];
#pragma unroll
  for (int i = 0; i < Tile::kAccumulators; ++i) d[i] = 0.f;
  int stage = 0, previous = 0;
  std::uint32_t phase = 0;
  for (int slab = 0; slab < a.slabs; ++slab) {
    wait_phase(&full[stage], phase);
    const char* a_tile = ring + stage * Tile::kStageBytes + group * 64 * 128;
    const char* b_tile = ring + stage * Tile::kStageBytes + Tile::kABytes;
    hw::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kSlab / 16; ++k)
      hw::wgmma_ss<bf16>(d, hw::descriptor_k_major_sw128(a_tile, k), hw::descriptor_k_major_sw128(b_tile, k), 1);
    hw::wgmma_commit_group();
    hw::wgmma_wait_group<1>();  // the slab before has been read: its stage goes back to the producer
    hw::fence_accumulators(d);
    if (slab > 0 && t == 0) hw::mbarrier_arrive(&empty[previous]);
    previous = stage;
    if (++stage == kStages) stage = 0, phase ^= 1;
  }
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(d);
  // d[4 j + 0..1] at (row 16 w + g, cols 8 j + 2 q ..), d[4 j + 2..3] eight rows below (hopper.cuh).
  const int warp = t / 32, g = (t % 32) / 4, q = t % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const long long m = m0 + group * 64 + warp * 16 + g + half * 8;
    if (m >= a.m) continue;
    bf16* out = a.y + m * a.k + n0;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = j * 8 + 2 * q;
      if (n0 + col < a.k)
        *reinterpret_cast<__nv_bfloat162*>(out + col) = __floats2bfloat162_rn(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
    }
  }
}

template <int BN>
__global__ void __launch_bounds__(kThreads, 1) conv2d_wgmma_kernel(const WgmmaArgs a) {
  using Tile = WgmmaTile<BN>;
  extern __shared__ char raw[];
  char* ring = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + kSwizzleAtomBytes - 1) &
                                       ~std::uintptr_t(kSwizzleAtomBytes - 1));
  auto* full = reinterpret_cast<std::uint64_t*>(ring + kStages * Tile::kStageBytes);
  std::uint64_t* empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      hw::mbarrier_init(&full[i], kGroupThreads);  // one cp.async arrival from each producer thread
      hw::mbarrier_init(&empty[i], 2);             // one from each consumer group
    }
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  const long long m0 = (long long)blockIdx.y * kBlockM;
  const int n0 = int(blockIdx.x) * BN;
  const int group = int(threadIdx.x) / kGroupThreads, t = int(threadIdx.x) % kGroupThreads;
  if (group == 0)
    produce<BN>(a, ring, full, empty, m0, n0, t);
  else
    consume<BN>(a, ring, full, empty, m0, n0, group - 1, t);
}

template <int BN>
void launch_tile(const WgmmaArgs& args, cudaStream_t stream) {
  auto* kernel = conv2d_wgmma_kernel<BN>;
  roofbench::cuda::allow_dynamic_shared_memory(kernel, WgmmaTile<BN>::kSharedBytes);
  const long long row_tiles = (args.m + kBlockM - 1) / kBlockM;
  if (row_tiles > 65535) throw Error("cuda_conv: too many row tiles for the wgmma kernel's grid");
  // The filter's column tiles vary fastest, so that the blocks reading one row tile of x run together.
  const dim3 grid(unsigned((args.k + BN - 1) / BN), unsigned(row_tiles));
  kernel<<<grid, kThreads, WgmmaTile<BN>::kSharedBytes, stream>>>(args);
  ROOFBENCH_CUDA_LAUNCH();
}

// Output channels that a 128-wide tile would leave partly idle take 64-wide tiles.
bool wide_tile(const ConvShape& s) { return s.k % 128 == 0; }

}  // namespace

std::string conv2d_implicit_gemm_wgmma_bf16_variant(const ConvShape& shape) {
  return std::string("wgmma bf16 128x") + (wide_tile(shape) ? "128" : "64") + "x" + std::to_string(kSlab) +
         " tile, " + std::to_string(kStages) + "-stage ring filled by a cp.async producer warp group";
}

void launch_conv2d_implicit_gemm_wgmma_bf16(const bf16* x, const bf16* w, bf16* y, const ConvShape& s,
                                            cudaStream_t stream) {
  if (const std::string why = conv2d_implicit_gemm_wgmma_unsupported(s); !why.empty()) throw Error(why);
  for (const void* p : {static_cast<const void*>(x), static_cast<const void*>(w), static_cast<const void*>(y)})
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) throw Error("cuda_conv: the wgmma kernel needs 16-byte aligned tensors");
  if (s.output_elements() == 0) return;
  const WgmmaArgs args{x,
                       w,
                       y,
                       int(s.h),
                       int(s.w),
                       int(s.c),
                       int(s.k),
                       int(s.s),
                       int(s.stride),
                       int(s.pad),
                       int(s.out_h()),
                       int(s.out_w()),
                       int(s.r * s.s * s.c),
                       int(s.r * s.s * s.c / kSlab),
                       (long long)(s.n * s.out_h() * s.out_w())};
  wide_tile(s) ? launch_tile<128>(args, stream) : launch_tile<64>(args, stream);
}

}  // namespace roofbench::kernels
