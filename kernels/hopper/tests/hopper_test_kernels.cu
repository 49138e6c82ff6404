// Kernels that exercise each primitive of roofbench/hopper.cuh, one block each (hopper_test_kernels.hpp).
#include "hopper_test_kernels.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "roofbench/cuda.hpp"
#include "roofbench/hopper.cuh"

namespace roofbench::hopper::test {
namespace {

constexpr int kBlockK = 64;                       // K columns per TMA box: one 128-byte swizzle row of bf16
constexpr std::uint32_t kAtomBytes = 1024;        // the 128-byte swizzle's repeat, and tiles' alignment
constexpr std::uint32_t kRowsTileBytes = 64 * kBlockK * 2;  // 64 rows x 64 bf16
// The descriptor of a 64-wide MN-major operand: its leading offset, between 64-element blocks, is never read.
__device__ __forceinline__ std::uint64_t mn_major_64(const void* tile, int k) {
  return descriptor_mn_major_sw128(tile, k, kSingleMnBlock);
}

// The first 1024-byte aligned address of dynamic shared memory (launched with kAtomBytes to spare).
__device__ unsigned char* aligned_shared(unsigned char* raw) {
  const std::uint32_t address = shared_address(raw);
  return raw + ((kAtomBytes - address % kAtomBytes) % kAtomBytes);
}

// The waits of these kernels, named in the error when one times out.
enum class Wait {
  tma_box,
  bulk_copy,
  gemm_tiles,
  stage_filled,
  stage_emptied,
  mn_major_tiles,
  multicast_boxes,
  peer_arrival,
  count
};
constexpr const char* kWaitNames[int(Wait::count)] = {
    "tma_tile: the box's bytes", "mbarrier_phases: the bulk copy's 16 bytes", "gemm_warpgroup: A and B tiles",
    "producer_consumer: a stage filled by the producer", "producer_consumer: a stage emptied by both consumers",
    "gemm_mn_major: the transposed A and B tiles", "cluster_multicast: both blocks' boxes",
    "cluster_multicast: the peer block's arrival"};

// Mapped host memory (so that it stays readable after a trap) receiving 1 + the Wait that timed out.
__device__ int* g_timed_out;

// mbarrier_wait with a time limit (about a second), so that a phase that never completes fails the test
// naming the wait instead of hanging it. (A trap rather than printf: a call would serialize the wgmmas.)
__device__ void wait_or_trap(std::uint64_t* bar, std::uint32_t parity, Wait what) {
  const long long start = clock64();
  while (!mbarrier_try_wait(bar, parity)) {
    if (clock64() - start > (1ll << 31)) {
      *static_cast<volatile int*>(g_timed_out) = 1 + int(what);
      __threadfence_system();
      __trap();
    }
  }
}

// Thread 0 initialises `count` barriers with the given arrival counts; everyone sees them afterwards.
__device__ void init_barriers(std::uint64_t* bars, const std::uint32_t* arrivals, int count) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < count; ++i) mbarrier_init(&bars[i], arrivals[i]);
    mbarrier_init_fence();
  }
  __syncthreads();
}

__global__ void tma_tile_kernel(const __grid_constant__ CUtensorMap map, int row, int col, std::uint32_t bytes,
                                uint4* out) {
  extern __shared__ unsigned char raw[];
  __shared__ std::uint64_t bar;
  unsigned char* tile = aligned_shared(raw);
  // Poison the landing area, so that a box the copy engine left unwritten cannot pass for zeros. The
  // ordinary stores precede the async proxy's writes: fence, then barrier (inside init_barriers).
  for (std::uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(tile)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
  fence_proxy_async_shared();
  const std::uint32_t one = 1;
  init_barriers(&bar, &one, 1);
  if (threadIdx.x == 0) {
    tma_prefetch_map(&map);
    tma_prefetch_2d(&map, row, col);  // a hint: what lands must not change (edges and negative coordinates too)
    mbarrier_arrive_expect_tx(&bar, bytes);
    tma_load_2d(tile, &map, &bar, row, col);
  }
  wait_or_trap(&bar, 0, Wait::tma_box);
  for (std::uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) out[i] = reinterpret_cast<const uint4*>(tile)[i];
}

__global__ void tma_store_box_kernel(const __grid_constant__ CUtensorMap map, int row, int col, int box_rows,
                                     int box_cols) {
  extern __shared__ unsigned char raw[];
  auto* box = reinterpret_cast<std::uint16_t*>(aligned_shared(raw));
  for (int i = threadIdx.x; i < box_rows * box_cols; i += blockDim.x)
    box[i] = static_cast<std::uint16_t>(i / box_cols * 256 + i % box_cols);
  fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store_2d(&map, box, row, col);
    bulk_commit_group();
    bulk_wait_group_read<0>();
    bulk_wait_group<0>();
  }
}

