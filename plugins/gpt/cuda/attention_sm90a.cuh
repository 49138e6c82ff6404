// What the sm_90a attention code shares (the training library's attention_v44.cu: the bf16 keeper's sm_90a
// forward and backward; the lab's attention_v10.cu and attention_v12.cu: v10's and v11's forwards, v12's
// backward): one head's q, k and v as TMA brings them into shared memory in the 128-byte swizzle
// (kernels/hopper/README.md), their preparation in place (bias added, q and k rotated, rounded to bf16: v9's
// prepare_chunk, so the products see v9's operands), the time-limited mbarrier wait, and the host's device check and
// tensor maps. Included by sm_90a translation units alone (roofbench_hopper_sm90a); device code in an unnamed
// namespace, as attention_rows.cuh's.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "attention_common.cuh"
#include "attention_rows.cuh"
#include "roofbench/cuda.hpp"
#include "roofbench/hopper.cuh"
#include "roofbench/hopper_host.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

namespace hw = roofbench::hopper;

constexpr int kV10Threads = 256;  // two warp groups prepare a head (and compute it)
constexpr std::uint32_t kSwizzleRow = 128;  // bytes per row of a 128-byte swizzled tile (64 bf16)
constexpr std::uint32_t kAtomBytes = 1024;  // the swizzle's repeat: tiles start 1024-byte aligned
constexpr std::uint32_t kHeadTileBytes = kMaxT * kSwizzleRow;  // q, k or v of one head: 16 KB
static_assert(kHeadDim * 2 == kSwizzleRow, "a head row is one swizzled row");

// One head's q, k and v as TMA writes them (then prepared in place).
struct HeadTiles {
  unsigned char q[kHeadTileBytes], k[kHeadTileBytes], v[kHeadTileBytes];
};

// The first 1024-byte aligned address of the dynamic shared memory (launched with kAtomBytes to spare).
template <typename Smem>
__device__ inline Smem& aligned_smem(unsigned char* raw) {
  const std::uint32_t base = hw::shared_address(raw);
  return *reinterpret_cast<Smem*>(raw + (kAtomBytes - base % kAtomBytes) % kAtomBytes);
}

// The three boxes of the head `at` (rows b T .., columns of q, k and v) into `tiles`, completing on `bar`
// with `extra_bytes` more announced there (boxes the caller issues itself). One thread issues them.
__device__ inline void load_head(HeadTiles& tiles, const CUtensorMap* map, std::uint64_t* bar, const HeadRows& at,
                                 std::uint32_t extra_bytes = 0) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::mbarrier_arrive_expect_tx(bar, 3 * kHeadTileBytes + extra_bytes);
  hw::tma_load_2d(tiles.q, map, bar, row, col);
  hw::tma_load_2d(tiles.k, map, bar, row, at.C + col);
  hw::tma_load_2d(tiles.v, map, bar, row, 2 * at.C + col);
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a 128-byte swizzled tile (kernels/hopper/README.md).
__device__ inline std::uint32_t swizzled(int row, int chunk) {
  return static_cast<std::uint32_t>(row) * kSwizzleRow + static_cast<std::uint32_t>((chunk ^ (row % 8)) * 16);
}

// The chunks the preparation gives each of the kThreads threads that prepare a head (v10 and v12: all 256 of
// them; v11: its two consumer warp groups, threads 128 .. 383, for which threadIdx.x % 256 is as good a number;
// v14 and v15: their one warp group). A row's kChunksPerRow chunks go to as many neighbouring lanes.
template <int kThreads>
struct PreparedChunks {
  static_assert(kMaxT * kChunksPerRow % kThreads == 0);
  static constexpr int kPerThread = kMaxT * kChunksPerRow / kThreads;  // 16-byte chunks per thread and part
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  __device__ static int thread() { return static_cast<int>(threadIdx.x) % kThreads; }
  __device__ static int row(int it) { return thread() / kChunksPerRow + it * kRowsPerPass; }
  __device__ static int column() { return thread() % kChunksPerRow; }
};

