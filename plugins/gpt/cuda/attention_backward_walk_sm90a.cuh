// The sm_90a backward walk of the lab's v14, v17, v18, v21, v22, v25 to v31 and v34 to v42 (v38 the keeper's until
// v44), which differ in when and how a head's rows and figures are fetched and in how the steps overlap: a block of
// one warp group walks its own heads (persistent: blockIdx.x, then + gridDim.x, ...) running
// attention_backward_sm90a.cuh's steps on each (v32 and v33 walk their own way, walk_backward_heads_q_ahead below).
// Included by the lab's attention_v14.cu, _v17.cu, _v18.cu, _v21.cu, _v22.cu, _v25.cu, _v26.cu, _v27.cu, _v30.cu and
// _v32.cu, each instantiating the walk it launches, after attention_backward_sm90a.cuh, and by attention_v44.cu (the
// training library's sm_90a objects) and the lab's attention_v43.cu for the pieces that
// attention_backward_query_first_sm90a.cuh's walk (the keeper's, v44's, and v43's) shares with these.
//   - thread 0 loads the head's q, k, v (the raw qkv map), dout and out as five 128 x 64 boxes, out into the
//     dS^T tiles (read for delta before the key phase writes dS^T there), then asks the L2 for the next head's
//     boxes (tma_prefetch_2d; not where l2_prefetch is off, v26); every thread fetches the head's bias, RoPE
//     factors and lse while the boxes fly;
//   - the group prepares the head and takes delta, runs key half 0 (128 queries) and key half 1 (64), then,
//     after a barrier, query half 0 (64 keys) and query half 1 (128): all 15 products;
//   - a barrier ends the head; the next head's boxes land in the same tiles.
// next_rows_early (v17): v and dout are read by the key phase alone (v also holds its dv and dk staging), so
// once it has ended thread 0 loads the next head's v and dout into them on a second barrier, and they land
// during the query phase; only q, k and out wait for the head's end.
// lse_ahead (v18): the head's lse, read from global memory where the L2 has not seen it, is scaled into shared
// memory only once the boxes have landed (each thread holds its row's value across the wait), and thread 0 asks
// the L2 for the next head's lse with its boxes. In v17 the scaling waits on the load at once: Nsight Compute
// (H100, batch 512) puts 8.5% of the backward's warp samples on that one multiply.
// dq_factors under_product (v21): each query half's RoPE factors, which rotate dq back, are fetched while the
// tensor cores compute dq, not after (in v17 three of those multiplies wait on their loads, 5.6% of samples).
// q_early (v25): dq leaves from the registers instead of through q's rows, so the next head's q loads with its
// v and dout during the query phase and only k and out wait for the head's end.
// rope_l1_prefetch (v27): the RoPE factors that rotate dk and dq back are asked of the L1 (one prefetch a lane
// for a warp's 16 rows) at the start of each key half and before the barrier that ends the key phase, so the
// loads that follow the products find them there. In v26 three of those loads' first uses hold 7.7% of the
// backward's warp samples (Nsight Compute, H100, batch 512), each waiting on the L2.
// late_l2_prefetch (v28): the next head's late boxes (q, k, out) asked of the L2 when its early ones are loaded,
// half a head ahead of their loads rather than a whole head (v22's l2_prefetch, whose lines were partly evicted
// before use and read again: 1.32x the model's DRAM bytes); in v26 11.5% of the warp samples wait for them.
// out_mid_query (v30): out is read by the preparation alone (for delta), into dS^T's first tile, which query half
// 0 is the last to read; so the next head's out is loaded there as soon as query half 0 has ended (a block
// barrier), on the early barrier (which then counts v, dout and out), and lands during query half 1: only q and
// k wait for the head's end. out_after_dq (v31): the same load issued by thread 0 as soon as its own wait for
// query half 0's dq product returns, with no block barrier: PTX promises that wait for the calling warp's
// wgmma groups only, and v31 relies on the hardware running a warp group's wgmma as one operation (CUTLASS's
// TMA pipeline releases a stage on one arrival a consumer warp group, after that thread's wait, likewise).
// qkv_bias_sums (lab_attention_qkv_bias_bf16's v2 on v26's walk, v3 to v9 on the lab's v34 and v37 to v42; v10, the
// keeper's, on v44's walk, which uses store_head_column_sums too): as each warp stores a 16-row block of dq, dk or dv
// it adds the block's columns as stored (BlockColumnSums) into a slot of its own in shared memory; after the head's
// last barrier the group adds the head's blocks below T of each column in row order and writes the head's 3 x 64 sums
// to args.column_partials[b][3C] (each (b, h) once), which column_finish adds over the batch in a fixed order: qkv's
// bias gradient without a pass that reads dqkv again.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "column_reduce.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kV14Threads = 128;  // one warp group
constexpr int kV14BlocksPerSm = 2;

