// v15's forward walk (the keeper's, v29's, sm_90a forward, attention_v44.cu, and the lab's v15, v22, v23, v24, v26
// and v28, lab/attention_v15.cu, _v22.cu, _v23.cu, _v26.cu and _v27.cu): a block is one warp group, three (or
// four) share an SM, each walking its own heads (persistent: blockIdx.x, then + gridDim.x, ...):
//   - thread 0 loads the head's q, k, v (the raw qkv map) as three boxes on the block's mbarrier, then asks the
//     L2 for the next head's (tma_prefetch_2d; not where l2_prefetch is off, v26); every thread fetches its bias
//     and RoPE factors meanwhile (v29: the head's k and v alone, its q loaded a head ahead into a tile of its
//     own);
//   - the group prepares q, k and v in place (v10's preparation; v stays [key][dim] and P V reads it
//     MN-major, imm-trans-b 1, instead of v10's transposed copy);
//   - query half 0 (rows 0 .. 63, keys 0 .. 63), then query half 1 (rows 64 .., keys 0 .. 127): S on wgmma,
//     v9's softmax_row_block (exact: every key in registers), O = P V with P from registers; each warp's O,
//     times 1 / sum, staged in its own q rows (which no product reads after S) and stored as 128-byte rows;
//     lse in natural units for the rows below T;
//   - a barrier ends the head; the next head's boxes land in the same tiles.
// Included by sm_90a translation units alone, after attention_sm90a.cuh.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "attention_forward_sm90a.cuh"
#include "attention_forward_half_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kV15Threads = 128;  // one warp group
constexpr int kV15BlocksPerSm = 3;

struct V15Smem {
  HeadTiles head;
  std::uint64_t loaded;  // the three boxes' bytes
};
constexpr std::size_t kV15SmemBytes = sizeof(V15Smem) + kAtomBytes;  // room to align the start

// Which changes a walk makes to v15's: float4_preparation, the bias and RoPE factors by 16-byte loads
// (HeadPreparationSm90a::load's kFloat4; v22 to v24, v26); preparation_after_wait, those loads once the boxes have
// landed rather than while they are in flight, so no thread holds their 88 floats across the wait (v24). The
// blocks an SM are the kernel's launch bounds (v23 and v24: four, at 128 registers). Without l2_prefetch (v26)
// the next head's boxes are not asked of the L2 ahead of their loads. Each version instantiates the walk in a
// __global__ of its own name, so that --profile and Nsight Compute name the version that ran.
// mid_head_l2_prefetch (v28): the next head's boxes asked of the L2 once query half 0 has run, half a head ahead of
// their loads instead of a whole head (l2_prefetch). q_ahead (v29): the next head's q loaded into a tile of its own
// (V29Smem) as soon as this head's preparation has read that tile, a head ahead; the head then waits for its k
// and v alone, and its preparation writes q, prepared, from that tile into the head's.
struct ForwardWalkPolicy {
  bool float4_preparation = false, preparation_after_wait = false, l2_prefetch = true, mid_head_l2_prefetch = false,
       q_ahead = false;
};
inline constexpr ForwardWalkPolicy kV15ForwardWalk{}, kV22ForwardWalk{.float4_preparation = true},
    kV24ForwardWalk{.float4_preparation = true, .preparation_after_wait = true},
    kV26ForwardWalk{.float4_preparation = true, .l2_prefetch = false},
    kV28ForwardWalk{.float4_preparation = true, .l2_prefetch = false, .mid_head_l2_prefetch = true},
    kV29ForwardWalk{.float4_preparation = true, .l2_prefetch = false, .q_ahead = true};

// v29's: v15's tiles, the tile the next head's q lands in, and its barrier.
struct V29Smem {
  HeadTiles head;
  unsigned char next_q[kHeadTileBytes];
  std::uint64_t loaded, q_loaded;  // the head's k and v boxes' bytes; the next q's
};
constexpr std::size_t kV29SmemBytes = sizeof(V29Smem) + kAtomBytes;  // room to align the start
// TMA's 128-byte swizzle and the wgmma descriptors (base offset 0) need next_q on a swizzle repeat; three blocks
// of kV29SmemBytes, each with the 1 KB the hardware reserves a block, within an H100 SM's 228 KB.
static_assert(offsetof(V29Smem, next_q) % kAtomBytes == 0, "next_q starts on a 1024-byte swizzle repeat");
static_assert(kV15BlocksPerSm * (kV29SmemBytes + 1024) <= 228 * 1024, "three v29 blocks an SM");

// The head `at`'s k and v boxes on `bar`. One thread.
__device__ inline void load_kv(HeadTiles& tiles, const CUtensorMap* map, std::uint64_t* bar, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::mbarrier_arrive_expect_tx(bar, 2 * kHeadTileBytes);
  hw::tma_load_2d(tiles.k, map, bar, row, at.C + col);
  hw::tma_load_2d(tiles.v, map, bar, row, 2 * at.C + col);
}

// The head `at`'s q box into `tile` on `bar`. One thread.
__device__ inline void load_q(unsigned char* tile, const CUtensorMap* map, std::uint64_t* bar, const HeadRows& at) {
  hw::mbarrier_arrive_expect_tx(bar, kHeadTileBytes);
  hw::tma_load_2d(tile, map, bar, at.b * at.T, at.h * kHeadDim);
}

// The head `at`'s three boxes into the L2 ahead of load_head. One thread.
__device__ inline void prefetch_head_boxes(const CUtensorMap* qkv_map, const HeadRows& at) {
#pragma unroll
  for (int part = 0; part < 3; ++part) hw::tma_prefetch_2d(qkv_map, at.b * at.T, part * at.C + at.h * kHeadDim);
}