// A cluster of kClusterBlocks blocks: block r loads box r (rows row0 + r box_rows ..) into every block of the
// cluster, each block expecting all the boxes' bytes on its own barrier, then arrives on the next block's `peer`
// barrier; each block waits for both, then copies its landing area (all the boxes) to out's r-th part.
__global__ void cluster_multicast_kernel(const __grid_constant__ CUtensorMap map, int row0, int box_rows,
                                         std::uint32_t box_bytes, uint4* out) {
  extern __shared__ unsigned char raw[];
  __shared__ std::uint64_t bars[2];  // [0]: the boxes landed; [1]: the previous block's arrival
  unsigned char* landing = aligned_shared(raw);
  const std::uint32_t rank = cluster_rank(), bytes = kClusterBlocks * box_bytes;
  for (std::uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(landing)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
  fence_proxy_async_shared();
  const std::uint32_t arrivals[2] = {1, 1};
  init_barriers(bars, arrivals, 2);
  cluster_sync();  // every block's barriers initialised before any copy or arrival reaches them
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(&bars[0], bytes);
    tma_load_2d_multicast(landing + rank * box_bytes, &map, &bars[0], row0 + static_cast<int>(rank) * box_rows, 0,
                          (1u << kClusterBlocks) - 1);
    mbarrier_arrive_cluster(&bars[1], (rank + 1) % kClusterBlocks);
  }
  wait_or_trap(&bars[0], 0, Wait::multicast_boxes);
  wait_or_trap(&bars[1], 0, Wait::peer_arrival);
  uint4* mine = out + static_cast<std::size_t>(rank) * (bytes / 16);
  for (std::uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) mine[i] = reinterpret_cast<const uint4*>(landing)[i];
  cluster_sync();  // no block exits while a peer's copy may still write into it
}

// 64 threads step the barrier through its phases; thread 0 records both parities after each step.
__global__ void mbarrier_phases_kernel(const uint4* src, int* out) {
  __shared__ std::uint64_t bars[2];  // [0]: 32 arrivals a phase; [1]: one arrival plus transaction bytes
  __shared__ uint4 landing;
  const std::uint32_t arrivals[2] = {32, 1};
  init_barriers(bars, arrivals, 2);
  const int t = threadIdx.x;
  const auto record = [&](int step, std::uint64_t* bar) {
    if (t == 0) {
      out[2 * step] = mbarrier_test_wait(bar, 0);
      out[2 * step + 1] = mbarrier_test_wait(bar, 1);
    }
    __syncthreads();
  };
  record(0, &bars[0]);                   // fresh: phase 0 pending
  if (t < 31) mbarrier_arrive(&bars[0]);
  __syncthreads();
  record(1, &bars[0]);                   // 31 of 32 arrivals: still phase 0
  if (t == 31) mbarrier_arrive(&bars[0]);
  __syncthreads();
  record(2, &bars[0]);                   // phase 0 complete, phase 1 pending
  if (t >= 32) mbarrier_arrive(&bars[0]);
  __syncthreads();
  record(3, &bars[0]);                   // phase 1 complete, phase 2 (parity 0) pending
  if (t == 0) mbarrier_arrive_expect_tx(&bars[1], sizeof(uint4));
  __syncthreads();
  record(4, &bars[1]);                   // its one arrival is in, 16 bytes still expected
  if (t == 0) bulk_copy_to_shared(&landing, src, sizeof(uint4), &bars[1]);
  wait_or_trap(&bars[1], 0, Wait::bulk_copy);
  record(5, &bars[1]);                   // the bytes landed: phase 0 complete
  if (t == 0) *reinterpret_cast<uint4*>(out + 2 * kMbarrierSteps) = landing;
}