// v14's shared memory, from the first 1024-byte aligned address of the dynamic allocation.
struct V14Smem {
  HeadTiles head;
  unsigned char dout[kHeadTileBytes];
  unsigned char ds_t[2][kHeadTileBytes];  // dS^T; out's tile lands in the first until delta is taken
  float lse[kMaxT], delta[kMaxT];         // lse in log2 units
  std::uint64_t full;                     // the head's five boxes' bytes
};
constexpr std::size_t kV14SmemBytes = sizeof(V14Smem) + kAtomBytes;  // room to align the start

// The kernel's tensor maps (its __grid_constant__ parameters): the raw qkv [N, 3C], dout and out [N, C].
struct V14Maps {
  const CUtensorMap *qkv, *dout, *out;
};

// The head `at`'s five boxes, out into dS^T's first tile, completing on the block's barrier. One thread.
__device__ inline void load_v14_head(V14Smem& sm, const V14Maps& maps, const HeadRows& at) {
  load_head(sm.head, maps.qkv, &sm.full, at, 2 * kHeadTileBytes);
  hw::tma_load_2d(sm.dout, maps.dout, &sm.full, at.b * at.T, at.h * kHeadDim);
  hw::tma_load_2d(sm.ds_t[0], maps.out, &sm.full, at.b * at.T, at.h * kHeadDim);
}

// The head `at`'s five boxes into the L2 ahead of load_v14_head. One thread.
__device__ inline void prefetch_v14_head(const V14Maps& maps, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
#pragma unroll
  for (int part = 0; part < 3; ++part) hw::tma_prefetch_2d(maps.qkv, row, part * at.C + col);
  hw::tma_prefetch_2d(maps.dout, row, col);
  hw::tma_prefetch_2d(maps.out, row, col);
}

// v28: the head `at`'s q, k and out (the boxes load_late_boxes loads) into the L2, half a head ahead. One thread.
__device__ inline void prefetch_late_boxes(const V14Maps& maps, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::tma_prefetch_2d(maps.qkv, row, col);
  hw::tma_prefetch_2d(maps.qkv, row, at.C + col);
  hw::tma_prefetch_2d(maps.out, row, col);
}

// v17's: v14's and the barrier of the boxes it loads during the query phase before (v and dout).
struct V17Smem : V14Smem {
  std::uint64_t early;
};
constexpr std::size_t kV17SmemBytes = sizeof(V17Smem) + kAtomBytes;

// With qkv_bias_sums: v17's, and the column sums of the head's dq, dk and dv, a slot for each warp's 16-row block.
struct QkvBiasSmem : V17Smem {
  alignas(16) float column_sums[3][kRowBlocks][kHeadDim];  // BlockColumnSums stores 16 bytes a lane
};
constexpr std::size_t kQkvBiasSmemBytes = sizeof(QkvBiasSmem) + kAtomBytes;

// v17: the head `at`'s q (unless kQEarly), k and out (into dS^T's first tile; unless kOutEarly, v30) on the block's
// barrier. One thread.
template <bool kQEarly = false, bool kOutEarly = false>
__device__ inline void load_late_boxes(V17Smem& sm, const V14Maps& maps, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::mbarrier_arrive_expect_tx(&sm.full, (3 - (kQEarly ? 1 : 0) - (kOutEarly ? 1 : 0)) * kHeadTileBytes);
  if constexpr (!kQEarly) hw::tma_load_2d(sm.head.q, maps.qkv, &sm.full, row, col);
  hw::tma_load_2d(sm.head.k, maps.qkv, &sm.full, row, at.C + col);
  if constexpr (!kOutEarly) hw::tma_load_2d(sm.ds_t[0], maps.out, &sm.full, row, col);
}

