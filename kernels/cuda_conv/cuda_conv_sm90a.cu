// The implicit-GEMM forward on Hopper's warp-group MMA (sm_90a; compiled for that target alone, see
// CMakeLists.txt). The GEMM is cuda_conv.cu's: Y (M x K) = A (M x RSC) B (RSC x K), M = N Ho Wo, A's row m the
// receptive field of output pixel m gathered from x on the fly, B the KRSC filter.
//
// A persistent grid (as many blocks as the SMs hold) walks the 128 x BN tiles of Y, the filter's column tiles
// fastest so that the blocks reading one row tile of x run together. A block is three warp groups. The
// producer group fills a ring of stages, each one reduction slab: 64 channels of one filter tap, 128 bytes a
// row, so that a row of A is one contiguous run of x (or zeros where the tap falls in the padding), gathered by
// 16-byte cp.async copies written in the 128-byte swizzle the wgmma descriptors read, and the filter's matching
// BN x 64 box, which the copy engine (TMA) brings in that swizzle. A stage is full when every producer thread's
// copies have landed (cp.async.mbarrier.arrive.noinc) and the box's bytes have. That is for C % 64 == 0; a 1x1
// convolution at stride 1 reads x by TMA too, and any other C (the stem's 3) is gathered element by element
// (ReadA). The two consumer groups each
// multiply 64 rows of the stage by the BN filter rows (m64n128k16 or m64n64k16 wgmmas), keep one slab's products
// in flight and free each stage once the products that read it have completed. At a tile's end each group stages its
// 64 x BN part as bf16 in shared memory of its own and stores it row by row with 16-byte stores, while the
// producer already fills the ring with the next tile's slabs.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "roofbench/cuda.hpp"
#include "roofbench/hopper.cuh"
#include "roofbench/hopper_host.hpp"
#include "roofbench/kernels/cuda_conv.hpp"