// NaN in every accumulator: the first wgmma (accumulate = 0) must overwrite them, not add to them.
template <int kCount>
__device__ void poison(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) d[i] = __int_as_float(-1);
}

// Stores one warp group's m64nN accumulators into rows row0.. of the row-major C (ldc columns), in the
// fragment layout hopper.cuh describes.
template <int kN>
__device__ void store_accumulators(const float (&d)[kN / 2], float* c, int ldc, int row0) {
  const int warp = (threadIdx.x % 128) / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  float* top = c + (row0 + 16 * warp + g) * ldc;
  float* bottom = top + 8 * ldc;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int col = 8 * j + 2 * t;
    top[col] = d[4 * j];
    top[col + 1] = d[4 * j + 1];
    bottom[col] = d[4 * j + 2];
    bottom[col + 1] = d[4 * j + 3];
  }
}

// Two bf16 of row-major A (lda columns) at (row, col) and (row, col + 1), the lower column in the low
// half; zeros past column k.
__device__ std::uint32_t a_pair(const std::uint16_t* a, int lda, int k, int row, int col) {
  if (col >= k) return 0;
  return std::uint32_t(a[row * lda + col]) | std::uint32_t(a[row * lda + col + 1]) << 16;
}

// The A fragment of the k16 step starting at column k0, for this thread of the warp group.
__device__ void load_a_fragment(std::uint32_t (&frag)[4], const std::uint16_t* a, int k, int k0) {
  const int warp = (threadIdx.x % 128) / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const int row = 16 * warp + g, col = k0 + 2 * t;
  frag[0] = a_pair(a, k, k, row, col);
  frag[1] = a_pair(a, k, k, row + 8, col);
  frag[2] = a_pair(a, k, k, row, col + 8);
  frag[3] = a_pair(a, k, k, row + 8, col + 8);
}

// Copies A's 64 x 64 block at column k0 into the no-swizzle K-major layout: 8 x 8 core matrices of 128
// bytes, the 8 of one 8-row group consecutive along K (128 bytes apart), the groups 1024 bytes apart.
__device__ void store_a_plain(unsigned char* tile, const std::uint16_t* a, int k, int k0) {
  for (int i = threadIdx.x; i < 64 * kBlockK; i += 128) {
    const int row = i / kBlockK, col = i % kBlockK;
    const std::uint16_t value = k0 + col < k ? a[row * k + k0 + col] : 0;
    const int offset = (row / 8) * 1024 + (col / 8) * 128 + (row % 8) * 16 + (col % 8) * 2;
    *reinterpret_cast<std::uint16_t*>(tile + offset) = value;
  }
  fence_proxy_async_shared();  // the tensor cores read these ordinary stores next
}

// The four k16 steps of one 64-column block, A from `a_tile` (shared) or from registers; B K-major, or
// MN-major (kTransposeB: kN / 64 boxes of 64 K rows, kRowsTileBytes apart). The first step of the product
// (k0 == 0) overwrites d (accumulate = 0), the others add to it.
template <int kN, ASource kSource, typename Elem, int kTransposeB>
__device__ void wgmma_block(float (&d)[kN / 2], const unsigned char* a_tile,
                            const unsigned char* b_tile, const std::uint16_t* a, int k, int k0) {
  std::uint32_t frag[4][4];
  if constexpr (kSource == ASource::registers)
#pragma unroll
    for (int s = 0; s < 4; ++s) load_a_fragment(frag[s], a, k, k0 + 16 * s);
  fence_accumulators(d);
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const std::uint64_t b_desc = kTransposeB ? descriptor_mn_major_sw128(b_tile, s, kRowsTileBytes)
                                             : descriptor_k_major_sw128(b_tile, s);
    if constexpr (kSource == ASource::registers)
      wgmma_rs<Elem, kTransposeB>(d, frag[s], b_desc, k0 + s > 0);
    else if constexpr (kSource == ASource::tma_swizzled)
      wgmma_ss<Elem, kTransposeB>(d, descriptor_k_major_sw128(a_tile, s), b_desc, k0 + s > 0);
    else
      wgmma_ss<Elem, kTransposeB>(d, descriptor_k_major_plain(a_tile, s, 128, 1024), b_desc, k0 + s > 0);
  }
  wgmma_commit_group();
  wgmma_wait_group<0>();
  fence_accumulators(d);
}

