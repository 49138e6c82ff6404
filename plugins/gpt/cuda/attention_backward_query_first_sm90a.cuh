// The sm_90a backward walk that takes each row's delta from its scores instead of from out, so out is never read: the
// bf16 keeper's backward (v44's, attention_v44.cu) and the lab's v43 and v45 to v48 (lab/attention_v43.cu), a block of
// one warp group walking its own heads (persistent: blockIdx.x, then + gridDim.x, ...) on
// attention_backward_sm90a.cuh's key phase and attention_backward_walk_sm90a.cuh's loads, preparation and launch.
//   - The query phase runs first. For each query half (queries 64 h .. 64 h + 63 against keys 0 .. 64 h + 63, the
//     queries as the accumulators' rows): S = q k^T and dP = dout v^T, P = exp2(scale log2(e) S - lse) under the
//     causal and T masks, delta = rowsum(P dP), dS = P (dP - delta), then dq = dS k with dS from the registers,
//     staged in a tile of its own. A row's keys all lie in the block, so rowsum(P dP) is dout . (P v), out's row
//     before its rounding to bf16: delta without out.
//   - The key phase then runs as v38's on that delta (dk's RoPE factors from the lane-ordered table under the
//     products), storing no dS^T: no product reads it. v44's and v45's (V44KeyPhase): its masked exponents dropped
//     by a select, as v39's; v46's and v47's also with a branch on whether a chunk is masked (V46KeyPhase), v48's
//     with that branch in key half 1 alone (V48KeyPhase).
//   - Loads: a head's q, k and v at the end of the head before (v45 and v47: in two parts, the walk below); its dout
//     a whole head ahead, into the other of two dout tiles, which alternate (both phases read dout, so no tile frees
//     earlier).
// The price against v38's walk: S and dP computed twice (21 products a head instead of 15) and the exponents twice;
// out's 16 KB box a head (of the backward's 128 KB) is saved. The arithmetic differs from v38's (delta in fp32 from
// P dP, not from the bf16 out): the same values within bf16's rounding, not the same bits.
// Budget: shared memory q, k, v 48 KB, two dout tiles 32 KB, dq's stage 16 KB, lse and delta 1 KB and three
// barriers (v45 four), 98 KB with the alignment's spare (104 KB with qkv's bias sums): two blocks an SM, 128 threads
// a block.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

struct V43Smem {
  HeadTiles head;
  unsigned char dout[2][kHeadTileBytes];  // the block's n-th head's in dout[n % 2]
  unsigned char dq_stage[kHeadTileBytes];
  float lse[kMaxT], delta[kMaxT];  // lse in log2 units
  std::uint64_t qkv_landed, dout_landed[2];
};

// With qkv_bias_sums (v44's, for the trainers' kernel): v43's, and the column sums of the head's dq, dk and dv, a slot
// for each warp's 16-row block, as QkvBiasSmem's.
struct V43QkvBiasSmem : V43Smem {
  alignas(16) float column_sums[3][kRowBlocks][kHeadDim];  // BlockColumnSums stores 16 bytes a lane
};

// The lab's v45: v43's, with the rows 64 .. 127 of q, k and v landing on a barrier of their own (rows 0 .. 63 on
// qkv_landed), so that a head's query half 0 starts once its first rows have landed.
struct V45Smem : V43Smem {
  std::uint64_t upper_rows_landed;
};

// With qkv_bias_sums (v45's): v45's, and the column sums as V43QkvBiasSmem's.
struct V45QkvBiasSmem : V45Smem {
  alignas(16) float column_sums[3][kRowBlocks][kHeadDim];  // BlockColumnSums stores 16 bytes a lane
};

// The preparation's passes over rows 0 .. 63: PreparedChunks::row gives pass `it` rows 16 it .. 16 it + 15, so the
// first half of the passes covers the first half of the rows and nothing else.
constexpr int kHalfHeadPasses = PreparedChunks<kV14Threads>::kPerThread / 2;
static_assert(PreparedChunks<kV14Threads>::kRowsPerPass * kHalfHeadPasses == kMaxT / 2);

