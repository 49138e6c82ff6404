#include "gemv.hpp"

#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "roofbench/cuda.hpp"

namespace roofbench::transformer {
namespace {

// A warp reads a 768-wide segment of a row of W (3 16-byte loads per lane, all issued before any arithmetic);
// a block of 4 warps covers 4 segments: 4 rows of a 768-wide W, or one row of a 3072-wide one (its warps'
// sums then meet in shared memory). 768 blocks either way for GPT-2's two layers, so every SM has several.
constexpr int kSegment = 768;
constexpr int kChunks = kSegment / (8 * 32);  // 16-byte loads per lane per segment
constexpr int kWarps = 4;

// The rows of y a block of the warp-per-segment versions takes: its warps in groups of a row's segments, each
// group kRowsPerWarp rows.
__host__ __device__ constexpr int rows_per_block(int segments_per_row, int rows_per_warp) {
  return kWarps / segments_per_row * rows_per_warp;
}

// A read-once 16-byte load that is not kept in L1.
__device__ __forceinline__ uint4 load_once(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ void unpack8(const uint4& raw, float (&out)[8]) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// v3's place in a chain of layers under programmatic dependent launch (PDL, sm_90), once its weight loads are
// issued: let the next launch on the stream start issuing its own (its blocks are scheduled once every block of
// this grid has passed here), then wait until the previous grid has completed and its writes are visible, since
// in a decode chain its output is this layer's x. Every thread passes both; before sm_90 they are left out.
__device__ __forceinline__ void release_next_then_wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// v7's chain: the launch before is waited for by counts in memory, not by griddepcontrol.wait, which returns
// only once that grid has completed and its writes are flushed. Each block of a launch raises the chain's
// `finished` count once its stores are made, and a block of the next launch goes on as soon as that count
// covers every block before its own launch. Both counts (GemvChainCounts) only grow, in units: a launch's
// blocks add kUnitsPerLaunch to each (block 0 the remainder of an even share), so the units of all earlier
// launches are a multiple of it whatever their grids. A block takes its ticket from `arrived` before it lets
// the next launch start (PDL schedules that launch's blocks once every block here has passed the trigger, so
// each of its tickets comes after all of this launch's) and rounds it down to those earlier launches' units.
// Each count on its own 128-byte line, so the adds to one and the polling of the other meet at different places
// in the L2.
struct GemvChainCounts {
  alignas(128) unsigned long long arrived;
  alignas(128) unsigned long long finished;
};
static_assert(sizeof(GemvChainCounts) == kGemvChainBytes);
// (Unused, and so marked, where a pass for an architecture before sm_90 leaves the chain's code out.)
[[maybe_unused]] constexpr unsigned long long kUnitsPerLaunch = 1ull << 32;  // a grid of up to 2^32 blocks
[[maybe_unused]] constexpr unsigned long long kChainWaitLimitNs = 2'000'000'000;  // longer is a broken chain: trap
[[maybe_unused]] constexpr unsigned kFirstPauseNs = 32, kLongestPauseNs = 256;

[[maybe_unused]] __device__ __forceinline__ unsigned long long block_units() {
  const unsigned long long share = kUnitsPerLaunch / gridDim.x;
  return blockIdx.x == 0 ? kUnitsPerLaunch - share * (gridDim.x - 1) : share;
}

[[maybe_unused]] __device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(ns));
  return ns;
}

// v7's place in its chain, once its weight loads are issued: its ticket, the next launch released, then the wait
// for every earlier launch's blocks to have finished. Every thread passes both barriers.
__device__ __forceinline__ void release_next_then_wait_for_counts(GemvChainCounts* chain) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ unsigned long long earlier;  // the units of every earlier launch of the chain
  if (threadIdx.x == 0) earlier = atomicAdd(&chain->arrived, block_units()) & ~(kUnitsPerLaunch - 1);
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) {
    const unsigned long long start = global_timer_ns();
    unsigned long long finished;
    unsigned pause_ns = kFirstPauseNs;  // every block polls the same line: back off, doubling, to kLongestPauseNs
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(finished) : "l"(&chain->finished) : "memory");
      if (static_cast<long long>(finished - earlier) >= 0) break;
      if (global_timer_ns() - start > kChainWaitLimitNs) __trap();
      __nanosleep(pause_ns);
      pause_ns = pause_ns < kLongestPauseNs ? 2 * pause_ns : kLongestPauseNs;
    }
  }
  __syncthreads();
#endif
}