namespace roofbench::kernels {
namespace {

namespace hw = roofbench::hopper;
using bf16 = __nv_bfloat16;

constexpr int kBlockM = 128;              // two consumer warp groups of 64 rows
constexpr int kSlab = 64;                 // reduction elements a stage: 64 channels of one tap, 128-byte rows
constexpr int kRowBytes = kSlab * 2;
constexpr int kGroupThreads = 128;
constexpr int kThreads = 3 * kGroupThreads;  // the producer group, then two consumer groups
constexpr int kRowChunks = kRowBytes / 16;   // 16-byte chunks a row
constexpr int kRowsAPass = kGroupThreads / kRowChunks;  // rows the producer group copies at once: 16
constexpr int kSwizzleAtomBytes = 1024;
constexpr int kGroupRows = 64;                        // rows of A (and of the tile) a consumer group multiplies
constexpr int kGroupABytes = kGroupRows * kRowBytes;  // a consumer group's rows of A in a stage

// A tile of BN filter rows (64, 128 or 256): BN 256 multiplies two 128-column parts, each its own m64n128
// accumulators, and moves registers from the producer group to the consumer groups (setmaxnreg).
template <int BN>
struct WgmmaTile {
  static_assert(BN == 64 || BN == 128 || BN == 256);
  static constexpr int kParts = BN > 128 ? BN / 128 : 1;
  static constexpr int kPartN = BN / kParts;
  static constexpr int kStages = BN == 256 ? 3 : 4;  // 3 x 48 KB of ring and 64 KB of output fit 227 KB
  static constexpr int kABytes = kBlockM * kRowBytes;
  static constexpr int kBBytes = BN * kRowBytes;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kOutRowBytes = BN * 2;
  static constexpr int kOutGroupBytes = kGroupRows * kOutRowBytes;  // a consumer group's staged output
  static constexpr int kBarrierBytes = 2 * kStages * 8;
  // The ring, the two groups' staged outputs and the barriers, with room to align the ring to the swizzle's atom.
  static constexpr int kSharedBytes = kStages * kStageBytes + 2 * kOutGroupBytes + kBarrierBytes + kSwizzleAtomBytes;
  static constexpr int kARowsPerThread = kBlockM / kRowsAPass;
  static constexpr bool kReallocate = BN == 256;
};
// What setmaxnreg leaves each group where a tile reallocates: 128 x 56 + 256 x 224 <= 64 K registers.
constexpr int kProducerRegisters = 56, kConsumerRegisters = 224;

// How the producer brings A: 64-channel slabs of one tap by cp.async (C % 64 == 0), x itself by TMA (a 1x1
// convolution at stride 1, no padding), or element by element through a table of the taps (any C, the stem's 3).
enum class ReadA { channel_slabs, pointwise, elements };

struct WgmmaArgs {
  const bf16* x;
  const bf16* w;
  bf16* y;
  int h, w_in, c, k, s, stride, pad, ho, wo;
  int rsc;    // the reduction length R S C
  int slabs;  // R S C / kSlab, rounded up (the element gather pads the last slab with zeros)
  long long m;
  int col_tiles, tiles;  // BN-wide column tiles, and all tiles of Y
};

// Tile `tile` of Y: its first row and first column.
struct TileOrigin {
  long long m0;
  int n0;
};
template <int BN>
__device__ __forceinline__ TileOrigin tile_origin(const WgmmaArgs& a, int tile) {
  return {(long long)(tile / a.col_tiles) * kBlockM, (tile % a.col_tiles) * BN};
}

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

// Every wait of the kernel: its consumers use setmaxnreg, so the trap is out of line.
__device__ __forceinline__ void wait_phase(std::uint64_t* bar, std::uint32_t parity) {
  hw::mbarrier_wait_or_trap<true>(bar, parity);
}

// Output pixel m's window: its first input row and column, and the index (n H + h0) W + w0 of its first pixel. A
// row past the last output pixel gets a window far outside the image, so every tap reads as padding.
struct Window {
  int h0 = -(1 << 20), w0 = 0, pixel = 0;
};
__device__ __forceinline__ Window window_of(const WgmmaArgs& a, int m) {
  if (m >= a.m) return {};
  const int hw_out = a.ho * a.wo, image = m / hw_out, rem = m % hw_out;
  const int h0 = (rem / a.wo) * a.stride - a.pad, w0 = (rem % a.wo) * a.stride - a.pad;
  return {h0, w0, (image * a.h + h0) * a.w_in + w0};
}

// 16 bytes of registers to shared memory.
__device__ __forceinline__ void store_shared_16(const char* at, const std::uint32_t (&v)[4]) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(hw::shared_address(at)), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

// A stage of the ring, counted over the whole walk: the producer and the consumers step through the same slabs.
template <int BN>
struct RingPosition {
  int stage = 0;
  std::uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == WgmmaTile<BN>::kStages) stage = 0, phase ^= 1;
  }
};

// A 1x1 convolution at stride 1 without padding reads x as it is: A is x viewed as an (N H W) x C matrix, and the
// copy engine brings its 128 x 64 boxes as it brings the filter's, so the producer is one thread.
template <int BN>
__device__ __forceinline__ void produce_pointwise_tile(const WgmmaArgs& a, const CUtensorMap* input,
                                                      const CUtensorMap* filter, char* ring, std::uint64_t* full,
                                                      std::uint64_t* empty, TileOrigin origin, RingPosition<BN>& at) {
  using Tile = WgmmaTile<BN>;
  for (int slab = 0; slab < a.slabs; ++slab, at.advance()) {
    wait_phase(&empty[at.stage], at.phase ^ 1);
    char* a_tile = ring + at.stage * Tile::kStageBytes;
    hw::mbarrier_arrive_expect_tx(&full[at.stage], Tile::kABytes + Tile::kBBytes);
    hw::tma_load_2d(a_tile, input, &full[at.stage], int(origin.m0), slab * kSlab);
    hw::tma_load_2d(a_tile + Tile::kABytes, filter, &full[at.stage], origin.n0, slab * kSlab);
  }
}

