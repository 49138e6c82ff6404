// The sm_90a attention backward's steps on one head in shared memory (TMA boxes in the 128-byte swizzle, wgmma),
// shared by the bf16 keeper's sm_90a backward (v44's, attention_v44.cu, on attention_backward_query_first_sm90a.cuh's
// walk: a whole head in one warp group, two heads an SM) and the lab's (v12, lab/attention_v12.cu, a head split
// between two warp groups). Each step is run by one warp group, whichever it is; the kernels decide which group runs
// which half of a head, and meet at their barriers.
//   - prepare_backward_head: q, k, v prepared in place (v10's preparation: v9's operands, rows from T on zero),
//     dout's rows from T on zeroed, delta = rowsum(dout * out) as v9 takes it (chunk_row_dot; not by the keeper's
//     v44 and the lab's v43, which take delta from their scores);
//   - backward_key_rows, key half h (keys 64 h .. 64 h + 63) against the queries 64 h .. 127 (causal: no
//     earlier query sees them), keys as the accumulators' rows: S^T = k q^T and dP^T = v dout^T (both operands
//     K-major, as TMA wrote them), then v9's element-wise step (probabilities_and_ds: P^T = exp2(scale log2(e)
//     S^T - lse), dS^T = P^T (dP^T - delta), the causal and T masks, ex2.approx), dS^T rounded to bf16 into
//     shared memory for dq, then from registers (the accumulators are, element for element, the A fragments)
//     dv = P^T dout and dk = dS^T q, dout and q read MN-major (imm-trans-b 1: the rows TMA wrote, no transposed
//     copy); dv and dk staged in the half's own v rows (read by its own dP^T alone). Its three steps are functions
//     of their own (issue_key_scores, key_gradients, store_key_gradients), so that backward_key_halves_overlapped
//     (the lab's v35) can issue key half 1's scores before key half 0's gradients are stored;
//   - backward_query_rows, query half h (queries 64 h .. 64 h + 63) against keys 0 .. 64 h + 63, once every
//     dS^T is stored: dq = dS k, dS^T and k both read MN-major (imm-trans-a 1, imm-trans-b 1), staged in the
//     half's q rows (no product reads q after the key phase), or stored from the registers (kDirect, the lab's
//     v25); backward_query_halves_together (the lab's from v33) issues both halves' products before it stores
//     either.
// backward_key_halves_overlapped and backward_query_halves_together serve kernels whose block is one warp group
// (group 0), as the lab's from v32 are.
// dS^T is kept [key][query] in two 128-byte swizzled tiles of 64 queries each, written from the packed dS^T
// fragments (a warp's eight rows of one 16-byte column land in eight different chunks: no bank conflicts). The
// gradients leave as v9's do (store_head_block_staged: times scale, rotated back, 128-byte rows). The
// arithmetic is v9's (its operands, element-wise step and roundings), the products summed in the tensor cores'
// order: dqkv agrees with v9's to bf16's rounding, and every kernel built from these steps gives the same bits.
// Registers, the larger key half (128 queries): S^T and dP^T accumulators 64 + 64 fp32, then the P^T and dS^T
// fragments 32 + 32 and the dv and dk accumulators 32 + 32, 128 live either way plus addresses and indices (v35
// keeps key half 1's 64 score accumulators beside key half 0's dv and dk as those are stored).
// Included by sm_90a translation units alone, after attention_sm90a.cuh's namespace.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "attention_sm90a.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

// The descriptor of a 64-wide MN-major operand (head dim 64, or a warp group's 64 rows): its leading offset,
// between 64-element blocks, is never read.
__device__ __forceinline__ std::uint64_t mn_major(const void* tile, int ks) {
  return hw::descriptor_mn_major_sw128(tile, ks, hw::kSingleMnBlock);
}

// One head's rows in shared memory as the backward's steps read them, and its per-row figures.
struct BackwardHead {
  HeadTiles& head;                          // q, k, v: prepared in place
  unsigned char* dout;                      // raw, rows from T on zeroed
  unsigned char (*ds_t)[kHeadTileBytes];    // dS^T [key][query], queries 64 t .. in tile t (two tiles)
  float* lse;                               // log2 units
  float* delta;
};