// v17: the head `at`'s v and dout (and q where kQEarly, v25) on the early barrier; where kOutEarly (v30) the
// barrier also expects out's box, which load_out_early issues. One thread.
template <bool kQEarly = false, bool kOutEarly = false>
__device__ inline void load_early_boxes(V17Smem& sm, const V14Maps& maps, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::mbarrier_arrive_expect_tx(&sm.early, (2 + (kQEarly ? 1 : 0) + (kOutEarly ? 1 : 0)) * kHeadTileBytes);
  hw::tma_load_2d(sm.head.v, maps.qkv, &sm.early, row, 2 * at.C + col);
  hw::tma_load_2d(sm.dout, maps.dout, &sm.early, row, col);
  if constexpr (kQEarly) hw::tma_load_2d(sm.head.q, maps.qkv, &sm.early, row, col);
}

// v30: the head `at`'s out into dS^T's first tile on the early barrier (load_early_boxes<_, true> expects it).
// One thread.
__device__ inline void load_out_early(V17Smem& sm, const V14Maps& maps, const HeadRows& at) {
  hw::tma_load_2d(sm.ds_t[0], maps.out, &sm.early, at.b * at.T, at.h * kHeadDim);
}

// The head `at`'s lse (T floats, contiguous) into the L2 ahead of its loads, every 128-byte line it touches. One
// thread.
__device__ inline void prefetch_lse(const float* lse, const HeadRows& at, int heads) {
  const auto first = reinterpret_cast<std::uintptr_t>(lse + at.stats_at(0, heads));
  const std::uintptr_t last = first + at.T * sizeof(float) - 1;
  for (std::uintptr_t line = first & ~std::uintptr_t(127); line <= last; line += 128)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(line));
}

// Which key halves compute a masked chunk's exponents for every pair and drop the masked ones by a select (v39's
// select_masked) instead of branching around them: v42 selects in key half 1 alone, whose 64 queries leave the
// registers that key half 0's 128 lack beside v38's factors (v40 spills).
enum class SelectMasked { in_neither_half, in_both_halves, in_half_1 };

// Which of the changes above a walk makes: v14's none, v17's the first, v18's the first two, v21's those and
// dq_factors under_product (backward_query_rows's kFetch), v22's v18's and float4_preparation
// (HeadPreparationSm90a::load's kFloat4), v25's v22's and q_early (dq stored from the registers,
// backward_query_rows's kDirect, its RoPE factors fetched under the product as v21's, so q's tile is free for
// the next head's q with its v and dout), v26's v22's without l2_prefetch (the next head's boxes not asked of
// the L2 ahead of their loads), v27's v26's and rope_l1_prefetch, v28's v27's and late_l2_prefetch, v30's v26's
// and out_mid_query, v31's v30's and out_after_dq, kQkvBiasWalk v26's and qkv_bias_sums, v34's v26's and
// dq_together (backward_query_halves_together), v35's v34's and key_halves_overlapped
// (backward_key_halves_overlapped), kV34QkvBiasWalk v34's and qkv_bias_sums, v36's v34's with q_early and
// dq_staged_in_ds_t (dq staged in dS^T's first tile, not q's, so the next head's q loads with its v and dout and
// only k and out wait for the head's end), v37's v34's with dk_factors and dq_factors under_product (dk's and dq's
// RoPE factors fetched while the tensor cores compute dk and dq, not after: in v26's backward their first uses hold
// about 9% of the warp samples), v38's v37's with both under_product_lane_ordered (those factors from RopeTable's
// lane-ordered copy, four 16-byte loads a row instead of sixteen 4-byte ones; the keeper's until v44), v39's v34's and
// select_masked (a masked chunk's exponents computed for every pair and dropped by a select, not branched around:
// v26's backward spends about 16% of its instructions on its masked chunks), v40's v38's and v39's together, v41's
// v40's with dk's factors as v37's (v40's key phase spills), v42's v38's with select_masked in key half 1 alone,
// kV37QkvBiasWalk to kV42QkvBiasWalk theirs and qkv_bias_sums. Each version instantiates the walk in a __global__
// of its own name, so that --profile and Nsight Compute name the version that ran.
struct WalkPolicy {
  bool next_rows_early = false, lse_ahead = false, float4_preparation = false,
       q_early = false, l2_prefetch = true, rope_l1_prefetch = false, late_l2_prefetch = false,
       out_mid_query = false, out_after_dq = false, qkv_bias_sums = false, dq_together = false,
       key_halves_overlapped = false, dq_staged_in_ds_t = false;
  SelectMasked select_masked = SelectMasked::in_neither_half;
  FactorFetch dk_factors = FactorFetch::after_product, dq_factors = FactorFetch::after_product;
};
inline constexpr WalkPolicy kV14Walk{}, kV17Walk{.next_rows_early = true},
    kV18Walk{.next_rows_early = true, .lse_ahead = true},
    kV21Walk{.next_rows_early = true, .lse_ahead = true, .dq_factors = FactorFetch::under_product},
    kV22Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true},
    kV25Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .q_early = true},
    kV26Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false},
    kV27Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .rope_l1_prefetch = true},
    kV28Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .rope_l1_prefetch = true, .late_l2_prefetch = true},
    kV30Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .out_mid_query = true},
    kV31Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .out_mid_query = true, .out_after_dq = true},
    kV34Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true},
    kV35Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true, .key_halves_overlapped = true},
    kV36Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .q_early = true,
             .l2_prefetch = false, .dq_together = true, .dq_staged_in_ds_t = true},
    kV37Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true, .dk_factors = FactorFetch::under_product, .dq_factors = FactorFetch::under_product},
    kV38Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true, .dk_factors = FactorFetch::under_product_lane_ordered,
             .dq_factors = FactorFetch::under_product_lane_ordered},
    kV39Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true, .select_masked = SelectMasked::in_both_halves},
    kV40Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true, .select_masked = SelectMasked::in_both_halves,
             .dk_factors = FactorFetch::under_product_lane_ordered,
             .dq_factors = FactorFetch::under_product_lane_ordered},
    kV41Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true, .select_masked = SelectMasked::in_both_halves,
             .dk_factors = FactorFetch::under_product, .dq_factors = FactorFetch::under_product_lane_ordered},
    kV42Walk{.next_rows_early = true, .lse_ahead = true, .float4_preparation = true, .l2_prefetch = false,
             .dq_together = true, .select_masked = SelectMasked::in_half_1,
             .dk_factors = FactorFetch::under_product_lane_ordered,
             .dq_factors = FactorFetch::under_product_lane_ordered};