// Any C: producer thread t gathers row t of A element by element: reduction index k < R S C of a slab is tap
// (r, s) = tap_rs[k] and channel c, x's element window + tap_offset[k] (tables built by the kernel), and each 8
// elements go to shared memory in one 16-byte store. The filter's rows are copied the same way (R S C need not
// give TMA's 16-byte rows). Shared-memory writes of the generic proxy, so each thread fences them for wgmma's
// async proxy before it arrives on the stage.
template <int BN>
__device__ __forceinline__ void produce_elements_tile(const WgmmaArgs& a, char* ring, std::uint64_t* full,
                                                     std::uint64_t* empty, TileOrigin origin, int t,
                                                     RingPosition<BN>& at, const int* tap_offset, const int* tap_rs) {
  using Tile = WgmmaTile<BN>;
  const auto* x = reinterpret_cast<const unsigned short*>(a.x);
  const auto* w = reinterpret_cast<const unsigned short*>(a.w);
  const Window window = window_of(a, int(origin.m0) + t);
  const long long first = (long long)window.pixel * a.c;  // x's element at (n, h0, w0, 0)
  for (int slab = 0; slab < a.slabs; ++slab, at.advance()) {
    wait_phase(&empty[at.stage], at.phase ^ 1);
    char* a_tile = ring + at.stage * Tile::kStageBytes;
#pragma unroll  // all 64 loads of the row in flight at once
    for (int chunk = 0; chunk < kRowChunks; ++chunk) {
      std::uint32_t packed[4];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int k = slab * kSlab + chunk * 8 + e, rs = tap_rs[k];
        // Bitwise, not &&: short-circuit tests branch around each load, and the gather ran at 0.6x its speed.
        const bool valid = (k < a.rsc) & (unsigned(window.h0 + (rs >> 16)) < unsigned(a.h)) &
                           (unsigned(window.w0 + (rs & 0xFFFF)) < unsigned(a.w_in));
        const std::uint32_t bits = valid ? x[first + tap_offset[k]] : 0u;
        packed[e / 2] = e % 2 ? packed[e / 2] | bits << 16 : bits;
      }
      store_shared_16(a_tile + swizzled(t, chunk), packed);
    }
    for (int index = t; index < BN * kRowChunks; index += kGroupThreads) {
      const int row = index / kRowChunks, chunk = index % kRowChunks, k0 = slab * kSlab + chunk * 8;
      std::uint32_t packed[4];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const bool valid = origin.n0 + row < a.k && k0 + e < a.rsc;
        const std::uint32_t bits = valid ? w[(long long)(origin.n0 + row) * a.rsc + k0 + e] : 0u;
        packed[e / 2] = e % 2 ? packed[e / 2] | bits << 16 : bits;
      }
      store_shared_16(a_tile + Tile::kABytes + swizzled(row, chunk), packed);
    }
    hw::fence_proxy_async_shared();
    hw::mbarrier_arrive(&full[at.stage]);
  }
}

// The element gather's tables for reduction indices 0 .. slabs x 64 - 1 (those from R S C on read nothing),
// built by the block's threads.
__device__ __forceinline__ void build_tap_tables(const WgmmaArgs& a, int* tap_offset, int* tap_rs) {
  for (int k = int(threadIdx.x); k < a.slabs * kSlab; k += int(blockDim.x)) {
    const int r = k / (a.s * a.c), rem = k % (a.s * a.c), s = rem / a.c, c = rem % a.c;
    const bool inside = k < a.rsc;
    tap_offset[k] = inside ? (r * a.w_in + s) * a.c + c : 0;
    tap_rs[k] = inside ? r << 16 | s : 0;
  }
}