// The 128 threads of warp group `group` meet (named barrier 1 + group; __syncthreads is barrier 0).
__device__ inline void warp_group_sync(int group) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + group) : "memory");
}

// threadIdx.x as the compiler sees it anew at each call. The key phase derives dozens of shared-memory
// offsets from it (dS^T's stores, the staging); in a persistent loop they are the same for every head, and
// hoisted out of it their registers push the kernel to 255 and 320 bytes of spills (ptxas -v).
__device__ inline int thread_index_anew() {
  unsigned tid = threadIdx.x;
  asm volatile("" : "+r"(tid));
  return static_cast<int>(tid);
}

// Where a warp stages a finished 16 x 64 block for store_head_block_staged: rows row0 .. row0 + 15 of a
// 128-byte swizzled tile that only this warp still uses (row0 a multiple of 8: the rows keep their swizzle).
struct SwizzledStage {
  unsigned char* tile;
  int row0;
  __device__ bf16* at(int r, int c) const {
    return reinterpret_cast<bf16*>(tile + swizzled(row0 + r, c / kChunk) + 2 * (c % kChunk));
  }
};

// A warp's 16 rows of an m64n64 accumulator as store_head_block_staged takes them (the m16n8 layout per tile).
__device__ inline const float (&as_tiles(const float (&d)[kHeadDim / 2]))[kHeadDim / 8][4] {
  return reinterpret_cast<const float(&)[kHeadDim / 8][4]>(d);
}

// The head's gradients' column sums: none (the steps' default), or, for qkv's bias gradient (qkv_bias_sums),
// each 16-row block's sums of dq, dk and dv (parts 0, 1, 2) as stored, into shared memory [part][row block][column].
struct NoHeadColumnSums {
  __device__ NoColumnSums block(int, int) const { return {}; }
};
struct HeadColumnSums {
  float (*slots)[kRowBlocks][kHeadDim];
  __device__ BlockColumnSums block(int part, int row0) const { return {slots[part][row0 / kRows]}; }
};

// A walk's column sums: into sm.column_sums where kOn (qkv_bias_sums), else none.
template <bool kOn, typename Smem>
__device__ __forceinline__ auto head_column_sums(Smem& sm) {
  if constexpr (kOn)
    return HeadColumnSums{sm.column_sums};
  else
    return NoHeadColumnSums{};
}

// Queries qc .. qc + 31 of a key block's accumulators: n8 tiles 4 c .. 4 c + 3.
template <int kTiles>
__device__ inline float (&query_chunk(float (&x)[kTiles][4], int c))[kQueryChunk / 8][4] {
  return reinterpret_cast<float(&)[kQueryChunk / 8][4]>(x[kQueryChunk / 8 * c]);
}

// The head landed: q, k, v prepared in place, dout's rows from T on zeroed, delta of every row (zero from T on) from
// dout and `out` (a tile of the head's out as TMA wrote it) unless kTakeDelta is false (the keeper's v44 and the lab's
// v43, which take delta from the scores; out is then unread). q's raw rows are read from `raw_q` where given (a tile of
// its own, the lab's v32), else from the head's q tile. kFirstPass, kEndPass: the preparation's passes alone
// (HeadPreparationSm90a::apply_from's), for a head that lands in two parts (the lab's v45).
template <int kThreads, bool kTakeDelta = true, int kFirstPass = 0, int kEndPass = PreparedChunks<kThreads>::kPerThread>
__device__ inline void prepare_backward_head(const BackwardHead& h, const unsigned char* out,
                                             const HeadPreparationSm90a<kThreads>& prep, int T,
                                             const unsigned char* raw_q = nullptr) {
  const auto store_v = [&](int r, int c, std::uint32_t at, const uint4& v) {
    *reinterpret_cast<uint4*>(h.head.v + at) = v;
    uint4* dout = reinterpret_cast<uint4*>(h.dout + at);
    if constexpr (kTakeDelta) {
      const float dot = chunk_row_dot(*dout, *reinterpret_cast<const uint4*>(out + at));
      if (c == 0) h.delta[r] = r < T ? dot : 0.0f;
    }
    if (r >= T) *dout = make_uint4(0, 0, 0, 0);
  };
  prep.template apply_from<decltype(store_v), kFirstPass, kEndPass>(raw_q != nullptr ? raw_q : h.head.q, h.head, T,
                                                                     store_v);
}