// This thread's bias (q, k, v) and RoPE factors for its chunks (one column, PreparedChunks' rows): fetched
// while the boxes are in flight (v10, v12 and the walks of a head a warp group) or once they have landed (v11,
// v24).
template <int kThreads>
struct HeadPreparationSm90a {
  using Chunks = PreparedChunks<kThreads>;
  float bias[3][kChunk];
  float cos[Chunks::kPerThread][4], sin[Chunks::kPerThread][4];

  // kFloat4: the same values by 16-byte loads, 22 a thread instead of 88 (load_bias_and_factors). v22 to v29 (the
  // keeper's) fetch so; the sm_90a versions before them (v10 to v21) one float at a time.
  template <bool kFloat4 = false>
  __device__ void load(const float* qkv_bias, RopeTable rope, const HeadRows& at) {
    load_bias_and_factors<kFloat4>(bias, cos, sin, qkv_bias, rope, at, kChunk * Chunks::column(), Chunks::row);
  }

  // q and k prepared in place; v prepared and handed to store_v(r, c, at, chunk): row r, chunk column c, at
  // its swizzled byte offset in the tiles. Rows from T on are zero. Fenced for the async proxy, so store_v's
  // shared-memory stores are too.
  template <typename StoreV>
  __device__ void apply(HeadTiles& tiles, int T, StoreV store_v) const {
    apply_from(tiles.q, tiles, T, store_v);
  }

  // apply with q's raw rows read from `raw_q` (a tile of the same swizzle; tiles.q in apply), for a kernel that
  // loads the next head's q into a tile of its own while the head before still uses tiles.q (the lab's v29); or of
  // the passes kFirstPass .. kEndPass - 1 alone (Chunks::row's rows), for a kernel whose head lands in two parts
  // (the lab's v45: with 128 threads passes 0 .. 3 are rows 0 .. 63).
  template <typename StoreV, int kFirstPass = 0, int kEndPass = Chunks::kPerThread>
  __device__ void apply_from(const unsigned char* raw_q, HeadTiles& tiles, int T, StoreV store_v) const {
    const int c = Chunks::column();
#pragma unroll
    for (int it = kFirstPass; it < kEndPass; ++it) {
      const int r = Chunks::row(it);
      const std::uint32_t at = swizzled(r, c);
      uint4* q = reinterpret_cast<uint4*>(tiles.q + at);
      uint4* k = reinterpret_cast<uint4*>(tiles.k + at);
      const uint4 zero = make_uint4(0, 0, 0, 0);
      const bool live = r < T;
      *q = live ? prepare_chunk(*reinterpret_cast<const uint4*>(raw_q + at), bias[0], cos[it], sin[it]) : zero;
      *k = live ? prepare_chunk(*k, bias[1], cos[it], sin[it]) : zero;
      const uint4 raw_v = *reinterpret_cast<const uint4*>(tiles.v + at);
      store_v(r, c, at, live ? prepare_chunk(raw_v, bias[2], nullptr, nullptr) : zero);
    }
    hw::fence_proxy_async_shared();  // the tensor cores read these ordinary stores next
  }