// The producer group's thread `t` copies chunk t % 8 of rows t / 8 + 16 i of each slab of A; thread 0 also
// asks the copy engine for the filter's box.
template <int BN>
__device__ __forceinline__ void produce_channel_slabs_tile(const WgmmaArgs& a, const CUtensorMap* filter, char* ring,
                                                          std::uint64_t* full, std::uint64_t* empty, TileOrigin origin,
                                                          int t, RingPosition<BN>& at) {
  using Tile = WgmmaTile<BN>;
  const int chunk = t % kRowChunks, first_row = t / kRowChunks;
  Window window[Tile::kARowsPerThread];  // of this thread's rows (M < 2^31: conv2d_implicit_gemm_wgmma_unsupported)
#pragma unroll
  for (int i = 0; i < Tile::kARowsPerThread; ++i) window[i] = window_of(a, int(origin.m0) + first_row + i * kRowsAPass);
  int r = 0, s = 0, c0 = 0;
  for (int slab = 0; slab < a.slabs; ++slab, at.advance()) {
    wait_phase(&empty[at.stage], at.phase ^ 1);
    char* a_tile = ring + at.stage * Tile::kStageBytes;
    if (t == 0) {
      hw::mbarrier_arrive_expect_tx(&full[at.stage], Tile::kBBytes);
      hw::tma_load_2d(a_tile + Tile::kABytes, filter, &full[at.stage], origin.n0, slab * kSlab);
    }
    const int tap = r * a.w_in + s;
#pragma unroll
    for (int i = 0; i < Tile::kARowsPerThread; ++i) {
      const int row = first_row + i * kRowsAPass;
      const bool valid = unsigned(window[i].h0 + r) < unsigned(a.h) && unsigned(window[i].w0 + s) < unsigned(a.w_in);
      const bf16* src = valid ? a.x + (long long)(window[i].pixel + tap) * a.c + c0 + chunk * 8 : a.x;
      cp_async_16(a_tile + swizzled(row, chunk), src, valid);
    }
    cp_async_arrive(&full[at.stage]);
    if ((c0 += kSlab) == a.c) {
      c0 = 0;
      if (++s == a.s) s = 0, ++r;
    }
  }
}

// Synchronises the 128 threads of consumer group `group` alone (named barriers 1 and 2).
__device__ __forceinline__ void group_sync(int group) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(1 + group), "n"(kGroupThreads) : "memory");
}

// Consumer group `group` (0, 1) multiplies rows 64 group .. 64 group + 63 of each of the tile's stages into d,
// freeing each stage once the products that read it have completed.
template <int BN>
__device__ __forceinline__ void multiply_tile(const WgmmaArgs& a, char* ring, std::uint64_t* full,
                                              std::uint64_t* empty, int group, int t, RingPosition<BN>& at,
                                              float (&d)[WgmmaTile<BN>::kParts][WgmmaTile<BN>::kPartN / 2]) {
  using Tile = WgmmaTile<BN>;
  const bool releases = t == 0;
  int previous = 0;
  for (int slab = 0; slab < a.slabs; ++slab, at.advance()) {
    wait_phase(&full[at.stage], at.phase);
    const char* a_tile = ring + at.stage * Tile::kStageBytes + group * kGroupABytes;
    const char* b_tile = ring + at.stage * Tile::kStageBytes + Tile::kABytes;
    hw::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kSlab / 16; ++k)
#pragma unroll
      for (int p = 0; p < Tile::kParts; ++p)
        hw::wgmma_ss<bf16>(d[p], hw::descriptor_k_major_sw128(a_tile, k),
                           hw::descriptor_k_major_sw128(b_tile + p * Tile::kPartN * kRowBytes, k),
                           slab > 0 || k > 0 ? 1u : 0u);
    hw::wgmma_commit_group();
    hw::wgmma_wait_group<1>();  // the slab before has been read: its stage goes back to the producer
    if (releases && slab > 0) hw::mbarrier_arrive(&empty[previous]);
    previous = at.stage;
  }
  hw::wgmma_wait_group<0>();