// B's block at column k0: one box of kN rows x 64 K columns (K-major), or kN / 64 boxes of 64 K rows x 64
// N columns (MN-major), kRowsTileBytes apart.
template <int kN, int kTransposeB>
__device__ void load_b_block(unsigned char* b_tile, const CUtensorMap* b_map, std::uint64_t* bar, int k0) {
  if constexpr (kTransposeB)
    for (int nb = 0; nb < kN / 64; ++nb) tma_load_2d(b_tile + nb * kRowsTileBytes, b_map, bar, k0, 64 * nb);
  else
    tma_load_2d(b_tile, b_map, bar, 0, k0);
}

template <int kN, ASource kSource, typename Elem, int kTransposeB>
__global__ void __launch_bounds__(128) gemm_warpgroup_kernel(const __grid_constant__ CUtensorMap a_map,
                                                             const __grid_constant__ CUtensorMap b_map,
                                                             const std::uint16_t* a, int k, float* c) {
  extern __shared__ unsigned char raw[];
  __shared__ std::uint64_t bar;
  unsigned char* a_tile = aligned_shared(raw);
  unsigned char* b_tile = a_tile + kRowsTileBytes;
  const std::uint32_t one = 1, b_bytes = kN * kBlockK * 2;
  init_barriers(&bar, &one, 1);
  float d[kN / 2];
  poison(d);
  for (int block = 0; block * kBlockK < k; ++block) {
    const int k0 = block * kBlockK;
    if constexpr (kSource == ASource::plain_stores) store_a_plain(a_tile, a, k, k0);
    if (threadIdx.x == 0) {
      mbarrier_arrive_expect_tx(&bar, b_bytes + (kSource == ASource::tma_swizzled ? kRowsTileBytes : 0));
      if (kSource == ASource::tma_swizzled) tma_load_2d(a_tile, &a_map, &bar, 0, k0);
      load_b_block<kN, kTransposeB>(b_tile, &b_map, &bar, k0);
    }
    wait_or_trap(&bar, block & 1, Wait::gemm_tiles);
    __syncthreads();  // every thread's plain stores (fenced) are in before anyone's wgmma reads them
    wgmma_block<kN, kSource, Elem, kTransposeB>(d, a_tile, b_tile, a, k, k0);
    __syncthreads();  // all wgmmas of this block are done before the next block's loads overwrite it
  }
  store_accumulators<kN>(d, c, kN, 0);
}

// The A fragment of the k16 step k0 from A^T (k x 64, row-major): A(row, col) = a_t[col][row].
__device__ void load_a_fragment_transposed(std::uint32_t (&frag)[4], const std::uint16_t* a_t, int k0) {
  const int warp = (threadIdx.x % 128) / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const auto pair = [&](int row, int col) {
    return std::uint32_t(a_t[col * 64 + row]) | std::uint32_t(a_t[(col + 1) * 64 + row]) << 16;
  };
  const int row = 16 * warp + g, col = k0 + 2 * t;
  frag[0] = pair(row, col);
  frag[1] = pair(row + 8, col);
  frag[2] = pair(row, col + 8);
  frag[3] = pair(row + 8, col + 8);
}

// gemm_mn_major's shared memory: A^T and B^T whole (up to k = 256 rows of 128 bytes each), then the barrier.
struct MnMajorTiles {
  unsigned char a_t[256 * 128], b_t[256 * 128];
  std::uint64_t loaded;
};