// Rows 64 half .. 64 half + 63 of the head `at`'s q, k and v into the same rows of `tiles`, on `bar`, from qkv's map
// in half-head boxes (BackwardWalk::qkv_half_boxes). One thread.
__device__ inline void load_head_half(HeadTiles& tiles, const CUtensorMap* half_box_map, std::uint64_t* bar,
                                      const HeadRows& at, int half) {
  const int row = at.b * at.T + kMaxT / 2 * half, col = at.h * kHeadDim;
  const std::uint32_t offset = half * kHeadTileBytes / 2;  // a whole number of the swizzle's 1024-byte atoms
  hw::mbarrier_arrive_expect_tx(bar, 3 * kHeadTileBytes / 2);
  hw::tma_load_2d(tiles.q + offset, half_box_map, bar, row, col);
  hw::tma_load_2d(tiles.k + offset, half_box_map, bar, row, at.C + col);
  hw::tma_load_2d(tiles.v + offset, half_box_map, bar, row, 2 * at.C + col);
}

// The head `at`'s dout into dout[slot] on dout_landed[slot]. One thread.
__device__ inline void load_v43_dout(V43Smem& sm, const V14Maps& maps, int slot, const HeadRows& at) {
  hw::mbarrier_arrive_expect_tx(&sm.dout_landed[slot], kHeadTileBytes);
  hw::tma_load_2d(sm.dout[slot], maps.dout, &sm.dout_landed[slot], at.b * at.T, at.h * kHeadDim);
}

// A query half's S and dP accumulators, in a key half's form: queries 64 half + 16 warp + lane / 4 (+ 8), keys
// 8 n + 2 (lane % 4) (+ 1); S becomes P and dP becomes dS in place.
template <int kKeys>
using QueryHalfScores = KeyHalfScores<kKeys>;

// S = q k^T and dP = dout v^T of query half `half` against keys 0 .. kKeys - 1 (all four operands K-major, as TMA
// wrote them), issued as one commit group and waited for.
template <int kKeys>
__device__ __forceinline__ void query_scores(const BackwardHead& h, int half, QueryHalfScores<kKeys>& x) {
  const std::uint32_t q_rows = 64 * half * kSwizzleRow;
  float(&s)[kKeys / 2] = reinterpret_cast<float(&)[kKeys / 2]>(x.s);
  float(&dp)[kKeys / 2] = reinterpret_cast<float(&)[kKeys / 2]>(x.dp);
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
    hw::wgmma_bf16_ss(s, hw::descriptor_k_major_sw128(h.head.q + q_rows, ks),
                      hw::descriptor_k_major_sw128(h.head.k, ks), ks > 0 ? 1u : 0u);
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
    hw::wgmma_bf16_ss(dp, hw::descriptor_k_major_sw128(h.dout + q_rows, ks),
                      hw::descriptor_k_major_sw128(h.head.v, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(s);
  hw::fence_accumulators(dp);
}

// The element-wise step of this warp's 16 queries from q0: P = exp2(score_scale S - lse) where key <= query < T
// (computed for every pair, the masked ones dropped by a select, as v39's), delta = rowsum(P dP) (a row's pairs lie
// in the lanes of one quad) to delta[query], and dS = P (dP - delta) in place.
template <int kKeys>
__device__ __forceinline__ void query_probabilities_and_ds(QueryHalfScores<kKeys>& x, const float* lse, float* delta,
                                                           int q0, float score_scale, int T, int lane) {
#pragma unroll
  for (int row_half = 0; row_half < 2; ++row_half) {
    const int query = q0 + lane / 4 + 8 * row_half;
    const float row_lse = lse[query];  // zero from T on
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = 8 * n + 2 * (lane % 4) + e;
        float& s = x.s[n][2 * row_half + e];
        const float p = exp2_of<Exponent::log2_approx>(score_scale * s - row_lse);
        s = key <= query && query < T ? p : 0.0f;
        sum += s * x.dp[n][2 * row_half + e];
      }
    sum += __shfl_xor_sync(kFullWarp, sum, 1);
    sum += __shfl_xor_sync(kFullWarp, sum, 2);
    if (lane % 4 == 0) delta[query] = sum;  // zero from T on: every P of the row is
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& ds = x.dp[n][2 * row_half + e];
        ds = x.s[n][2 * row_half + e] * (ds - sum);
      }
  }
}