// A walk's policy with qkv_bias_sums: the trainers' kernel beside the lab row it sums on.
constexpr WalkPolicy with_qkv_bias_sums(WalkPolicy policy) {
  policy.qkv_bias_sums = true;
  return policy;
}
inline constexpr WalkPolicy kQkvBiasWalk = with_qkv_bias_sums(kV26Walk),
                            kV34QkvBiasWalk = with_qkv_bias_sums(kV34Walk),
                            kV37QkvBiasWalk = with_qkv_bias_sums(kV37Walk),
                            kV38QkvBiasWalk = with_qkv_bias_sums(kV38Walk),
                            kV39QkvBiasWalk = with_qkv_bias_sums(kV39Walk),
                            kV40QkvBiasWalk = with_qkv_bias_sums(kV40Walk),
                            kV41QkvBiasWalk = with_qkv_bias_sums(kV41Walk),
                            kV42QkvBiasWalk = with_qkv_bias_sums(kV42Walk);

// qkv_bias_sums: the head's column sums of dq, dk and dv (`sums`, its blocks' slots), its blocks below T added in row
// order, to partials[b][part C + h 64 + column]. The group's threads (`thread` of kV14Threads), after the barrier that
// ends the head.
__device__ inline void store_column_sums(const float (&sums)[3][kRowBlocks][kHeadDim], float* partials,
                                         const HeadRows& at, int thread) {
  const int blocks = min(kRowBlocks, (at.T + kRows - 1) / kRows);  // a block at or past T was never written
  for (int i = thread; i < 3 * kHeadDim; i += kV14Threads) {
    const int part = i / kHeadDim, c = i % kHeadDim;
    float total = 0.0f;
    for (int block = 0; block < blocks; ++block) total += sums[part][block][c];
    partials[static_cast<std::size_t>(at.b) * 3 * at.C + part * at.C + at.h * kHeadDim + c] = total;
  }
}

// store_column_sums of a block of one warp group. Smem: QkvBiasSmem, or another walk's shared memory with the same
// column_sums (V43QkvBiasSmem, the keeper's, v44's).
template <typename Smem>
__device__ inline void store_head_column_sums(const Smem& sm, float* partials, const HeadRows& at) {
  store_column_sums(sm.column_sums, partials, at, static_cast<int>(threadIdx.x));
}