template <bool kAFromRegisters>
__global__ void __launch_bounds__(128) gemm_mn_major_kernel(const __grid_constant__ CUtensorMap a_t_map,
                                                            const __grid_constant__ CUtensorMap b_t_map,
                                                            const std::uint16_t* a_t, int k, float* c) {
  extern __shared__ unsigned char raw[];
  MnMajorTiles& sm = *reinterpret_cast<MnMajorTiles*>(aligned_shared(raw));
  const std::uint32_t one = 1, tile_bytes = std::uint32_t(k) * 128;
  init_barriers(&sm.loaded, &one, 1);
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(&sm.loaded, (kAFromRegisters ? 1 : 2) * tile_bytes);
    if (!kAFromRegisters) tma_load_2d(sm.a_t, &a_t_map, &sm.loaded, 0, 0);
    tma_load_2d(sm.b_t, &b_t_map, &sm.loaded, 0, 0);
  }
  wait_or_trap(&sm.loaded, 0, Wait::mn_major_tiles);
  float d[32];
  poison(d);
  fence_accumulators(d);
  for (int s = 0; s < k / 16; ++s) {  // one wgmma per group: each step's fragments are loaded first
    std::uint32_t frag[4];
    if constexpr (kAFromRegisters) load_a_fragment_transposed(frag, a_t, 16 * s);
    wgmma_fence();
    if constexpr (kAFromRegisters)
      wgmma_bf16_rs<1>(d, frag, mn_major_64(sm.b_t, s), s > 0);
    else
      wgmma_bf16_ss<1, 1>(d, mn_major_64(sm.a_t, s), mn_major_64(sm.b_t, s), s > 0);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    fence_accumulators(d);
  }
  store_accumulators<64>(d, c, 64, 0);
}

constexpr int kPcStages = 2;
constexpr std::uint32_t kPcStageBytes = 2 * 128 * kBlockK * 2;  // A and B tiles of 128 rows x 64 bf16

// The producer warp group: one thread keeps the ring of stages filled.
__device__ void produce(const CUtensorMap* a_map, const CUtensorMap* b_map, unsigned char* stages,
                        std::uint64_t* full, std::uint64_t* empty, int k) {
  if (threadIdx.x != 0) return;
  for (int block = 0; block * kBlockK < k; ++block) {
    const int s = block % kPcStages;
    const std::uint32_t round = block / kPcStages;
    wait_or_trap(&empty[s], (round & 1) ^ 1, Wait::stage_emptied);
    unsigned char* a_tile = stages + s * kPcStageBytes;
    mbarrier_arrive_expect_tx(&full[s], kPcStageBytes);
    tma_load_2d(a_tile, a_map, &full[s], 0, block * kBlockK);
    tma_load_2d(a_tile + kPcStageBytes / 2, b_map, &full[s], 0, block * kBlockK);
  }
}

// A consumer warp group: its 64 rows of C from each stage, the stage released after its wgmmas finish.
__device__ void consume(int consumer, unsigned char* stages, std::uint64_t* full, std::uint64_t* empty, int k,
                        float* c) {
  float d[64];
  poison(d);
  for (int block = 0; block * kBlockK < k; ++block) {
    const int s = block % kPcStages;
    wait_or_trap(&full[s], (block / kPcStages) & 1, Wait::stage_filled);
    const unsigned char* a_tile = stages + s * kPcStageBytes + consumer * kRowsTileBytes;
    wgmma_block<128, ASource::tma_swizzled, __nv_bfloat16, 0>(d, a_tile, stages + s * kPcStageBytes + kPcStageBytes / 2, nullptr,
                                            k, block * kBlockK);
    mbarrier_arrive(&empty[s]);
  }
  store_accumulators<128>(d, c, 128, 64 * consumer);
}

__global__ void __launch_bounds__(384, 1) gemm_producer_consumer_kernel(const __grid_constant__ CUtensorMap a_map,
                                                                        const __grid_constant__ CUtensorMap b_map,
                                                                        int k, float* c) {
  extern __shared__ unsigned char raw[];
  __shared__ std::uint64_t bars[2 * kPcStages];  // full[s] then empty[s]
  std::uint64_t* full = bars;
  std::uint64_t* empty = bars + kPcStages;
  unsigned char* stages = aligned_shared(raw);
  static_assert(kPcStages == 2);
  const std::uint32_t arrivals[2 * kPcStages] = {1, 1, 256, 256};  // full: the producer; empty: 2 x 128
  init_barriers(bars, arrivals, 2 * kPcStages);
  const int warp_group = threadIdx.x / 128;
  if (warp_group == 0) {
    setmaxnreg_dec<40>();
    produce(&a_map, &b_map, stages, full, empty, k);
  } else {
    setmaxnreg_inc<232>();
    consume(warp_group - 1, stages, full, empty, k, c);
  }
}