// v7: this block's stores of y are made; its units to `finished`, released to the next launch's waits.
__device__ __forceinline__ void count_block_finished(GemvChainCounts* chain) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __syncthreads();
  if (threadIdx.x == 0)
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;\n" ::"l"(&chain->finished), "l"(block_units()) : "memory");
#endif
}

// What v8 to v10 ask the L2 to fetch for a later launch while this one runs: as a decode engine knows its next
// layers, their weights do not depend on this one (v8, v9 the next launch's; v10 the one after it); v9 asks for the
// next launch's x as well where the caller names one (in a chain, this launch's output, in the L2 already).
struct NextRun {
  const void* w = nullptr;
  unsigned long long w_size = 0;  // 16-byte multiples, as the addresses are
  const void* x = nullptr;
  unsigned long long x_size = 0;
};

__device__ __forceinline__ void prefetch_to_l2(const void* bytes, unsigned size) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(bytes), "r"(size) : "memory");
}

// This block's share of the next run's weights (gridDim.x shares of 16-byte multiples) and, from block 0, all of
// its x, each by one bulk prefetch from thread 0. Before sm_90 it is left out.
__device__ __forceinline__ void prefetch_share_to_l2(NextRun next) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0 && next.x_size != 0) prefetch_to_l2(next.x, static_cast<unsigned>(next.x_size));
  if (next.w_size == 0) return;
  const unsigned long long share = (next.w_size / 16 + gridDim.x - 1) / gridDim.x * 16;
  const unsigned long long first = share * blockIdx.x;
  if (first >= next.w_size) return;
  prefetch_to_l2(static_cast<const char*>(next.w) + first,
                 static_cast<unsigned>(first + share <= next.w_size ? share : next.w_size - first));
#endif
}

// How a launch of the warp-per-segment kernels follows the one before it: not at all (v1: the stream orders
// it), by griddepcontrol.wait (v3 to v5) or by the chain's counts (v7).
enum class Chain { none, grid, counts };

// Where a warp keeps its rows of W from their loads to the wait: in registers (v1, v3, v4), or in shared memory,
// copied there by cp.async (v5), which leaves a block few registers, so that more launches' blocks fit an SM.
enum class WeightHold { registers, shared };

// 16 bytes into shared memory, of which the first source_bytes (16 or 0) are read from source and the rest zeros.
__device__ __forceinline__ void copy_16_async(uint4* shared_destination, const uint4* source, unsigned source_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(
                   shared_destination))),
               "l"(source), "r"(source_bytes)
               : "memory");
}

// This thread's cp.async copies landed (each lane reads back only what it copied: no barrier needed).
__device__ __forceinline__ void wait_for_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// x as v1 reads it (read-only path), or, chained, by a plain coherent load: there x may be the output of the
// grid waited on, written while this one had already started.
template <bool kChained>
__device__ __forceinline__ uint4 load_x(const uint4* p) {
  if constexpr (kChained) return *p;
  else return __ldg(p);
}

// x as a launch that follows `kChain` reads it; by the chain's counts (v7), from the L2, where the launch
// before stored it, never from this SM's L1.
template <Chain kChain>
__device__ __forceinline__ uint4 load_chained_x(const uint4* p) {
  if constexpr (kChain == Chain::counts) return __ldcg(p);
  else return load_x<kChain == Chain::grid>(p);
}

// A warp's rows of W (first_row .. + kRowsPerWarp - 1, its lanes' pieces from first_chunk on, kRowChunks pieces a
// row) as they wait for x: into registers, or (kShared, v5) copied into shared memory at `held`, where rows
// past out are filled with zeros, read from nowhere, as the registers start.
template <int kRowChunks, int kRowsPerWarp, bool kShared>
__device__ __forceinline__ void load_rows(uint4 (&raw)[kShared ? 1 : kRowsPerWarp][kChunks], uint4* held,
                                          const uint4* w, int first_row, int first_chunk, int out) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if constexpr (kShared) {
      const bool in_w = first_row + r < out;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const uint4* piece = w + std::int64_t(first_row + r) * kRowChunks + first_chunk + c * 32;
        copy_16_async(held + (r * kChunks + c) * 32, in_w ? piece : w, in_w ? 16 : 0);
      }
    } else if (first_row + r < out) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        raw[r][c] = load_once(w + std::int64_t(first_row + r) * kRowChunks + first_chunk + c * 32);
    }
  }
}