// The walk over the block's heads (Smem: V14Smem, V17Smem where the next rows come early, QkvBiasSmem with
// qkv_bias_sums).
template <WalkPolicy kPolicy, typename Smem>
__device__ __forceinline__ void walk_backward_heads(Smem& sm, const V14Maps& maps, bf16* dqkv, const float* lse,
                                                    const float* bias, const FusedArgs& args) {
  constexpr bool kNextRowsEarly = kPolicy.next_rows_early, kLseAhead = kPolicy.lse_ahead;
  static_assert(!kLseAhead || kV14Threads == kMaxT, "v18: a thread holds one row's lse across the wait");
  static_assert(!kPolicy.q_early || kNextRowsEarly, "v25: q joins the early boxes");
  constexpr bool kOutEarly = kPolicy.out_mid_query;
  static_assert(!kOutEarly || kNextRowsEarly, "v30: out joins the early boxes");
  static_assert(!kPolicy.out_after_dq || kOutEarly, "v31: v30's load, issued elsewhere");
  static_assert(!kPolicy.dq_together || !kOutEarly, "v34: both query halves in one step, each as v26's");
  static_assert(kPolicy.dq_staged_in_ds_t == (kPolicy.dq_together && kPolicy.q_early),
                "v36: q early with both query halves at once, dq staged clear of q's tile");
  static_assert(!kPolicy.key_halves_overlapped || !(kPolicy.rope_l1_prefetch ||
                                                    kPolicy.select_masked != SelectMasked::in_neither_half ||
                                                    kPolicy.dk_factors != FactorFetch::after_product),
                "v35: the key halves as v26's");
  const BackwardHead h{sm.head, sm.dout, sm.ds_t, sm.lse, sm.delta};
  const auto column_sums = head_column_sums<kPolicy.qkv_bias_sums>(sm);
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x), T = args.s.T;
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.full, 1);
    if constexpr (kNextRowsEarly) hw::mbarrier_init(&sm.early, 1);
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  for (int head = static_cast<int>(blockIdx.x), n = 0; head < heads; head += stride, ++n) {
    const HeadRows at = v10_head_rows(head, args.s);
    if (threadIdx.x == 0) {
      if constexpr (kNextRowsEarly) {
        if (n == 0) {
          load_early_boxes<kPolicy.q_early, kOutEarly>(sm, maps, at);
          if constexpr (kOutEarly) load_out_early(sm, maps, at);
        }
        load_late_boxes<kPolicy.q_early, kOutEarly>(sm, maps, at);
      } else {
        load_v14_head(sm, maps, at);
      }
      if (head + stride < heads) {
        if constexpr (kPolicy.l2_prefetch) prefetch_v14_head(maps, v10_head_rows(head + stride, args.s));
        if constexpr (kLseAhead) prefetch_lse(lse, v10_head_rows(head + stride, args.s), args.s.heads);
      }
    }
    HeadPreparationSm90a<kV14Threads> prep;
    prep.load<kPolicy.float4_preparation>(bias, args.rope, at);
    float held_lse = 0.0f;  // v18: this thread's row's, natural units
    if constexpr (kLseAhead) {
      const int row = static_cast<int>(threadIdx.x);
      if (row < at.T) held_lse = lse[at.stats_at(row, args.s.heads)];
    } else {
      load_lse_log2<kV14Threads>(sm.lse, lse, at, args.s.heads);
    }
    hw::mbarrier_wait_or_trap(&sm.full, n & 1);
    if constexpr (kNextRowsEarly) hw::mbarrier_wait_or_trap(&sm.early, n & 1);
    if constexpr (kLseAhead) {
      asm volatile("" : "+f"(held_lse));  // the scaling stays after the wait
      sm.lse[threadIdx.x] = kLog2e * held_lse;  // rows from T on: zero, as load_lse_log2 leaves them
    }
    prepare_backward_head(h, sm.ds_t[0], prep, T);
    __syncthreads();  // every chunk prepared, delta taken: out's tile may take dS^T
    constexpr bool kRopeL1 = kPolicy.rope_l1_prefetch;
    if constexpr (kPolicy.key_halves_overlapped) {
      backward_key_halves_overlapped(h, dqkv, at, args, column_sums);
    } else {
      constexpr KeyPhase kHalf0{.prefetch_factors = kRopeL1, .fetch = kPolicy.dk_factors,
                                .select_masked = kPolicy.select_masked == SelectMasked::in_both_halves};
      constexpr KeyPhase kHalf1{.prefetch_factors = kRopeL1, .fetch = kPolicy.dk_factors,
                                .select_masked = kPolicy.select_masked != SelectMasked::in_neither_half};
      backward_key_rows<kMaxT, kHalf0>(h, dqkv, at, args, 0, 0, column_sums);
      if (T > 64)  // else keys 64 .. are all padding
        backward_key_rows<kMaxT - 64, kHalf1>(h, dqkv, at, args, 1, 0, column_sums);
    }
    if constexpr (kRopeL1)  // dq's factors, both query halves' rows of this warp, ahead of the barrier
      for (int half = 0; half < 2; ++half)
        prefetch_rope_back_factors(args.rope, 64 * half + kRows * (threadIdx.x / 32), T, threadIdx.x % 32);
    if constexpr (kNextRowsEarly) hw::fence_proxy_async_shared();  // v's staging, before TMA writes v again
    __syncthreads();  // every dS^T stored (and fenced); v and dout no longer read
    if constexpr (kNextRowsEarly)
      if (threadIdx.x == 0 && head + stride < heads) {
        const HeadRows next = v10_head_rows(head + stride, args.s);
        load_early_boxes<kPolicy.q_early, kOutEarly>(sm, maps, next);
        if constexpr (kPolicy.late_l2_prefetch) prefetch_late_boxes(maps, next);
      }
    const bool next_out = kOutEarly && head + stride < heads;
    const auto load_next_out = [&] {
      if constexpr (kOutEarly)
        if (threadIdx.x == 0 && next_out) load_out_early(sm, maps, v10_head_rows(head + stride, args.s));
    };
    if constexpr (kPolicy.dq_together) {
      backward_query_halves_together<kPolicy.dq_staged_in_ds_t, kPolicy.dq_factors>(h, dqkv, at, args, column_sums);
    } else if constexpr (kPolicy.out_after_dq) {
      backward_query_rows<64, kPolicy.dq_factors, kPolicy.q_early>(h, dqkv, at, args, 0, load_next_out,
                                                                              column_sums);
    } else {
      backward_query_rows<64, kPolicy.dq_factors, kPolicy.q_early>(h, dqkv, at, args, 0, NothingAfterDq{},
                                                                              column_sums);
      if (next_out) {
        __syncthreads();  // query half 0's products have read dS^T's first tile
        load_next_out();
      }
    }
    if (!kPolicy.dq_together && T > 64)  // else queries 64 .. are all padding, or half 1 has run
      backward_query_rows<kMaxT, kPolicy.dq_factors, kPolicy.q_early>(h, dqkv, at, args, 1,
                                                                                 NothingAfterDq{}, column_sums);
    hw::fence_proxy_async_shared();  // this head's ordinary stores to the tiles, before TMA writes them again
    __syncthreads();                 // the tiles, lse and delta are free
    // The next head's blocks write their slots only after its preparation's barrier.
    if constexpr (kPolicy.qkv_bias_sums) store_head_column_sums(sm, args.column_partials, at);
  }
}