// Points g_timed_out at mapped host memory (allocated once per process, on device 0) and clears it.
volatile int* timeout_report() {
  static volatile int* report = [] {
    int* host = nullptr;
    ROOFBENCH_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host), sizeof(int), cudaHostAllocMapped));
    int* device = nullptr;
    ROOFBENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), host, 0));
    ROOFBENCH_CUDA(cudaMemcpyToSymbol(g_timed_out, &device, sizeof(device)));
    return static_cast<volatile int*>(host);
  }();
  return report;
}
void arm_timeout_report() { *timeout_report() = 0; }

// Waits for the kernel; a failure names the kernel and, after a timed-out wait, which one.
void finish(const char* kernel) {
  ROOFBENCH_CUDA_LAUNCH();
  const cudaError_t status = cudaDeviceSynchronize();
  if (status == cudaSuccess) return;
  const int wait = *timeout_report();
  const std::string what = std::string(kernel) + (wait > 0 && wait <= int(Wait::count)
                                                      ? std::string(": mbarrier wait timed out: ") + kWaitNames[wait - 1]
                                                      : std::string());
  ::roofbench::detail::throw_call_error("CUDA", status, cudaGetErrorString(status), what.c_str(), __FILE__, __LINE__);
}

template <int kN, ASource kSource, typename Elem = __nv_bfloat16, int kTransposeB = 0>
void launch_gemm_warpgroup(const CUtensorMap& a_map, const CUtensorMap& b_map, const std::uint16_t* a, int k,
                           float* c) {
  const auto kernel = gemm_warpgroup_kernel<kN, kSource, Elem, kTransposeB>;
  const std::uint32_t shared = kRowsTileBytes + kN * kBlockK * 2 + kAtomBytes;
  ROOFBENCH_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  arm_timeout_report();
  kernel<<<1, 128, shared>>>(a_map, b_map, a, k, c);
  finish("gemm_warpgroup_kernel");
}

template <int kN>
void launch_gemm_warpgroup(ASource source, const CUtensorMap& a_map, const CUtensorMap& b_map,
                           const std::uint16_t* a, int k, float* c) {
  if (source == ASource::tma_swizzled) launch_gemm_warpgroup<kN, ASource::tma_swizzled>(a_map, b_map, a, k, c);
  if (source == ASource::registers) launch_gemm_warpgroup<kN, ASource::registers>(a_map, b_map, a, k, c);
  if (source == ASource::plain_stores) launch_gemm_warpgroup<kN, ASource::plain_stores>(a_map, b_map, a, k, c);
}

template <int kN, typename Elem>
void launch_gemm_mn_major_b(bool a_from_registers, const CUtensorMap& a_map, const CUtensorMap& b_map,
                            const std::uint16_t* a, int k, float* c) {
  if (a_from_registers)
    launch_gemm_warpgroup<kN, ASource::registers, Elem, 1>(a_map, b_map, a, k, c);
  else
    launch_gemm_warpgroup<kN, ASource::tma_swizzled, Elem, 1>(a_map, b_map, a, k, c);
}

}  // namespace