// A block's rows of y. kChain: v3 (grid), v1's loads and arithmetic with the PDL trigger and wait between the
// weight loads and the first read of x (v8: and its share of `next` asked of the L2 between them); v7 (counts),
// the same with the chain's counts (`chain`) for the wait.
// kRowsPerWarp: v4, a warp takes the same segment of that many consecutive rows, so a grid has that many times
// fewer threads (the next launches' blocks fit beside it, their loads in flight) and each lane's x is read once
// for all its rows; each row's sum is v1's in v1's order. kHold: v5, the rows
// wait in `staged` (kWarps x kRowsPerWarp x kChunks x 32 pieces of shared memory) instead of registers.
template <int kSegmentsPerRow, int kTokens, Chain kChain, int kRowsPerWarp = 1,
          WeightHold kHold = WeightHold::registers>
__device__ __forceinline__ void gemv_block(const uint4* w, const uint4* x, __nv_bfloat16* y, int out,
                                           uint4* staged = nullptr, GemvChainCounts* chain = nullptr,
                                           NextRun next = {}) {
  constexpr int kRowsPerBlock = rows_per_block(kSegmentsPerRow, kRowsPerWarp);
  static_assert(kSegmentsPerRow == 1 || kRowsPerBlock * kTokens <= 32 * kWarps, "a thread per row and token sums");
  constexpr int kRowChunks = kSegmentsPerRow * kChunks * 32;  // 16-byte pieces per row of W and of x
  constexpr bool kShared = kHold == WeightHold::shared;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first_row = blockIdx.x * kRowsPerBlock + warp / kSegmentsPerRow * kRowsPerWarp;
  const int first_chunk = (warp % kSegmentsPerRow) * kChunks * 32 + lane;
  uint4 raw[kShared ? 1 : kRowsPerWarp][kChunks] = {};
  // v5: this lane's piece c of row r is held[(r kChunks + c) 32].
  uint4* held = kShared ? staged + warp * kRowsPerWarp * kChunks * 32 + lane : nullptr;
  load_rows<kRowChunks, kRowsPerWarp, kShared>(raw, held, w, first_row, first_chunk, out);
  prefetch_share_to_l2(next);
  if constexpr (kChain == Chain::grid) release_next_then_wait_for_previous();
  if constexpr (kChain == Chain::counts) release_next_then_wait_for_counts(chain);
  if constexpr (kShared) wait_for_async_copies();
  float acc[kRowsPerWarp][kTokens] = {};
  if (first_row < out) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        float xf[8];
        unpack8(load_chained_x<kChain>(x + t * kRowChunks + first_chunk + c * 32), xf);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          float wf[8];
          if constexpr (kShared) unpack8(held[(r * kChunks + c) * 32], wf);
          else unpack8(raw[r][c], wf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][t] += wf[i] * xf[i];
        }
      }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t)
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc[r][t] += __shfl_xor_sync(0xffffffffu, acc[r][t], offset);
  if constexpr (kSegmentsPerRow == 1) {
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        if (first_row + r < out)
#pragma unroll
          for (int t = 0; t < kTokens; ++t) y[std::int64_t(t) * out + first_row + r] = __float2bfloat16_rn(acc[r][t]);
  } else {
    __shared__ float sums[kWarps][kRowsPerWarp][kTokens];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int t = 0; t < kTokens; ++t) sums[warp][r][t] = acc[r][t];
    __syncthreads();
    const int t = threadIdx.x % kTokens, r = threadIdx.x / kTokens;  // one thread per (row of the block, token)
    const int out_row = blockIdx.x * kRowsPerBlock + r;
    if (r < kRowsPerBlock && out_row < out) {
      const int first_warp = r / kRowsPerWarp * kSegmentsPerRow;  // the warps holding this row's segments
      float s = 0;
#pragma unroll
      for (int g = 0; g < kSegmentsPerRow; ++g) s += sums[first_warp + g][r % kRowsPerWarp][t];
      y[std::int64_t(t) * out + out_row] = __float2bfloat16_rn(s);
    }
  }
  if constexpr (kChain == Chain::counts) count_block_finished(chain);
}

template <int kSegmentsPerRow, int kTokens>
__global__ __launch_bounds__(32 * kWarps) void gemv_kernel(const uint4* w, const uint4* x, __nv_bfloat16* y, int out) {
  gemv_block<kSegmentsPerRow, kTokens, Chain::none>(w, x, y, out);
}