// v32: v26's walk with each head's q loaded a head ahead, into a tile of its own (the forward's q_ahead, v29):
// a head's preparation reads its q from that tile and writes it, prepared, into the head's, and the next head's
// q is loaded as soon as that has been read, so only k and out wait for the head's end. The tile's 16 KB fit
// beside two blocks an SM because causal attention leaves half of dS^T's first tile unused (queries 0 .. 63
// see keys 0 .. 63 alone): the head's lse, delta and barriers live there, and out lands in dS^T's second tile,
// which query half 1 is the last to read.
struct V32Smem {
  HeadTiles head;
  unsigned char dout[kHeadTileBytes];
  unsigned char ds_t[2][kHeadTileBytes];  // dS^T; out's tile lands in the second until delta is taken
  unsigned char next_q[kHeadTileBytes];
};
// In dS^T's first tile, from row 64 on: so v32's walk stages no dq there (backward_query_halves_together's
// kStageInDsT, v36's, would overwrite them).
struct V32Figures {
  float lse[kMaxT], delta[kMaxT];  // lse in log2 units
  std::uint64_t full, early, q_loaded;  // k's and out's boxes; v's and dout's; q's
};
constexpr std::size_t kV32SmemBytes = sizeof(V32Smem) + kAtomBytes;  // room to align the start
static_assert(sizeof(V32Figures) <= kHeadTileBytes / 2, "the figures fit the rows dS^T's first tile leaves unused");
static_assert(kV14BlocksPerSm * (kV32SmemBytes + 1024) <= 228 * 1024, "two v32 blocks an SM");
__device__ inline V32Figures& v32_figures(V32Smem& sm) {
  return *reinterpret_cast<V32Figures*>(sm.ds_t[0] + kHeadTileBytes / 2);
}