// The walk over the block's heads (Smem: V15Smem, or V29Smem where q comes a head ahead).
template <ForwardWalkPolicy kPolicy, typename Smem>
__device__ __forceinline__ void walk_forward_heads(Smem& sm, const CUtensorMap* qkv_map, bf16* out, float* lse,
                                                   const float* bias, const FusedArgs& args) {
  constexpr bool kQAhead = kPolicy.q_ahead;
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x), T = args.s.T;
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.loaded, 1);
    if constexpr (kQAhead) hw::mbarrier_init(&sm.q_loaded, 1);
    hw::mbarrier_init_fence();
    if constexpr (kQAhead)  // the first head's q
      if (static_cast<int>(blockIdx.x) < heads)
        load_q(sm.next_q, qkv_map, &sm.q_loaded, v10_head_rows(static_cast<int>(blockIdx.x), args.s));
  }
  __syncthreads();
  for (int head = static_cast<int>(blockIdx.x), n = 0; head < heads; head += stride, ++n) {
    const HeadRows at = v10_head_rows(head, args.s);
    if (threadIdx.x == 0) {
      if constexpr (kQAhead)
        load_kv(sm.head, qkv_map, &sm.loaded, at);
      else
        load_head(sm.head, qkv_map, &sm.loaded, at);
      if (kPolicy.l2_prefetch && head + stride < heads)
        prefetch_head_boxes(qkv_map, v10_head_rows(head + stride, args.s));
    }
    HeadPreparationSm90a<kV15Threads> prep;
    if constexpr (!kPolicy.preparation_after_wait) prep.load<kPolicy.float4_preparation>(bias, args.rope, at);
    hw::mbarrier_wait_or_trap(&sm.loaded, n & 1);
    if constexpr (kPolicy.preparation_after_wait) prep.load<kPolicy.float4_preparation>(bias, args.rope, at);
    const auto store_v = [&](int, int, std::uint32_t offset, const uint4& v) {
      *reinterpret_cast<uint4*>(sm.head.v + offset) = v;
    };
    if constexpr (kQAhead) {
      hw::mbarrier_wait_or_trap(&sm.q_loaded, n & 1);
      prep.apply_from(sm.next_q, sm.head, T, store_v);
    } else {
      prep.apply(sm.head, T, store_v);
    }
    __syncthreads();  // every chunk prepared (and fenced) before any wgmma reads it
    if constexpr (kQAhead)  // next_q has been read (and the reads fenced by apply): the next head's q may land
      if (threadIdx.x == 0 && head + stride < heads)
        load_q(sm.next_q, qkv_map, &sm.q_loaded, v10_head_rows(head + stride, args.s));
    // Half 1 runs at any T: with its call under `T > 64` ptxas serializes the wgmmas (C7511). Rows from T on
    // are masked, and neither their out nor their lse is stored.
    attend_query_half<64>(sm.head, out, lse, at, args, 0);
    if (kPolicy.mid_head_l2_prefetch && threadIdx.x == 0 && head + stride < heads)
      prefetch_head_boxes(qkv_map, v10_head_rows(head + stride, args.s));
    attend_query_half<kMaxT>(sm.head, out, lse, at, args, 1);
    hw::fence_proxy_async_shared();  // the staging stores into q, before TMA writes the tiles again (v29: k, v)
    __syncthreads();                 // the tiles are free
  }
}

// A forward walk's kernel: qkv's tensor map, out, lse, qkv's bias and the arguments.
using ForwardWalkKernel = void (*)(CUtensorMap, bf16*, float*, const float*, FusedArgs);

// A forward walk kernel's host side: its name in messages ("v15's forward"), the name of the configure its
// callers export, its shared memory, its threads a block (one warp group, or the lab's v50's three, each walking its
// own heads) and its persistent grid (as many blocks as fit at once; 0 until configure).
struct ForwardWalk {
  const char* version;
  const char* configure_name;
  ForwardWalkKernel kernel;
  std::size_t smem_bytes = kV15SmemBytes;
  int threads = kV15Threads;
  int grid = 0;

  // Three or four blocks of 49 KB (v29: three of 65 KB) need the carveout that gives an SM the most shared memory.
  void configure() { grid = configure_shared_sm90a(version, kernel, threads, smem_bytes); }

  // The kernel on `stream` over every head, at most `grid` blocks.
  void launch(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
              cudaStream_t stream) const {
    if (grid == 0) throw Error(std::string("gpt: attention ") + version + " runs after " + configure_name + "()");
    const FusedArgs args = fused_args(s, rope);
    const CUtensorMap map = qkv_tensor_map(version, out, qkv, qkv_bias, rope, s);  // out's alignment checked too
    kernel<<<std::min(s.batch * s.heads, grid), threads, smem_bytes, stream>>>(map, out, lse, qkv_bias, args);
    ROOFBENCH_CUDA_LAUNCH();
  }

  // launch where a batch's heads number at least four per warp group of the grid (sm90a_forward_pays, the keeper's
  // rule), v9's forward below (the lab's rows on these walks).
  void launch_or_v9(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                    const AttentionShape& s, cudaStream_t stream) const {
    if (sm90a_forward_pays(s.batch * s.heads, grid * (threads / kV15Threads)))
      launch(out, lse, qkv, qkv_bias, rope, s, stream);
    else
      fused_attention_v9_forward(out, lse, qkv, qkv_bias, rope, s, stream);
  }
};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