// dS^T of this warp's keys (key0 + lane / 4, + 8) and queries q_base .. q_base + 16 kSteps - 1 into the dS^T
// tiles, from its A fragments (dsa[ks][2 j + half]: keys + 8 half, queries 16 ks + 8 j + 2 (lane % 4) and + 1),
// each pair of adjacent queries one 4-byte store.
template <int kSteps>
__device__ inline void store_ds_t(const BackwardHead& h, const unsigned (&dsa)[kSteps][4], int key0, int q_base,
                                  int lane) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + lane / 4 + 8 * (e % 2), query = q_base + 16 * ks + 8 * (e / 2) + 2 * (lane % 4);
      *reinterpret_cast<unsigned*>(h.ds_t[query / 64] + swizzled(key, (query % 64) / kChunk) +
                                   2 * (query % kChunk)) = dsa[ks][e];
    }
}

// A key half's S^T and dP^T accumulators: keys key0 + g (+8), queries kMaxT - kQueries + 8 n ..; S^T becomes P^T and
// dP^T becomes dS^T in place. (The query-first walk, the keeper's v44's and the lab's v43's, holds a query half's S and
// dP in the same form, QueryHalfScores.)
template <int kQueries>
struct KeyHalfScores {
  float s[kQueries / 8][4], dp[kQueries / 8][4];
};