// v32: the head `at`'s k and out (into dS^T's second tile) on `bar`. One thread.
__device__ inline void load_k_and_out(V32Smem& sm, const V14Maps& maps, std::uint64_t* bar, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::mbarrier_arrive_expect_tx(bar, 2 * kHeadTileBytes);
  hw::tma_load_2d(sm.head.k, maps.qkv, bar, row, at.C + col);
  hw::tma_load_2d(sm.ds_t[1], maps.out, bar, row, col);
}

// v32: the head `at`'s v and dout on `bar`. One thread.
__device__ inline void load_v_and_dout(V32Smem& sm, const V14Maps& maps, std::uint64_t* bar, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::mbarrier_arrive_expect_tx(bar, 2 * kHeadTileBytes);
  hw::tma_load_2d(sm.head.v, maps.qkv, bar, row, 2 * at.C + col);
  hw::tma_load_2d(sm.dout, maps.dout, bar, row, col);
}

// v32: the head `at`'s q into next_q on `bar`. One thread.
__device__ inline void load_next_q(V32Smem& sm, const V14Maps& maps, std::uint64_t* bar, const HeadRows& at) {
  hw::mbarrier_arrive_expect_tx(bar, kHeadTileBytes);
  hw::tma_load_2d(sm.next_q, maps.qkv, bar, at.b * at.T, at.h * kHeadDim);
}

// v32's walk over the block's heads: v26's steps (walk_backward_heads with kV26Walk) and loads, q a head ahead;
// kDqTogether (v33): both query halves' dq products issued at once (backward_query_halves_together).
template <bool kDqTogether = false>
__device__ __forceinline__ void walk_backward_heads_q_ahead(V32Smem& sm, const V14Maps& maps, bf16* dqkv,
                                                            const float* lse, const float* bias,
                                                            const FusedArgs& args) {
  static_assert(kV14Threads == kMaxT, "a thread holds one row's lse across the waits");
  V32Figures& figures = v32_figures(sm);
  const BackwardHead h{sm.head, sm.dout, sm.ds_t, figures.lse, figures.delta};
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x), T = args.s.T;
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&figures.full, 1);
    hw::mbarrier_init(&figures.early, 1);
    hw::mbarrier_init(&figures.q_loaded, 1);
    hw::mbarrier_init_fence();
    if (static_cast<int>(blockIdx.x) < heads) {  // the first head's early boxes and q
      const HeadRows first = v10_head_rows(static_cast<int>(blockIdx.x), args.s);
      load_v_and_dout(sm, maps, &figures.early, first);
      load_next_q(sm, maps, &figures.q_loaded, first);
    }
  }
  __syncthreads();
  for (int head = static_cast<int>(blockIdx.x), n = 0; head < heads; head += stride, ++n) {
    const HeadRows at = v10_head_rows(head, args.s);
    const bool has_next = head + stride < heads;
    if (threadIdx.x == 0) {
      load_k_and_out(sm, maps, &figures.full, at);
      if (has_next) prefetch_lse(lse, v10_head_rows(head + stride, args.s), args.s.heads);
    }
    HeadPreparationSm90a<kV14Threads> prep;
    prep.load<true>(bias, args.rope, at);
    const int row = static_cast<int>(threadIdx.x);
    const float held_lse = row < at.T ? lse[at.stats_at(row, args.s.heads)] : 0.0f;  // natural units
    hw::mbarrier_wait_or_trap(&figures.full, n & 1);
    hw::mbarrier_wait_or_trap(&figures.early, n & 1);
    hw::mbarrier_wait_or_trap(&figures.q_loaded, n & 1);
    float scaled = held_lse;
    asm volatile("" : "+f"(scaled));  // the scaling stays after the waits (v18's lse_ahead)
    figures.lse[threadIdx.x] = kLog2e * scaled;  // rows from T on: zero
    prepare_backward_head(h, sm.ds_t[1], prep, T, sm.next_q);
    __syncthreads();  // every chunk prepared (and fenced), delta taken, next_q read: q's next box may land
    if (threadIdx.x == 0 && has_next) load_next_q(sm, maps, &figures.q_loaded, v10_head_rows(head + stride, args.s));
    backward_key_rows<kMaxT>(h, dqkv, at, args, 0, 0);
    if (T > 64)  // else keys 64 .. are all padding
      backward_key_rows<kMaxT - 64>(h, dqkv, at, args, 1, 0);
    hw::fence_proxy_async_shared();  // v's staging, before TMA writes v again
    __syncthreads();                 // every dS^T stored (and fenced); v and dout no longer read
    if (threadIdx.x == 0 && has_next) load_v_and_dout(sm, maps, &figures.early, v10_head_rows(head + stride, args.s));
    if constexpr (kDqTogether) {
      backward_query_halves_together(h, dqkv, at, args);
    } else {
      backward_query_rows<64>(h, dqkv, at, args, 0);
      if (T > 64)  // else queries 64 .. are all padding
        backward_query_rows<kMaxT>(h, dqkv, at, args, 1);
    }
    hw::fence_proxy_async_shared();  // this head's ordinary stores to the tiles, before TMA writes them again
    __syncthreads();                 // k, dS^T's second tile, lse and delta are free
  }
}