// v3: its own kernel, so that a profile tells it from v1.
template <int kSegmentsPerRow, int kTokens>
__global__ __launch_bounds__(32 * kWarps) void chained_gemv_kernel(const uint4* w, const uint4* x, __nv_bfloat16* y,
                                                                   int out) {
  gemv_block<kSegmentsPerRow, kTokens, Chain::grid>(w, x, y, out);
}

// v4: v3 with kRowsPerWarp rows a warp. 4 rows: 192 blocks of 128 threads for GPT-2's layers, about 1.5 an SM
// a launch; at 120 registers a thread 4 blocks fit an SM, the blocks of about 2.7 launches against v3's 2, so
// the next launches' weight loads start further ahead.
constexpr int kDeepRowsPerWarp = 4;
template <int kSegmentsPerRow, int kTokens>
__global__ __launch_bounds__(32 * kWarps) void deep_chained_gemv_kernel(const uint4* w, const uint4* x,
                                                                        __nv_bfloat16* y, int out) {
  gemv_block<kSegmentsPerRow, kTokens, Chain::grid, kDeepRowsPerWarp>(w, x, y, out);
}

// v5: v4's rows a warp, held in shared memory (24 KB a block) instead of registers: 45 and 50 registers a thread
// at one token (in 768, 3072), so the blocks of about 6 launches fit an SM (9 blocks of 1.45 a launch)
// against v4's 2.7, and the weight loads run that many layers ahead of the chain. (At 2, 4 and 8 tokens its
// accumulators take 56, 74 and 105 registers: 9, 6 and 4 blocks an SM.)
template <int kSegmentsPerRow, int kTokens>
__global__ __launch_bounds__(32 * kWarps) void staged_chained_gemv_kernel(const uint4* w, const uint4* x,
                                                                          __nv_bfloat16* y, int out) {
  __shared__ uint4 staged[kWarps * kDeepRowsPerWarp * kChunks * 32];
  gemv_block<kSegmentsPerRow, kTokens, Chain::grid, kDeepRowsPerWarp, WeightHold::shared>(w, x, y, out, staged);
}

// v7: v3 with the chain's counts in place of the wait for the previous grid.
template <int kSegmentsPerRow, int kTokens>
__global__ __launch_bounds__(32 * kWarps) void counted_gemv_kernel(const uint4* w, const uint4* x, __nv_bfloat16* y,
                                                                   int out, GemvChainCounts* chain) {
  gemv_block<kSegmentsPerRow, kTokens, Chain::counts>(w, x, y, out, nullptr, chain);
}

// v8 to v10: v3 asking the L2 for its share of a later launch's weights (v9: and its x) once its own loads are
// issued; one kernel, the host passing v8 and v10 no x and v10 the weights of the launch after next.
template <int kSegmentsPerRow, int kTokens>
__global__ __launch_bounds__(32 * kWarps) void prefetching_gemv_kernel(const uint4* w, const uint4* x,
                                                                       __nv_bfloat16* y, int out, NextRun next) {
  gemv_block<kSegmentsPerRow, kTokens, Chain::grid>(w, x, y, out, nullptr, nullptr, next);
}