// The first step of key half `half`: S^T = k q^T and dP^T = v dout^T issued to the tensor cores (one commit
// group), not waited for.
template <int kQueries>
__device__ __forceinline__ void issue_key_scores(const BackwardHead& h, int half, KeyHalfScores<kQueries>& x) {
  constexpr int q_base = kMaxT - kQueries;
  const int key_base = 64 * half;
  float(&s_flat)[kQueries / 2] = reinterpret_cast<float(&)[kQueries / 2]>(x.s);
  float(&dp_flat)[kQueries / 2] = reinterpret_cast<float(&)[kQueries / 2]>(x.dp);
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
    hw::wgmma_bf16_ss(s_flat, hw::descriptor_k_major_sw128(h.head.k + key_base * kSwizzleRow, ks),
                      hw::descriptor_k_major_sw128(h.head.q + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
    hw::wgmma_bf16_ss(dp_flat, hw::descriptor_k_major_sw128(h.head.v + key_base * kSwizzleRow, ks),
                      hw::descriptor_k_major_sw128(h.dout + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
}

// When and how a block's RoPE rotate-back factors are fetched for dk's and dq's stores: by the store, after the
// product (after_product); while the tensor cores compute the product (under_product, the lab's v37, v41's dk); the
// same from RopeTable's lane-ordered copy, in 16-byte loads (under_product_lane_ordered, the lab's v38, the
// keeper's, v44's).
enum class FactorFetch { after_product, under_product, under_product_lane_ordered };

template <FactorFetch kFetch>
__device__ __forceinline__ void fetch_factors_under_product(RopeBackFactors& factors, RopeTable rope, int row0, int T,
                                                            int lane) {
  if constexpr (kFetch != FactorFetch::after_product)
    factors.load<kFetch == FactorFetch::under_product_lane_ordered>(rope, row0, T, lane);
}

// The key phase's choices: dk's RoPE factors asked of the L1 before the products (prefetch_factors, the lab's v27,
// prefetch_rope_back_factors); when they are fetched (fetch); a masked chunk's exponents as straight-line code
// (select_masked, v39: probabilities_and_ds's kSelectMasked); dS^T stored for the dq products (store_ds_t; not by the
// keeper's v44 and the lab's v43, whose query phase makes dq from its own dS); each 32-query chunk's element-wise step
// chosen by a branch on whether the chunk is masked (branch_on_masked, the lab's v46 in both key halves, v48 in key
// half 1 alone: the warp's keys are one 16-row block, so the branch is uniform), the unmasked chunks' without a
// compare, where without it every pair's keep is !masked || (key <= query < T), which ptxas computes for every pair
// while the scores' products run and, short of predicate registers, keeps as bits in ordinary ones, about six
// instructions a pair. group_anew: the warp group's barrier found from the thread's index where it is met, not from
// the caller's `group` (the lab's rings, v49 and v52, whose two groups walk heads of their own: a register fewer
// through the phase).
enum class KeyHalves { neither, half_1, both };
struct KeyPhase {
  bool prefetch_factors = false;
  FactorFetch fetch = FactorFetch::after_product;
  bool select_masked = false;
  bool store_ds_t = true;
  KeyHalves branch_on_masked = KeyHalves::neither;
  bool group_anew = false;
};

// The second step: once the scores (the newest commit group) have completed, the element-wise step, dS^T to shared
// memory (where kPhase.store_ds_t), then dv = P^T dout and dk = dS^T q from the registers, completed and fenced; the
// warp group meets so that its v rows may hold the half's staging. Unless kPhase.fetch is after_product (the keeper,
// the lab's v37, v38 and from v40), dk's RoPE factors are fetched into dk_factors while the tensor cores compute dv and
// dk.
template <KeyPhase kPhase = KeyPhase{}, int kQueries>
__device__ __forceinline__ void key_gradients(const BackwardHead& h, const FusedArgs& args, int half, int group,
                                              KeyHalfScores<kQueries>& x, float (&dv)[kHeadDim / 2],
                                              float (&dk)[kHeadDim / 2], RopeBackFactors* dk_factors = nullptr) {
  constexpr int kSteps = kQueries / 16, q_base = kMaxT - kQueries;
  const int tid = thread_index_anew(), lane = tid % 32, warp = (tid / 32) % 4;
  const int key0 = 64 * half + kRows * warp;
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(reinterpret_cast<float(&)[kQueries / 2]>(x.s));
  hw::fence_accumulators(reinterpret_cast<float(&)[kQueries / 2]>(x.dp));

  // v9's element-wise step, 32 queries at a time: a chunk wholly right of the block's diagonal and below T
  // needs no mask.
#pragma unroll
  for (int c = 0; c < kQueries / kQueryChunk; ++c) {
    const int qc = q_base + kQueryChunk * c;
    const bool masked = qc < key0 + kRows || qc + kQueryChunk > args.s.T;
    const auto step = [&](bool with_masks) {
      probabilities_and_ds<Exponent::log2_approx, kQueryChunk / 8, kPhase.select_masked>(
          query_chunk(x.s, c), query_chunk(x.dp, c), h.lse, h.delta, key0, qc, with_masks, args.scale * kLog2e,
          args.s.T, lane);
    };
    constexpr bool kBranch = kPhase.branch_on_masked == KeyHalves::both ||
                             (kPhase.branch_on_masked == KeyHalves::half_1 && kQueries == kMaxT / 2);
    if constexpr (kBranch) {
      if (masked)
        step(true);
      else
        step(false);
    } else {
      step(masked);
    }
  }
  // P^T and dS^T as bf16 A fragments (each fp32 pair dies as its word is made), dS^T also to shared memory.
  unsigned pa[kSteps][4], dsa[kSteps][4];
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    accumulators_as_a(pa[ks], x.s, ks);
    accumulators_as_a(dsa[ks], x.dp, ks);
  }
  if constexpr (kPhase.store_ds_t) store_ds_t(h, dsa, key0, q_base, lane);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[ks][e]), "+r"(dsa[ks][e])::"memory");
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
    hw::wgmma_bf16_rs<1>(dv, pa[ks], mn_major(h.dout + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
    hw::wgmma_bf16_rs<1>(dk, dsa[ks], mn_major(h.head.q + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  if constexpr (kPhase.fetch != FactorFetch::after_product)
    fetch_factors_under_product<kPhase.fetch>(*dk_factors, args.rope, key0, args.s.T, lane);
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(dv);
  hw::fence_accumulators(dk);
  if constexpr (kPhase.store_ds_t) hw::fence_proxy_async_shared();  // dS^T's ordinary stores, read by the dq products
  // The half's dP^T has read all its v rows: they may hold the stages.
  warp_group_sync(kPhase.group_anew ? thread_index_anew() / 128 : group);
}

// A warp's 16-row block of dk or dq (times scale, rotated back) to dqkv through `stage`: by `factors` where the
// caller fetched them ahead (the keeper, the lab's v37, v38 and from v40), else by factors fetched here.
template <typename Address, typename Sums>
__device__ __forceinline__ void store_rotated_block(bf16* dqkv, const SwizzledStage& stage,
                                                    const float (&acc)[kHeadDim / 2], const FusedArgs& args, int row0,
                                                    int lane, Address address, Sums sums,
                                                    const RopeBackFactors* factors) {
  if (factors != nullptr)
    store_head_block_rotated(dqkv, stage, as_tiles(acc), args.scale, true, *factors, row0, args.s.T, lane, address,
                             sums);
  else
    store_head_block_staged(dqkv, stage, as_tiles(acc), args.scale, true, args.rope, row0, args.s.T, lane, address,
                            sums);
}

// The last step: dv and dk of the half's keys to dqkv, staged in the half's own v rows; dk rotated back by
// dk_factors where key_gradients fetched them, else by factors fetched here.
template <typename HeadSums>
__device__ __forceinline__ void store_key_gradients(const BackwardHead& h, bf16* dqkv, const HeadRows& at,
                                                    const FusedArgs& args, int half, const float (&dv)[kHeadDim / 2],
                                                    const float (&dk)[kHeadDim / 2], HeadSums column_sums,
                                                    const RopeBackFactors* dk_factors = nullptr) {
  const int tid = thread_index_anew(), lane = tid % 32, warp = (tid / 32) % 4;
  const int key0 = 64 * half + kRows * warp;
  const SwizzledStage stage{h.head.v, key0};
  store_head_block_staged(dqkv, stage, as_tiles(dv), 1.0f, false, args.rope, key0, args.s.T, lane,
                          [&](int t) { return at.qkv_at(t, 2); }, column_sums.block(2, key0));
  store_rotated_block(dqkv, stage, dk, args, key0, lane, [&](int t) { return at.qkv_at(t, 1); },
                      column_sums.block(1, key0), dk_factors);
}

// Key half `half` (keys 64 half .. 64 half + 63) against the kQueries queries from kMaxT - kQueries on, run by
// warp group `group`: dv and dk to dqkv, dS^T to shared memory where kPhase.store_ds_t (the key phase above), each
// step waiting for the one before, as kPhase chooses.
template <int kQueries, KeyPhase kPhase = KeyPhase{}, typename HeadSums = NoHeadColumnSums>
__device__ __forceinline__ void backward_key_rows(const BackwardHead& h, bf16* dqkv, const HeadRows& at,
                                                  const FusedArgs& args, int half, int group,
                                                  HeadSums column_sums = {}) {
  if constexpr (kPhase.prefetch_factors) {
    const int tid = thread_index_anew();
    prefetch_rope_back_factors(args.rope, 64 * half + kRows * ((tid / 32) % 4), args.s.T, tid % 32);
  }
  KeyHalfScores<kQueries> scores;
  issue_key_scores(h, half, scores);
  float dv[kHeadDim / 2], dk[kHeadDim / 2];
  if constexpr (kPhase.fetch != FactorFetch::after_product) {
    RopeBackFactors dk_factors;
    key_gradients<kPhase>(h, args, half, group, scores, dv, dk, &dk_factors);
    store_key_gradients(h, dqkv, at, args, half, dv, dk, column_sums, &dk_factors);
  } else {
    key_gradients<kPhase>(h, args, half, group, scores, dv, dk);
    store_key_gradients(h, dqkv, at, args, half, dv, dk, column_sums);
  }
}

// Both key halves with half 1's scores issued before half 0's gradients are stored (the lab's v35), so the tensor
// cores compute them meanwhile: half 1's S^T and dP^T (64 queries, 64 registers) live beside half 0's dv and dk.
// Half 1's scores are issued and waited for at any T (a conditional wgmma makes ptxas serialize them); at T <= 64
// nothing else of half 1 runs.
template <typename HeadSums = NoHeadColumnSums>
__device__ __forceinline__ void backward_key_halves_overlapped(const BackwardHead& h, bf16* dqkv, const HeadRows& at,
                                                               const FusedArgs& args, HeadSums column_sums = {}) {
  KeyHalfScores<kMaxT> scores0;
  issue_key_scores(h, 0, scores0);
  float dv[kHeadDim / 2], dk[kHeadDim / 2];
  key_gradients(h, args, 0, 0, scores0, dv, dk);
  KeyHalfScores<kMaxT - 64> scores1;
  issue_key_scores(h, 1, scores1);
  store_key_gradients(h, dqkv, at, args, 0, dv, dk, column_sums);
  if (args.s.T > 64) {
    key_gradients(h, args, 1, 0, scores1, dv, dk);
    store_key_gradients(h, dqkv, at, args, 1, dv, dk, column_sums);
  } else {
    hw::wgmma_wait_group<0>();
  }
}

// Nothing to do once the dq product has completed (backward_query_rows's default).
struct NothingAfterDq {
  __device__ void operator()() const {}
};

// Query half `half` (queries 64 half .. 64 half + 63) against keys 0 .. kKeys - 1 (kKeys = 64 (half + 1)): dq =
// dS k to dqkv (the query phase above), staged in the half's q rows. kFetch: when dq's RoPE factors are fetched
// (v21: under_product, while the tensor cores compute dq, not after). kDirect (v25): dq stored from the registers,
// so q's tile is free once the key phase has ended (its factors fetched under the product too).
// after_dq() runs in every thread once its wait for the dq product has returned, before dq is stored (the lab's
// v31: thread 0 loads the next head's out into the dS^T tile that product read).
template <int kKeys, FactorFetch kFetch = FactorFetch::after_product, bool kDirect = false,
          typename AfterDq = NothingAfterDq, typename HeadSums = NoHeadColumnSums>
__device__ __forceinline__ void backward_query_rows(const BackwardHead& h, bf16* dqkv, const HeadRows& at,
                                                    const FusedArgs& args, int half, AfterDq after_dq = {},
                                                    HeadSums column_sums = {}) {
  static_assert(!kDirect || std::is_same_v<HeadSums, NoHeadColumnSums>, "kDirect stores no column sums");
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, q0 = 64 * half + kRows * warp;
  float dq[kHeadDim / 2];
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks)
    hw::wgmma_bf16_ss<1, 1>(dq, mn_major(h.ds_t[half], ks), mn_major(h.head.k, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  const auto q_rows = [&](int t) { return at.qkv_at(t, 0); };
  if constexpr (kDirect || kFetch != FactorFetch::after_product) {
    RopeBackFactors factors;
    factors.load<kFetch == FactorFetch::under_product_lane_ordered>(args.rope, q0, args.s.T, lane);
    hw::wgmma_wait_group<0>();
    hw::fence_accumulators(dq);
    after_dq();
    if constexpr (kDirect)
      store_head_block_direct(dqkv, as_tiles(dq), args.scale, true, factors, q0, args.s.T, lane, q_rows);
    else
      store_head_block_rotated(dqkv, SwizzledStage{h.head.q, q0}, as_tiles(dq), args.scale, true, factors, q0,
                               args.s.T, lane, q_rows, column_sums.block(0, q0));
  } else {
    hw::wgmma_wait_group<0>();
    hw::fence_accumulators(dq);
    after_dq();
    store_head_block_staged(dqkv, SwizzledStage{h.head.q, q0}, as_tiles(dq), args.scale, true, args.rope, q0,
                            args.s.T, lane, q_rows, column_sums.block(0, q0));
  }
}

// Both query halves at once (the lab's from v33): half 1's dq product (queries 64 .. 127 against every key) is issued
// right behind half 0's, so the tensor cores compute it while half 0's dq is stored; each half staged in its own q
// rows, as backward_query_rows does, or, kStageInDsT (v36, whose next head's q may be landing in q's tile), in dS^T's
// first tile: half 0 in its rows 64 .. 127, which causal attention leaves unused, half 1 in its rows 0 .. 63 once the
// warp group's half 0 product, their last reader, has completed. Half 1's product runs at any T: its rows from T on are
// not stored. kFetch: when both halves' RoPE factors are fetched (the lab's v37, v38 and from v40: while the tensor
// cores compute the products).
template <bool kStageInDsT = false, FactorFetch kFetch = FactorFetch::after_product,
          typename HeadSums = NoHeadColumnSums>
__device__ __forceinline__ void backward_query_halves_together(const BackwardHead& h, bf16* dqkv, const HeadRows& at,
                                                               const FusedArgs& args, HeadSums column_sums = {}) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  float dq0[kHeadDim / 2], dq1[kHeadDim / 2];
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 64 / 16; ++ks)
    hw::wgmma_bf16_ss<1, 1>(dq0, mn_major(h.ds_t[0], ks), mn_major(h.head.k, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
#pragma unroll
  for (int ks = 0; ks < kMaxT / 16; ++ks)
    hw::wgmma_bf16_ss<1, 1>(dq1, mn_major(h.ds_t[1], ks), mn_major(h.head.k, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  const auto q_rows = [&](int t) { return at.qkv_at(t, 0); };
  const int q0 = kRows * warp, q1 = 64 + kRows * warp;
  const SwizzledStage stage0 = kStageInDsT ? SwizzledStage{h.ds_t[0], q1} : SwizzledStage{h.head.q, q0};
  const SwizzledStage stage1 = kStageInDsT ? SwizzledStage{h.ds_t[0], q0} : SwizzledStage{h.head.q, q1};
  constexpr bool kFactorsUnderProducts = kFetch != FactorFetch::after_product;
  RopeBackFactors factors[2];  // each half's, where kFactorsUnderProducts
  fetch_factors_under_product<kFetch>(factors[0], args.rope, q0, args.s.T, lane);
  fetch_factors_under_product<kFetch>(factors[1], args.rope, q1, args.s.T, lane);
  hw::wgmma_wait_group<1>();
  hw::fence_accumulators(dq0);
  store_rotated_block(dqkv, stage0, dq0, args, q0, lane, q_rows, column_sums.block(0, q0),
                      kFactorsUnderProducts ? &factors[0] : nullptr);
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(dq1);
  if constexpr (kStageInDsT) warp_group_sync(0);  // every warp's half 0 product has read dS^T's first tile
  store_rotated_block(dqkv, stage1, dq1, args, q1, lane, q_rows, column_sums.block(0, q1),
                      kFactorsUnderProducts ? &factors[1] : nullptr);
}

// A backward kernel's tensor maps (its __grid_constant__ parameters), the operands checked for 16-byte alignment
// first: the raw qkv [N, 3C], dout and out [N, C]; or, qkv_half_boxes, qkv's in boxes of half a head's rows in out's
// place (a walk that reads no out and loads a head in two parts, the lab's v45). `version` names the kernel in a
// refusal ("v17's backward").
struct BackwardTensorMaps {
  CUtensorMap qkv, dout, out;
};
inline BackwardTensorMaps backward_tensor_maps(const char* version, const bf16* dqkv, const bf16* dout,
                                               const bf16* out, const bf16* qkv, const float* qkv_bias,
                                               RopeTable rope, const AttentionShape& s, bool qkv_half_boxes = false) {
  BackwardTensorMaps maps;
  maps.qkv = qkv_tensor_map(version, out, qkv, qkv_bias, rope, s);
  check_aligned16(dqkv, version, "dqkv");
  check_aligned16(dout, version, "dout");
  const auto cols = static_cast<std::uint64_t>(s.channels());
  maps.dout = head_box_map(dout, s, cols);
  maps.out = qkv_half_boxes ? head_box_map(qkv, s, 3 * cols, kMaxT / 2) : head_box_map(out, s, cols);
  return maps;
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