#pragma unroll
  for (int p = 0; p < Tile::kParts; ++p) hw::fence_accumulators(d[p]);
  if (releases) hw::mbarrier_arrive(&empty[previous]);
}

// Consumer group `group` stages its 64 x BN part of the tile in `out` (its 16-byte chunks XOR-swizzled by the row
// against bank conflicts), then stores it row by row, 16 bytes a thread. d[4 j + 0..1] sits at (row 16 w + g,
// cols 8 j + 2 q ..), d[4 j + 2..3] eight rows below (hopper.cuh). Shared addresses are 32-bit offsets of the
// shared window: generic pointers would take two registers for each of the 64 stores ptxas schedules together.
template <int BN>
__device__ __forceinline__ void store_tile(const WgmmaArgs& a, char* out, int group, int t, TileOrigin origin,
                                           const float (&d)[WgmmaTile<BN>::kParts][WgmmaTile<BN>::kPartN / 2]) {
  using Tile = WgmmaTile<BN>;
  const std::uint32_t base = hw::shared_address(out);
  group_sync(group);  // the group's stores of the tile before have read `out`
  const int warp = t / 32, g = (t % 32) / 4, q = t % 4;
  // Rows 16 w + g and eight below share row % 8 = g, so one swizzle serves both halves.
  const std::uint32_t row_base = base + (warp * 16 + g) * Tile::kOutRowBytes + 4 * q;
#pragma unroll
  for (int p = 0; p < Tile::kParts; ++p)
#pragma unroll
    for (int j = 0; j < Tile::kPartN / 8; ++j) {
      const std::uint32_t at = row_base + (((p * Tile::kPartN / 8 + j) ^ g) << 4);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(d[p][4 * j + 2 * half], d[p][4 * j + 2 * half + 1]);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at + half * 8 * Tile::kOutRowBytes),
                     "r"(*reinterpret_cast<const std::uint32_t*>(&pair))
                     : "memory");
      }
    }
  group_sync(group);
  constexpr int kChunks = BN / 8;  // 16-byte chunks an output row
  for (int index = t; index < kGroupRows * kChunks; index += kGroupThreads) {
    const int row = index / kChunks, chunk = index % kChunks;
    const long long m = origin.m0 + group * kGroupRows + row;
    const int col = origin.n0 + chunk * 8;
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(base + row * Tile::kOutRowBytes + ((chunk ^ (row & 7)) << 4))
                 : "memory");
    if (m < a.m && col < a.k) *reinterpret_cast<uint4*>(a.y + m * a.k + col) = v;
  }
}

// The arrivals that fill a stage: the boxes' thread, and each producer thread whose copies or stores are its own.
constexpr unsigned full_arrivals(ReadA read) {
  return read == ReadA::pointwise ? 1 : read == ReadA::elements ? kGroupThreads : kGroupThreads + 1;
}