// ---- v2: W staged into shared memory by the bulk-copy engine (cp.async.bulk, sm_90) ----
// A block takes kRowsPerBlock consecutive rows (one contiguous piece of W, about 36 KB: 128 blocks, at most
// one per SM, for GPT-2's two layers); each of its warps takes kRowsPerWarp of them, and its lane 0 asks for
// them in one bulk copy on the warp's own mbarrier, so the whole of W is requested by 128 x warps
// instructions at the kernel's start, not by 16-byte loads, and each warp starts adding once its rows land.
// kChained: v6, v2 under PDL as v3 is v1: the copies asked for, the next launch released, then the wait for the
// previous grid before x is read (coherently: in a chain it is that grid's output). 128 blocks of 36 KB a
// launch, and a launch's whole weight read is 128 x warps instructions, against v3's 768 blocks of 16-byte
// loads. An SM holds 6 of its blocks at in = 768 (shared memory binds) but 2 at in = 3072, where registers bind
// (118 a thread at one token, x held in registers, 12 chunks a lane; the blocks_per_sm fact on an H100).
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <int kInChunks, int kRowsPerWarp, int kWarpsPerBlock, int kTokens, bool kChained = false>
__global__ __launch_bounds__(32 * kWarpsPerBlock) void bulk_gemv_kernel(const uint4* w, const uint4* x,
                                                                        __nv_bfloat16* y, int out) {
  constexpr int kRowsPerBlock = kRowsPerWarp * kWarpsPerBlock;
  constexpr int kLaneChunks = kInChunks / 32;  // 16-byte pieces of a row per lane
  constexpr bool kXInRegisters = kTokens * kLaneChunks <= 12;
  static_assert(kInChunks % 32 == 0);
  extern __shared__ __align__(128) uint4 rows[];  // [kRowsPerBlock][kInChunks]
  __shared__ __align__(8) std::uint64_t landed[kWarpsPerBlock];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first_row = blockIdx.x * kRowsPerBlock + warp * kRowsPerWarp;
  const int row_count = first_row >= out ? 0 : (out - first_row < kRowsPerWarp ? out - first_row : kRowsPerWarp);
  uint4* mine = rows + std::size_t(warp) * kRowsPerWarp * kInChunks;
  if (row_count == 0) return;  // the warp's mbarrier is its own: nothing else waits on it
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned bar = shared_address(&landed[warp]);
  if (lane == 0) {
    const unsigned bytes = unsigned(row_count) * kInChunks * 16;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     shared_address(mine)),
                 "l"(w + std::int64_t(first_row) * kInChunks), "r"(bytes), "r"(bar)
                 : "memory");
  }
  if constexpr (kChained) release_next_then_wait_for_previous();
  // x while the rows are on their way: into registers when it is small (one token), else into L2 for the
  // loads in the loop below.
  uint4 xs[kXInRegisters ? kTokens : 1][kLaneChunks];
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int c = 0; c < kLaneChunks; ++c) {
      const uint4* p = x + t * kInChunks + c * 32 + lane;
      if constexpr (kXInRegisters) xs[t][c] = load_x<kChained>(p);
      else asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
    }
  __syncwarp();  // the barrier is initialised before any lane waits on it
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred ready;\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], 0;\n"
        " selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(bar)
        : "memory");
  } while (!done);
#else
  __trap();  // cp.async.bulk needs sm_90
  uint4 xs[kXInRegisters ? kTokens : 1][kLaneChunks] = {};
#endif
  for (int r = 0; r < row_count; ++r) {
    float acc[kTokens] = {};
#pragma unroll
    for (int c = 0; c < kLaneChunks; ++c) {
      float wf[8];
      unpack8(mine[r * kInChunks + c * 32 + lane], wf);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        float xf[8];
        if constexpr (kXInRegisters) unpack8(xs[t][c], xf);
        else unpack8(load_x<kChained>(x + t * kInChunks + c * 32 + lane), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[t] += wf[i] * xf[i];
      }
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], offset);
      if (lane == 0) y[std::int64_t(t) * out + first_row + r] = __float2bfloat16_rn(acc[t]);
    }
  }
}

// Calls go.template operator()<kTokens>() at tokens 1, 2, 4 or 8: each token count is its own kernel.
template <typename Go>
void for_tokens(int tokens, Go&& go) {
  switch (tokens) {
    case 1: go.template operator()<1>(); break;
    case 2: go.template operator()<2>(); break;
    case 4: go.template operator()<4>(); break;
    case 8: go.template operator()<8>(); break;
    default: throw std::invalid_argument("gemv: tokens must be 1, 2, 4 or 8");
  }
}

// A launch on `stream`. chained (v3 to v10): with programmatic stream serialization (PDL), so the kernel may start
// while the kernel before it on the stream still runs; its griddepcontrol.wait orders what must wait. Captured
// into a graph (CUDA 12.3 and later), two consecutive such launches become kernel nodes joined by a
// programmatic edge (type cudaGraphDependencyTypeProgrammatic from port cudaGraphKernelNodePortProgrammatic),
// not a full dependency, so a replayed graph overlaps them as the stream does (the plugin's tests check the edge).
template <typename... Args>
void launch(void (*kernel)(Args...), dim3 grid, dim3 block, std::size_t shared_bytes, bool chained,
            cudaStream_t stream, std::type_identity_t<Args>... args) {
  if (!chained) {
    kernel<<<grid, block, shared_bytes, stream>>>(args...);
    return;
  }
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  ROOFBENCH_CUDA(cudaLaunchKernelEx(&config, kernel, args...));
}