// Query half `half` against keys 0 .. kKeys - 1 (kKeys = 64 (half + 1)): its scores, P, delta and dS, then dq = dS k
// from the registers (k read MN-major), its RoPE factors fetched from the lane-ordered table under the product, and
// dq (times scale, rotated back) to dqkv through `stage`, and to column_sums' dq slots (HeadColumnSums) where given.
// `stage` holds kStageRows rows: a whole head's (query q in row q), or a query half's (kMaxT / 2: query q in row
// q % 64; each warp stages its own 16 rows, the same ones in both halves).
template <int kKeys, typename HeadSums, int kStageRows = kMaxT>
__device__ __forceinline__ void backward_query_half_first(const BackwardHead& h, unsigned char* stage, bf16* dqkv,
                                                          const HeadRows& at, const FusedArgs& args, int half,
                                                          HeadSums column_sums) {
  static_assert(kStageRows == kMaxT || kStageRows == kMaxT / 2);
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, q0 = 64 * half + kRows * warp;
  QueryHalfScores<kKeys> x;
  query_scores(h, half, x);
  query_probabilities_and_ds(x, h.lse, h.delta, q0, args.scale * kLog2e, args.s.T, lane);
  unsigned dsa[kKeys / 16][4];
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks) accumulators_as_a(dsa[ks], x.dp, ks);
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(dsa[ks][e])::"memory");  // made before the fence
  float dq[kHeadDim / 2];
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks) hw::wgmma_bf16_rs<1>(dq, dsa[ks], mn_major(h.head.k, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  RopeBackFactors factors;
  factors.load<true>(args.rope, q0, args.s.T, lane);
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(dq);
  store_rotated_block(dqkv, SwizzledStage{stage, q0 % kStageRows}, dq, args, q0, lane,
                      [&](int t) { return at.qkv_at(t, 0); }, column_sums.block(0, q0), &factors);
}

// The walk's key phases, as types (a kernel template's arguments): v43's (dk's RoPE factors fetched under the products
// from the table's lane-ordered copy, no dS^T stored); v44's and v45's, v43's with the masked exponents dropped by a
// select; v46's and v47's, v44's with a branch on whether a chunk is masked; v48's, that branch in key half 1 alone.
struct V43KeyPhase {
  static constexpr KeyPhase kValue{.fetch = FactorFetch::under_product_lane_ordered, .store_ds_t = false};
};
struct V44KeyPhase {
  static constexpr KeyPhase kValue{
      .fetch = FactorFetch::under_product_lane_ordered, .select_masked = true, .store_ds_t = false};
};
struct V46KeyPhase {
  static constexpr KeyPhase kValue{.fetch = FactorFetch::under_product_lane_ordered,
                                   .select_masked = true,
                                   .store_ds_t = false,
                                   .branch_on_masked = KeyHalves::both};
};
struct V48KeyPhase {
  static constexpr KeyPhase kValue{.fetch = FactorFetch::under_product_lane_ordered,
                                   .select_masked = true,
                                   .store_ds_t = false,
                                   .branch_on_masked = KeyHalves::half_1};
};

// Nothing to do between a head's halves (backward_head_query_first's default).
struct NothingBetweenHalves {
  __device__ void operator()() const {}
};

// A head's steps once its preparation has met (kSplit: its rows 0 .. 63): both query halves, dq staged in `dq_stage`
// (kStageRows rows, backward_query_half_first's), then, once the warp group has met on `sync` (every row's delta
// taken), both key halves on warp group `group`'s barrier. between_query_halves and between_key_halves run in every
// thread of the group between the halves (the lab's v45: its rows 64 .. 127 land and are prepared, then the next
// head's rows 0 .. 63 are loaded).
template <KeyPhase kKeyPhase, int kStageRows = kMaxT, typename HeadSums, typename Sync,
          typename BetweenQueryHalves = NothingBetweenHalves, typename BetweenKeyHalves = NothingBetweenHalves>
__device__ __forceinline__ void backward_head_query_first(const BackwardHead& h, unsigned char* dq_stage, bf16* dqkv,
                                                          const HeadRows& at, const FusedArgs& args, int group,
                                                          HeadSums column_sums, Sync sync,
                                                          BetweenQueryHalves between_query_halves = {},
                                                          BetweenKeyHalves between_key_halves = {}) {
  const int T = args.s.T;
  backward_query_half_first<64, HeadSums, kStageRows>(h, dq_stage, dqkv, at, args, 0, column_sums);
  between_query_halves();
  if (T > 64)  // else queries 64 .. are all padding
    backward_query_half_first<kMaxT, HeadSums, kStageRows>(h, dq_stage, dqkv, at, args, 1, column_sums);
  sync();  // every row's delta taken
  backward_key_rows<kMaxT, kKeyPhase>(h, dqkv, at, args, 0, group, column_sums);
  between_key_halves();
  if (T > 64)  // else keys 64 .. are all padding
    backward_key_rows<kMaxT - 64, kKeyPhase>(h, dqkv, at, args, 1, group, column_sums);
}

// v43's walk over the block's heads (persistent, as walk_backward_heads): the query phase, then v38's key phase on its
// delta, as kKeyPhase chooses. Smem V43QkvBiasSmem: dqkv's column sums as stored, written to args.column_partials after
// each head (the walks' qkv_bias_sums). Smem V45Smem or V45QkvBiasSmem (v45 and v47, without and with the sums): a
// head's q, k and v land in two parts, rows 0 .. 63 (all that query half 0 reads) loaded as soon as key half 0 has
// ended (key half 1 reads rows 64 .. alone) and rows 64 .. 127 at the head's end, from maps.out, which is then qkv's
// map in half-head boxes; the head prepares its rows 64 .. once query half 0 has run.
template <typename Smem>
constexpr bool kQueryFirstSums = std::is_same_v<Smem, V43QkvBiasSmem> || std::is_same_v<Smem, V45QkvBiasSmem>;
template <typename Smem>
constexpr bool kQueryFirstSplit = std::is_base_of_v<V45Smem, Smem>;

template <KeyPhase kKeyPhase, typename Smem = V43Smem>
__device__ __forceinline__ void walk_backward_heads_query_first(Smem& sm, const V14Maps& maps, bf16* dqkv,
                                                                const float* lse, const float* bias,
                                                                const FusedArgs& args) {
  constexpr bool kSums = kQueryFirstSums<Smem>;
  constexpr bool kSplit = kQueryFirstSplit<Smem>;
  const auto column_sums = head_column_sums<kSums>(sm);
  static_assert(kV14Threads == kMaxT, "a thread holds one row's lse across the waits");
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x), T = args.s.T;
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.qkv_landed, 1);
    hw::mbarrier_init(&sm.dout_landed[0], 1);
    hw::mbarrier_init(&sm.dout_landed[1], 1);
    if constexpr (kSplit) hw::mbarrier_init(&sm.upper_rows_landed, 1);
    hw::mbarrier_init_fence();
    if (static_cast<int>(blockIdx.x) < heads) {
      const HeadRows first = v10_head_rows(static_cast<int>(blockIdx.x), args.s);
      if constexpr (kSplit) {  // dout before the rows query half 0 does not read
        load_head_half(sm.head, maps.out, &sm.qkv_landed, first, 0);
        load_v43_dout(sm, maps, 0, first);
        load_head_half(sm.head, maps.out, &sm.upper_rows_landed, first, 1);
      } else {
        load_head(sm.head, maps.qkv, &sm.qkv_landed, first);
        load_v43_dout(sm, maps, 0, first);
      }
    }
  }
  __syncthreads();
  for (int head = static_cast<int>(blockIdx.x), n = 0; head < heads; head += stride, ++n) {
    const HeadRows at = v10_head_rows(head, args.s);
    const bool has_next = head + stride < heads;
    if (threadIdx.x == 0 && has_next) {  // into the tile the head before read
      const HeadRows next = v10_head_rows(head + stride, args.s);
      load_v43_dout(sm, maps, (n + 1) % 2, next);
      prefetch_lse(lse, next, args.s.heads);
    }
    HeadPreparationSm90a<kV14Threads> prep;
    prep.load<true>(bias, args.rope, at);
    const int row = static_cast<int>(threadIdx.x);
    float held_lse = row < T ? lse[at.stats_at(row, args.s.heads)] : 0.0f;  // natural units
    hw::mbarrier_wait_or_trap(&sm.qkv_landed, n & 1);
    hw::mbarrier_wait_or_trap(&sm.dout_landed[n % 2], (n / 2) & 1);
    asm volatile("" : "+f"(held_lse));  // the scaling stays after the waits
    sm.lse[row] = kLog2e * held_lse;
    if (T <= 64 && row >= 64) sm.delta[row] = 0.0f;  // query half 1 does not run; the key phase reads them
    const BackwardHead h{sm.head, sm.dout[n % 2], nullptr, sm.lse, sm.delta};
    if constexpr (kSplit)
      prepare_backward_head<kV14Threads, false, 0, kHalfHeadPasses>(h, nullptr, prep, T);
    else
      prepare_backward_head<kV14Threads, false>(h, nullptr, prep, T);
    __syncthreads();  // every chunk prepared (kSplit: of rows 0 .. 63), every lse stored
    const auto sync = [] { __syncthreads(); };
    if constexpr (kSplit) {
      const auto upper_rows = [&] {
        hw::mbarrier_wait_or_trap(&sm.upper_rows_landed, n & 1);
        prepare_backward_head<kV14Threads, false, kHalfHeadPasses>(h, nullptr, prep, T);
        __syncthreads();  // rows 64 .. prepared
      };
      const auto next_lower_rows = [&] {
        hw::fence_proxy_async_shared();  // key half 0's ordinary stores to v's rows 0 .. 63 (its staging)
        __syncthreads();                 // rows 0 .. 63 of q, k and v are free: key half 1 reads rows 64 .. alone
        if (threadIdx.x == 0 && has_next)
          load_head_half(sm.head, maps.out, &sm.qkv_landed, v10_head_rows(head + stride, args.s), 0);
      };
      backward_head_query_first<kKeyPhase>(h, sm.dq_stage, dqkv, at, args, 0, column_sums, sync, upper_rows,
                                           next_lower_rows);
    } else {
      backward_head_query_first<kKeyPhase>(h, sm.dq_stage, dqkv, at, args, 0, column_sums, sync);
    }
    hw::fence_proxy_async_shared();  // this head's ordinary stores to the tiles, before TMA writes them again
    __syncthreads();                 // q, k, v, this dout, lse and delta are free
    if (threadIdx.x == 0 && has_next) {
      const HeadRows next = v10_head_rows(head + stride, args.s);
      if constexpr (kSplit)
        load_head_half(sm.head, maps.out, &sm.upper_rows_landed, next, 1);
      else
        load_head(sm.head, maps.qkv, &sm.qkv_landed, next);
    }
    // The next head's blocks write their slots only after its preparation's barrier.
    if constexpr (kSums) store_head_column_sums(sm, args.column_partials, at);
  }
}