// A walk's kernel (the lab's versions', the keeper's, with or without qkv's bias sums): its tensor maps, dqkv, lse,
// qkv's bias and the arguments.
using BackwardWalkKernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, bf16*, const float*, const float*,
                                    FusedArgs);

// A walk kernel's host side: its name in messages ("v17's backward"), the name of the configure its callers export, its
// shared memory, whether it writes dqkv's column partials (qkv_bias_sums), whether it reads the RoPE table's
// lane-ordered copy (a walk with under_product_lane_ordered factors), whether its third map is qkv's in boxes of half a
// head's rows instead of out's (a walk that reads no out and loads a head in two parts, the lab's v45 and v47), its
// threads a block (one warp group, or the lab's v49's two) and its persistent grid (as many blocks as fit at once; 0
// until configure).
struct BackwardWalk {
  const char* version;
  const char* configure_name;
  BackwardWalkKernel kernel;
  std::size_t smem_bytes;
  bool column_partials = false;
  bool lane_ordered_rope = false;
  bool qkv_half_boxes = false;
  int threads = kV14Threads;
  int grid = 0;

  // Two blocks of about 98 KB (v32's and v33's 113 KB; v49's one of 212 KB) need the carveout that gives an SM the
  // most shared memory.
  void configure() { grid = configure_shared_sm90a(version, kernel, threads, smem_bytes); }

  // The kernel on `stream` over every head, at most `grid` blocks; partials [batch][3C] where it writes them.
  void launch(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
              const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream,
              float* partials = nullptr) const {
    if (grid == 0) throw Error(std::string("gpt: attention ") + version + " runs after " + configure_name + "()");
    if (column_partials && partials == nullptr)
      throw Error(std::string("gpt: attention ") + version + " writes column partials and was given none");
    if (lane_ordered_rope) {
      if (rope.lane_ordered == nullptr)
        throw Error(std::string("gpt: attention ") + version +
                    " reads the RoPE table's lane-ordered copy and was given none (RopeTable::lane_ordered)");
      check_aligned16(rope.lane_ordered, version, "RoPE lane-ordered");
    }
    FusedArgs args = fused_args(s, rope);
    args.column_partials = partials;
    const BackwardTensorMaps maps =
        backward_tensor_maps(version, dqkv, dout, out, qkv, qkv_bias, rope, s, qkv_half_boxes);
    kernel<<<std::min(s.batch * s.heads, grid), threads, smem_bytes, stream>>>(maps.qkv, maps.dout, maps.out, dqkv,
                                                                                lse, qkv_bias, args);
    ROOFBENCH_CUDA_LAUNCH();
  }

  // A walk with qkv's bias sums (column_partials), then column_finish of its partials into dbias [3C].
  void launch_with_bias_gradient(bf16* dqkv, float* dbias, float* partials, const bf16* dout, const bf16* out,
                                 const float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                 const AttentionShape& s, cudaStream_t stream) const {
    launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream, partials);
    const int cols = 3 * s.channels();
    column_finish(ColumnOutputs{{dbias}, cols}, partials, s.batch, cols, stream);
  }
};

// Whether a walk reads the RoPE table's lane-ordered copy (a phase with under_product_lane_ordered factors).
constexpr bool reads_lane_ordered_rope(WalkPolicy p) {
  return p.dk_factors == FactorFetch::under_product_lane_ordered ||
         p.dq_factors == FactorFetch::under_product_lane_ordered;
}

// The host side of a walk_backward_heads<kPolicy> kernel, its column partials and lane-ordered table as the policy
// says.
template <WalkPolicy kPolicy>
BackwardWalk policy_walk(const char* version, const char* configure_name, BackwardWalkKernel kernel,
                         std::size_t smem_bytes) {
  return BackwardWalk{version, configure_name, kernel, smem_bytes, kPolicy.qkv_bias_sums,
                      reads_lane_ordered_rope(kPolicy)};
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