// The bulk-copy versions' shape for `in`: go.template operator()<kInChunks, kRowsPerWarp, kWarpsPerBlock>(), in =
// kInChunks x 8, 24 rows of 1536 bytes, 12 of 3072 or 6 of 6144 a block: 36 KB, 128 blocks at GPT-2's out sizes.
template <typename Go>
void for_bulk_shape(std::int64_t in, Go&& go) {
  if (in == 768) go.template operator()<96, 3, 8>();
  else if (in == 1536) go.template operator()<192, 2, 6>();
  else go.template operator()<384, 1, 6>();
}

template <int kInChunks, int kRowsPerWarp, int kWarpsPerBlock>
constexpr std::size_t kBulkStageBytes = std::size_t(kRowsPerWarp) * kWarpsPerBlock * kInChunks * 16;

// v2 (kChained false) or v6: the kernel for in = kInChunks x 8 and kTokens, its dynamic shared memory allowed.
template <bool kChained, int kInChunks, int kRowsPerWarp, int kWarpsPerBlock, int kTokens>
auto bulk_kernel() {
  auto kernel = bulk_gemv_kernel<kInChunks, kRowsPerWarp, kWarpsPerBlock, kTokens, kChained>;
  // The stage may exceed the default 48 KB.
  roofbench::cuda::allow_dynamic_shared_memory(kernel, kBulkStageBytes<kInChunks, kRowsPerWarp, kWarpsPerBlock>);
  return kernel;
}

template <bool kChained>
void launch_bulk(const uint4* w, const uint4* x, __nv_bfloat16* y, std::int64_t in, int out, int tokens,
                 cudaStream_t stream) {
  for_bulk_shape(in, [&]<int kInChunks, int kRowsPerWarp, int kWarpsPerBlock>() {
    constexpr int kRowsPerBlock = kRowsPerWarp * kWarpsPerBlock;
    const dim3 grid(unsigned((out + kRowsPerBlock - 1) / kRowsPerBlock)), block(32 * kWarpsPerBlock);
    for_tokens(tokens, [&]<int kTokens>() {
      launch(bulk_kernel<kChained, kInChunks, kRowsPerWarp, kWarpsPerBlock, kTokens>(), grid, block,
             kBulkStageBytes<kInChunks, kRowsPerWarp, kWarpsPerBlock>, kChained, stream, w, x, y, out);
    });
  });
}

int bulk_blocks_per_sm(std::int64_t in, int tokens) {
  int blocks = 0;
  for_bulk_shape(in, [&]<int kInChunks, int kRowsPerWarp, int kWarpsPerBlock>() {
    for_tokens(tokens, [&]<int kTokens>() {
      ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, bulk_kernel<true, kInChunks, kRowsPerWarp, kWarpsPerBlock, kTokens>(), 32 * kWarpsPerBlock,
          kBulkStageBytes<kInChunks, kRowsPerWarp, kWarpsPerBlock>));
    });
  });
  return blocks;
}

// v5's blocks are bound by shared memory: the carveout that gives an SM the most, for as many blocks as fit. At
// every launch, since the setting belongs to the context, which a device reset replaces.
template <typename Kernel>
void prefer_shared_memory(Kernel* kernel) {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                      cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
}

// The warp-per-segment versions: v1, v3 (chained), v4 (chained, kDeepRowsPerWarp rows a warp), v5 (v4's,
// held in shared memory), v7 (v3 chained by counts), v8 to v10 (v3 prefetching a later launch's weights, and x).
enum class SegmentVersion { v1, v3, v4, v5, v7, v8 };

// `version` for in = 768 x kSegmentsPerRow.
// `version`'s kernel for in = 768 x kSegmentsPerRow and kTokens tokens, its carveout set (v5).
template <SegmentVersion kVersion, int kSegmentsPerRow, int kTokens>
auto segment_kernel() {
  if constexpr (kVersion == SegmentVersion::v7) {
    return counted_gemv_kernel<kSegmentsPerRow, kTokens>;
  } else if constexpr (kVersion == SegmentVersion::v8) {
    return prefetching_gemv_kernel<kSegmentsPerRow, kTokens>;
  } else {
    auto kernel = kVersion == SegmentVersion::v1   ? gemv_kernel<kSegmentsPerRow, kTokens>
                  : kVersion == SegmentVersion::v3 ? chained_gemv_kernel<kSegmentsPerRow, kTokens>
                  : kVersion == SegmentVersion::v4 ? deep_chained_gemv_kernel<kSegmentsPerRow, kTokens>
                                                   : staged_chained_gemv_kernel<kSegmentsPerRow, kTokens>;
    if constexpr (kVersion == SegmentVersion::v5) prefer_shared_memory(kernel);
    return kernel;
  }
}