// The walk as a kernel: the lab's versions' (the keeper's kernels are named, attention_v44.cu). The third map is out's,
// or qkv's in half-head boxes where Smem is V45Smem's.
template <typename Keys, typename Smem>
__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    query_first_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                const __grid_constant__ CUtensorMap dout_map,
                                const __grid_constant__ CUtensorMap third_map, bf16* dqkv, const float* lse,
                                const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads_query_first<Keys::kValue>(aligned_smem<Smem>(raw), V14Maps{&qkv_map, &dout_map, &third_map},
                                                dqkv, lse, bias, args);
}

// The host side of a kernel running the walk on Smem with Keys' key phase: what it needs follows from them (its shared
// memory, whether it writes column partials, whether its third map is qkv's in half-head boxes); every query-first
// walk reads the RoPE table's lane-ordered copy (dq's factors and the key phase's).
template <typename Keys, typename Smem>
BackwardWalk query_first_walk(const char* version, const char* configure_name,
                              BackwardWalkKernel kernel = query_first_backward_kernel<Keys, Smem>) {
  static_assert(Keys::kValue.fetch == FactorFetch::under_product_lane_ordered);
  constexpr std::size_t kSmemBytes = sizeof(Smem) + kAtomBytes;  // room to align the start
  static_assert(kV14BlocksPerSm * (kSmemBytes + 1024) <= 228 * 1024, "two blocks an SM");
  return BackwardWalk{.version = version,
                      .configure_name = configure_name,
                      .kernel = kernel,
                      .smem_bytes = kSmemBytes,
                      .column_partials = kQueryFirstSums<Smem>,
                      .lane_ordered_rope = true,
                      .qkv_half_boxes = kQueryFirstSplit<Smem>};
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