  // apply in two parts, for a kernel whose v lands later than its q and k (the lab's v19): q and k in place,
  // then v in place (v15's form), each fenced for the async proxy.
  __device__ void apply_qk(HeadTiles& tiles, int T) const {
    const int c = Chunks::column();
#pragma unroll
    for (int it = 0; it < Chunks::kPerThread; ++it) {
      const int r = Chunks::row(it);
      const std::uint32_t at = swizzled(r, c);
      uint4* q = reinterpret_cast<uint4*>(tiles.q + at);
      uint4* k = reinterpret_cast<uint4*>(tiles.k + at);
      const bool live = r < T;
      *q = live ? prepare_chunk(*q, bias[0], cos[it], sin[it]) : make_uint4(0, 0, 0, 0);
      *k = live ? prepare_chunk(*k, bias[1], cos[it], sin[it]) : make_uint4(0, 0, 0, 0);
    }
    hw::fence_proxy_async_shared();
  }
  __device__ void apply_v(HeadTiles& tiles, int T) const {
    const int c = Chunks::column();
#pragma unroll
    for (int it = 0; it < Chunks::kPerThread; ++it) {
      const int r = Chunks::row(it);
      uint4* v = reinterpret_cast<uint4*>(tiles.v + swizzled(r, c));
      *v = r < T ? prepare_chunk(*v, bias[2], nullptr, nullptr) : make_uint4(0, 0, 0, 0);
    }
    hw::fence_proxy_async_shared();
  }
};
using V10Preparation = HeadPreparationSm90a<kV10Threads>;

__device__ inline HeadRows v10_head_rows(int head, const AttentionShape& s) {
  return HeadRows{head / s.heads, head % s.heads, s.T, s.channels()};
}

// The sm_90a kernels' common host steps: the device checked (NotApplicable off sm_90a) and the kernel's shared
// memory configured. `what` names the kernel in the refusal ("v10", "v12's backward").
template <typename Kernel>
void configure_sm90a(const char* what, Kernel kernel, std::size_t smem_bytes) {
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  if (!hopper::hopper_path_available(device))
    throw NotApplicable(std::string("gpt attention ") + what + " needs sm_90a (wgmma): a compute capability 9.0 GPU");
  roofbench::cuda::allow_dynamic_shared_memory(kernel, smem_bytes);
}

// A persistent kernel's grid: as many blocks of `threads` and `smem_bytes` as fit on the device at once
// (after configure_sm90a set its shared-memory limit). `what` names the kernel in the refusal.
template <typename Kernel>
int persistent_grid(const char* what, Kernel kernel, int threads, std::size_t smem_bytes) {
  int device = 0, sms = 0, per_sm = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes));
  if (per_sm < 1) throw Error(std::string("gpt: attention ") + what + " does not fit on this GPU's SMs");
  return sms * per_sm;
}

// A persistent kernel made to hold several blocks an SM: configure_sm90a's steps, the carveout that gives an SM
// the most shared memory (its blocks need it together), then its grid (persistent_grid).
template <typename Kernel>
int configure_shared_sm90a(const char* what, Kernel kernel, int threads, std::size_t smem_bytes) {
  configure_sm90a(what, kernel, smem_bytes);
  ROOFBENCH_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
  return persistent_grid(what, kernel, threads, smem_bytes);
}

// The blocks an SM holds of a persistent grid (persistent_grid's) on the current device.
inline int grid_blocks_per_sm(int grid) {
  int device = 0, sms = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return grid / sms;
}

// A [rows, cols] bf16 matrix as TMA reads one head's part of it: boxes of box_rows (kMaxT: a head's rows) x
// kHeadDim columns, 128-byte swizzle.
CUtensorMap head_box_map(const bf16* data, const AttentionShape& s, std::uint64_t cols,
                         std::uint32_t box_rows = kMaxT) {
  const hopper::Matrix2d rows{data, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<std::uint64_t>(s.batch) * s.T,
                              cols, cols * sizeof(bf16)};
  return hopper::make_tensor_map_2d(rows, box_rows, kHeadDim, hopper::TileSwizzle::bytes128);
}

// The raw qkv [N, 3C] as TMA reads it, the operands checked for 16-byte alignment first.
CUtensorMap qkv_tensor_map(const char* version, const bf16* out, const bf16* qkv, const float* qkv_bias,
                           RopeTable rope, const AttentionShape& s) {
  check_head_operands_aligned(version, out, qkv, qkv_bias, rope);
  return head_box_map(qkv, s, 3 * static_cast<std::uint64_t>(s.channels()));
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