// Calls go.template operator()<kSegmentsPerRow>() for in = 768, 1536 or 3072.
template <typename Go>
void for_segments(std::int64_t in, Go&& go) {
  if (in == 768) go.template operator()<1>();
  else if (in == 1536) go.template operator()<2>();
  else go.template operator()<4>();
}

template <SegmentVersion kVersion>
void launch_segments(const uint4* w, const uint4* x, __nv_bfloat16* y, std::int64_t in, int out, int tokens,
                     cudaStream_t stream, GemvChainCounts* chain, NextRun next) {
  constexpr bool kDeep = kVersion == SegmentVersion::v4 || kVersion == SegmentVersion::v5;
  for_segments(in, [&]<int kSegmentsPerRow>() {
    constexpr int kRowsPerBlock = rows_per_block(kSegmentsPerRow, kDeep ? kDeepRowsPerWarp : 1);
    const dim3 grid(unsigned((out + kRowsPerBlock - 1) / kRowsPerBlock)), block(32 * kWarps);
    for_tokens(tokens, [&]<int kTokens>() {
      constexpr bool kChained = kVersion != SegmentVersion::v1;
      if constexpr (kVersion == SegmentVersion::v7)
        launch(segment_kernel<kVersion, kSegmentsPerRow, kTokens>(), grid, block, 0, kChained, stream, w, x, y, out,
               chain);
      else if constexpr (kVersion == SegmentVersion::v8)
        launch(segment_kernel<kVersion, kSegmentsPerRow, kTokens>(), grid, block, 0, kChained, stream, w, x, y, out,
               next);
      else launch(segment_kernel<kVersion, kSegmentsPerRow, kTokens>(), grid, block, 0, kChained, stream, w, x, y, out);
    });
  });
}

template <SegmentVersion kVersion>
int segment_blocks_per_sm(std::int64_t in, int tokens) {
  int blocks = 0;
  for_segments(in, [&]<int kSegmentsPerRow>() {
    for_tokens(tokens, [&]<int kTokens>() {
      ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, segment_kernel<kVersion, kSegmentsPerRow, kTokens>(), 32 * kWarps, 0));
    });
  });
  return blocks;
}

// Calls go.template operator()<kVersion>() for a warp-per-segment version's name; false for another.
template <typename Go>
bool with_segment_version(const std::string& version, Go&& go) {
  if (version == "v1") go.template operator()<SegmentVersion::v1>();
  else if (version == "v3") go.template operator()<SegmentVersion::v3>();
  else if (version == "v4") go.template operator()<SegmentVersion::v4>();
  else if (version == "v5") go.template operator()<SegmentVersion::v5>();
  else if (version == "v7") go.template operator()<SegmentVersion::v7>();
  else if (gemv_prefetch_distance(version) > 0) go.template operator()<SegmentVersion::v8>();
  else return false;
  return true;
}

}  // namespace

std::string gemv_refusal(std::int64_t in, std::int64_t out, std::int64_t tokens) {
  if (in != 768 && in != 1536 && in != 3072) return "the hand GEMV is built for in = 768, 1536 or 3072 only";
  if (tokens != 1 && tokens != 2 && tokens != 4 && tokens != 8) return "the hand GEMV takes 1, 2, 4 or 8 tokens";
  if (out < 1 || out > (std::int64_t(1) << 30)) return "the hand GEMV takes 1 to 2^30 output rows";
  return {};
}

const std::vector<std::string>& gemv_versions() {
  static const std::vector<std::string> versions = {"v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"};
  return versions;
}

std::string gemv_sm90_feature(const std::string& version) {
  if (version == "v2") return "copies through cp.async.bulk";
  if (version == "v6")
    return "copies through cp.async.bulk and overlaps the launch before it through programmatic dependent launch "
           "(griddepcontrol)";
  if (version == "v7")
    return "overlaps the launch before it through programmatic dependent launch (griddepcontrol) and waits for it "
           "by acquire loads of the chain's counts";
  if (gemv_prefetch_distance(version) > 0)
    return "overlaps the launch before it through programmatic dependent launch (griddepcontrol) and prefetches "
           "through cp.async.bulk.prefetch";
  if (gemv_launches_overlap(version))
    return "overlaps the launch before it through programmatic dependent launch (griddepcontrol)";
  return {};
}

bool gemv_launches_overlap(const std::string& version) {
  return version == "v3" || version == "v4" || version == "v5" || version == "v6" || version == "v7" ||
         gemv_prefetch_distance(version) > 0;
}