// kRead: how A comes (ReadA); `input` is x's map for ReadA::pointwise, unused otherwise. ReadA::elements keeps
// its tables after the barriers (WgmmaTile::kSharedBytes plus tap_table_bytes).
template <int BN, ReadA kRead>
__global__ void __launch_bounds__(kThreads, 1)
    conv2d_wgmma_kernel(const WgmmaArgs a, const __grid_constant__ CUtensorMap input,
                        const __grid_constant__ CUtensorMap filter) {
  using Tile = WgmmaTile<BN>;
  extern __shared__ char raw[];
  char* ring = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + kSwizzleAtomBytes - 1) &
                                       ~std::uintptr_t(kSwizzleAtomBytes - 1));
  char* out = ring + Tile::kStages * Tile::kStageBytes;
  auto* full = reinterpret_cast<std::uint64_t*>(out + 2 * Tile::kOutGroupBytes);
  std::uint64_t* empty = full + Tile::kStages;
  int* tap_offset = reinterpret_cast<int*>(empty + Tile::kStages);
  int* tap_rs = tap_offset + a.slabs * kSlab;
  if constexpr (kRead == ReadA::elements) build_tap_tables(a, tap_offset, tap_rs);
  if (threadIdx.x == 0) {
    if constexpr (kRead != ReadA::elements) hw::tma_prefetch_map(&filter);
    if constexpr (kRead == ReadA::pointwise) hw::tma_prefetch_map(&input);
    for (int i = 0; i < Tile::kStages; ++i) {
      hw::mbarrier_init(&full[i], full_arrivals(kRead));
      hw::mbarrier_init(&empty[i], 2);  // one from each consumer group
    }
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  const int group = int(threadIdx.x) / kGroupThreads, t = int(threadIdx.x) % kGroupThreads;
  RingPosition<BN> at;
  if (group == 0) {
    if constexpr (Tile::kReallocate) hw::setmaxnreg_dec<kProducerRegisters>();
    for (int tile = int(blockIdx.x); tile < a.tiles; tile += int(gridDim.x))
      if constexpr (kRead == ReadA::channel_slabs)
        produce_channel_slabs_tile<BN>(a, &filter, ring, full, empty, tile_origin<BN>(a, tile), t, at);
      else if constexpr (kRead == ReadA::elements)
        produce_elements_tile<BN>(a, ring, full, empty, tile_origin<BN>(a, tile), t, at, tap_offset, tap_rs);
      else if (t == 0)
        produce_pointwise_tile<BN>(a, &input, &filter, ring, full, empty, tile_origin<BN>(a, tile), at);
  } else {
    if constexpr (Tile::kReallocate) hw::setmaxnreg_inc<kConsumerRegisters>();
    for (int tile = int(blockIdx.x); tile < a.tiles; tile += int(gridDim.x)) {
      float d[Tile::kParts][Tile::kPartN / 2];  // the tile's first product overwrites them (no other
                                                // instruction may define them, or ptxas serialises the wgmmas)
      multiply_tile<BN>(a, ring, full, empty, group - 1, t, at, d);
      store_tile<BN>(a, out + (group - 1) * Tile::kOutGroupBytes, group - 1, t, tile_origin<BN>(a, tile), d);
    }
  }
}

// The element gather's two tables, for reduction indices up to slabs x 64.
constexpr int tap_table_bytes(int slabs) { return 2 * slabs * kSlab * int(sizeof(int)); }
constexpr int kMaxSharedBytes = 227 * 1024;  // a block's dynamic shared memory on compute capability 9.0
static_assert(kWgmmaMaxElementReduction % kSlab == 0 &&
              WgmmaTile<256>::kSharedBytes + tap_table_bytes(int(kWgmmaMaxElementReduction / kSlab)) <= kMaxSharedBytes);

template <int BN, ReadA kRead>
void launch_tile(WgmmaArgs args, cudaStream_t stream) {
  using Tile = WgmmaTile<BN>;
  auto* kernel = conv2d_wgmma_kernel<BN, kRead>;
  const int shared_bytes = Tile::kSharedBytes + (kRead == ReadA::elements ? tap_table_bytes(args.slabs) : 0);
  roofbench::cuda::allow_dynamic_shared_memory(kernel, shared_bytes);
  args.col_tiles = (args.k + BN - 1) / BN;
  const long long tiles = (args.m + kBlockM - 1) / kBlockM * args.col_tiles;
  if (tiles > INT_MAX) throw Error("cuda_conv: too many tiles for the wgmma kernel");
  args.tiles = int(tiles);
  // The filter as a K x RSC matrix read in BN x 64 boxes; x, for a pointwise convolution, as an M x C one in
  // 128 x 64 boxes. The element gather reads both itself.
  const auto matrix = [](const bf16* data, long long rows, int cols) {
    return hw::Matrix2d{data, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, std::uint64_t(rows), std::uint64_t(cols),
                        std::uint64_t(cols) * 2};
  };
  CUtensorMap filter{}, input{};
  if constexpr (kRead != ReadA::elements)
    filter = hw::make_tensor_map_2d(matrix(args.w, args.k, args.rsc), BN, kSlab, hw::TileSwizzle::bytes128);
  if constexpr (kRead == ReadA::pointwise)
    input = hw::make_tensor_map_2d(matrix(args.x, args.m, args.c), kBlockM, kSlab, hw::TileSwizzle::bytes128);
  int device = 0, sms = 0, per_sm = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, shared_bytes));
  const int blocks = int(std::min<long long>(tiles, (long long)sms * std::max(per_sm, 1)));
  kernel<<<blocks, kThreads, shared_bytes, stream>>>(args, input, filter);
  ROOFBENCH_CUDA_LAUNCH();
}