void tma_tile(const CUtensorMap& map, int row, int col, std::uint32_t box_bytes, void* out) {
  const std::uint32_t shared = box_bytes + kAtomBytes;
  ROOFBENCH_CUDA(cudaFuncSetAttribute(tma_tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  arm_timeout_report();
  tma_tile_kernel<<<1, 128, shared>>>(map, row, col, box_bytes, static_cast<uint4*>(out));
  finish("tma_tile_kernel");
}

void tma_store_box(const CUtensorMap& map, int row, int col, int box_rows, int box_cols) {
  const std::uint32_t shared = std::uint32_t(box_rows) * box_cols * 2 + kAtomBytes;
  ROOFBENCH_CUDA(
      cudaFuncSetAttribute(tma_store_box_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  arm_timeout_report();
  tma_store_box_kernel<<<1, 128, shared>>>(map, row, col, box_rows, box_cols);
  finish("tma_store_box_kernel");
}

void cluster_multicast(const CUtensorMap& map, int row0, int box_rows, std::uint32_t box_bytes, void* out) {
  const std::uint32_t shared = kClusterBlocks * box_bytes + kAtomBytes;
  ROOFBENCH_CUDA(
      cudaFuncSetAttribute(cluster_multicast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kClusterBlocks;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kClusterBlocks);
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = shared;
  config.attrs = &cluster;
  config.numAttrs = 1;
  arm_timeout_report();
  ROOFBENCH_CUDA(cudaLaunchKernelEx(&config, cluster_multicast_kernel, map, row0, box_rows, box_bytes,
                                    static_cast<uint4*>(out)));
  finish("cluster_multicast_kernel");
}

void mbarrier_phases(const void* src, int* out) {
  arm_timeout_report();
  mbarrier_phases_kernel<<<1, 64>>>(static_cast<const uint4*>(src), out);
  finish("mbarrier_phases_kernel");
}

void gemm_warpgroup(int n, ASource source, const CUtensorMap& a_map, const CUtensorMap& b_map,
                    const std::uint16_t* a_rows, int k, float* c) {
  if (n == 64)
    launch_gemm_warpgroup<64>(source, a_map, b_map, a_rows, k, c);
  else if (n == 128)
    launch_gemm_warpgroup<128>(source, a_map, b_map, a_rows, k, c);
  else
    throw Error("gemm_warpgroup: n must be 64 or 128, not " + std::to_string(n));
}

void gemm_mn_major_b(int n, bool fp16, bool a_from_registers, const CUtensorMap& a_map, const CUtensorMap& b_map,
                     const std::uint16_t* a_rows, int k, float* c) {
  if (n != 64 && n != 128) throw Error("gemm_mn_major_b: n must be 64 or 128, not " + std::to_string(n));
  if (n == 64 && fp16) launch_gemm_mn_major_b<64, __half>(a_from_registers, a_map, b_map, a_rows, k, c);
  if (n == 64 && !fp16) launch_gemm_mn_major_b<64, __nv_bfloat16>(a_from_registers, a_map, b_map, a_rows, k, c);
  if (n == 128 && fp16) launch_gemm_mn_major_b<128, __half>(a_from_registers, a_map, b_map, a_rows, k, c);
  if (n == 128 && !fp16) launch_gemm_mn_major_b<128, __nv_bfloat16>(a_from_registers, a_map, b_map, a_rows, k, c);
}

void gemm_mn_major(bool a_from_registers, const CUtensorMap& a_t_map, const CUtensorMap& b_t_map,
                   const std::uint16_t* a_t_rows, int k, float* c) {
  if (k % 16 != 0 || k < 16 || k > 256) throw Error("gemm_mn_major: k must be a multiple of 16 up to 256");
  const auto kernel = a_from_registers ? gemm_mn_major_kernel<true> : gemm_mn_major_kernel<false>;
  const std::uint32_t shared = sizeof(MnMajorTiles) + kAtomBytes;
  ROOFBENCH_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  arm_timeout_report();
  kernel<<<1, 128, shared>>>(a_t_map, b_t_map, a_t_rows, k, c);
  finish("gemm_mn_major_kernel");
}

void gemm_producer_consumer(const CUtensorMap& a_map, const CUtensorMap& b_map, int k, float* c) {
  const std::uint32_t shared = kPcStages * kPcStageBytes + kAtomBytes;
  ROOFBENCH_CUDA(cudaFuncSetAttribute(gemm_producer_consumer_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(shared)));
  arm_timeout_report();
  gemm_producer_consumer_kernel<<<1, 384, shared>>>(a_map, b_map, k, c);
  finish("gemm_producer_consumer_kernel");
}

}  // namespace roofbench::hopper::test