bool gemv_needs_chain(const std::string& version) { return version == "v7"; }

int gemv_prefetch_distance(const std::string& version) {
  if (version == "v8" || version == "v9") return 1;
  return version == "v10" ? 2 : 0;
}

int gemv_blocks_per_sm(const std::string& version, std::int64_t in, std::int64_t tokens, int device) {
  if (const std::string why = gemv_refusal(in, 1, tokens); !why.empty()) throw std::invalid_argument(why);
  int blocks = 0;
  const auto count = [&]<SegmentVersion kVersion>() {
    const cuda::DeviceGuard scope(device);
    blocks = segment_blocks_per_sm<kVersion>(in, int(tokens));
  };
  if (version == "v6") {
    const cuda::DeviceGuard scope(device);
    return bulk_blocks_per_sm(in, int(tokens));
  }
  if (!with_segment_version(version, count))
    throw std::invalid_argument("gemv: no blocks per SM for version '" + version + "'");
  return blocks;
}

bool gemv_code_has_sm90(const std::string& version, int device) {
  const void* kernel = nullptr;
  if (version == "v2") kernel = reinterpret_cast<const void*>(bulk_gemv_kernel<96, 3, 8, 1>);
  else if (version == "v3") kernel = reinterpret_cast<const void*>(chained_gemv_kernel<1, 1>);
  else if (version == "v4") kernel = reinterpret_cast<const void*>(deep_chained_gemv_kernel<1, 1>);
  else if (version == "v5") kernel = reinterpret_cast<const void*>(staged_chained_gemv_kernel<1, 1>);
  else if (version == "v6") kernel = reinterpret_cast<const void*>(bulk_gemv_kernel<96, 3, 8, 1, true>);
  else if (version == "v7") kernel = reinterpret_cast<const void*>(counted_gemv_kernel<1, 1>);
  else if (gemv_prefetch_distance(version) > 0)
    kernel = reinterpret_cast<const void*>(prefetching_gemv_kernel<1, 1>);
  else return true;
  const cuda::DeviceGuard scope(device);
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, kernel);
  if (status == cudaErrorNoKernelImageForDevice || status == cudaErrorInvalidDeviceFunction) {
    (void)cudaGetLastError();  // not sticky: the device has no code for it at all
    return false;
  }
  ROOFBENCH_CUDA(status);
  return attributes.ptxVersion >= 90;  // the virtual architecture the loaded code was compiled from, 10 x major + minor
}

void gemv_bf16(const std::string& version, const void* w, const void* x, void* y, std::int64_t in, std::int64_t out,
               std::int64_t tokens, cudaStream_t stream, void* chain, const GemvNextRun& next_run) {
  if (const std::string why = gemv_refusal(in, out, tokens); !why.empty()) throw std::invalid_argument(why);
  if (gemv_needs_chain(version) && chain == nullptr)
    throw std::invalid_argument("gemv_" + version + " needs its chain's counts (kGemvChainBytes, zeroed once)");
  const auto aligned = [](const void* p, std::size_t bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && bytes % 16 == 0 && bytes < (std::size_t(1) << 32);
  };
  if (!aligned(next_run.w, next_run.w_bytes) || !aligned(next_run.x, next_run.x_bytes))
    throw std::invalid_argument("gemv: the next run's addresses and sizes must be multiples of 16 bytes, under 4 GiB");
  NextRun next{next_run.w, next_run.w == nullptr ? 0 : next_run.w_bytes};
  if (version == "v9" && next_run.x != nullptr) next.x = next_run.x, next.x_size = next_run.x_bytes;
  const auto* wv = static_cast<const uint4*>(w);
  const auto* xv = static_cast<const uint4*>(x);
  auto* yv = static_cast<__nv_bfloat16*>(y);
  const bool segments = with_segment_version(version, [&]<SegmentVersion kVersion>() {
    launch_segments<kVersion>(wv, xv, yv, in, int(out), int(tokens), stream, static_cast<GemvChainCounts*>(chain),
                              next);
  });
  if (version == "v2") launch_bulk<false>(wv, xv, yv, in, int(out), int(tokens), stream);
  else if (version == "v6") launch_bulk<true>(wv, xv, yv, in, int(out), int(tokens), stream);
  else if (!segments) throw std::invalid_argument("gemv: no version '" + version + "'");
  ROOFBENCH_CUDA(cudaGetLastError());
}

}  // namespace roofbench::transformer