// A 1x1 convolution at stride 1 without padding reads x as it is (produce_pointwise_tile); C % 64 == 0 reads
// channel slabs (produce_channel_slabs_tile); any other C, elements (produce_elements_tile).
ReadA read_a(const ConvShape& s) {
  if (s.c % kSlab != 0) return ReadA::elements;
  return s.r == 1 && s.s == 1 && s.stride == 1 && s.pad == 0 ? ReadA::pointwise : ReadA::channel_slabs;
}

template <int BN>
void launch_reading(const WgmmaArgs& args, ReadA read, cudaStream_t stream) {
  switch (read) {
    case ReadA::pointwise: return launch_tile<BN, ReadA::pointwise>(args, stream);
    case ReadA::channel_slabs: return launch_tile<BN, ReadA::channel_slabs>(args, stream);
    case ReadA::elements: return launch_tile<BN, ReadA::elements>(args, stream);
  }
}

// The widest filter tile (256, 128) that divides K, else 64: a tile reaching past the last output channel multiplies
// zeros there.
int tile_columns(const ConvShape& s) { return s.k % 256 == 0 ? 256 : s.k % 128 == 0 ? 128 : 64; }

}  // namespace

std::string conv2d_implicit_gemm_wgmma_bf16_variant(const ConvShape& shape) {
  const ReadA read = read_a(shape);
  return "wgmma bf16 128x" + std::to_string(tile_columns(shape)) + "x" + std::to_string(kSlab) + " tile, persistent, " +
         (read == ReadA::pointwise       ? "x and w by TMA"
          : read == ReadA::channel_slabs ? "x's channel slabs by cp.async, w by TMA"
                                         : "x and w gathered element by element");
}

void launch_conv2d_implicit_gemm_wgmma_bf16(const bf16* x, const bf16* w, bf16* y, const ConvShape& s,
                                            cudaStream_t stream) {
  if (const std::string why = conv2d_implicit_gemm_wgmma_unsupported(s); !why.empty()) throw Error(why);
  for (const void* p : {static_cast<const void*>(x), static_cast<const void*>(w), static_cast<const void*>(y)})
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) throw Error("cuda_conv: the wgmma kernel needs 16-byte aligned tensors");
  if (s.output_elements() == 0) return;
  const int reduction = int(s.r * s.s * s.c);
  // The tiles are counted by launch_tile<BN>, which knows BN.
  const WgmmaArgs args{.x = x, .w = w, .y = y, .h = int(s.h), .w_in = int(s.w), .c = int(s.c), .k = int(s.k),
                       .s = int(s.s), .stride = int(s.stride), .pad = int(s.pad), .ho = int(s.out_h()),
                       .wo = int(s.out_w()), .rsc = reduction, .slabs = (reduction + kSlab - 1) / kSlab,
                       .m = s.n * s.out_h() * s.out_w(), .col_tiles = 0, .tiles = 0};
  switch (tile_columns(s)) {
    case 256: return launch_reading<256>(args, read_a(s), stream);
    case 128: return launch_reading<128>(args, read_a(s), stream);
    default: return launch_reading<64>(args, read_a(s), stream);
  }
}

}  // namespace roofbench::kernels
