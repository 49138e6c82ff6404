// Fused causal attention with RoPE, the bf16 keeper's sm_90a backward (v12's in the kernel lab, run by the
// keeper, v13, on v9's forward): a backward on Hopper's own instructions (sm_90a: TMA boxes completing on an
// mbarrier, wgmma on operands in shared memory or registers). Compiled for sm_90a alone, in an object library
// of its own whose objects join the training library (attention_sm90a.cuh holds what it shares with the lab's
// v10 and v11 forwards); attention_v12_absent.cpp stands in without sm_90a code. attention.cu runs it where
// hopper_path_available says this build's sm_90a code runs, v9's backward elsewhere.
//
// At T <= 128 and head dim 64 one block holds a whole head, so the backward needs no loop over tiles and no
// atomics: a block of two warp groups computes dq, dk and dv of all a head's rows. It is persistent (one block
// per SM walks the heads: blockIdx.x, then + gridDim.x, ...) with two head stages, so the next head's rows
// land while this one computes:
//   - thread 0 loads a head's q, k, v (the raw qkv map), dout and out (maps over [N, C]) as five 128 x 64
//     boxes in the 128-byte swizzle into a stage, all on its mbarrier: the first head's before the loop, each
//     next head's into the other stage as the loop turns to this one; every thread fetches this head's bias
//     and RoPE factors and its lse (times log2(e), v9's log2 units) before waiting for the stage;
//   - every thread prepares its chunks in place (v10's preparation: v9's operands, rows from T on zero),
//     zeroes dout's rows from T on, and takes delta = rowsum(dout * out) as v9 does (chunk_row_dot);
//   - key phase, warp group g: keys 64 g .. 64 g + 63 against the queries 64 g .. 127 (causal: no earlier
//     query sees them; N = 128 queries for g = 0, 64 for g = 1), keys as the accumulators' rows:
//       S^T = k q^T and dP^T = v dout^T (both operands K-major, as TMA wrote them), then v9's element-wise
//       step (probabilities_and_ds: P^T = exp2(scale log2(e) S^T - lse), dS^T = P^T (dP^T - delta), the causal
//       and T masks, ex2.approx), dS^T rounded to bf16 into shared memory for dq, then from registers (the
//       accumulators are, element for element, the A fragments) dv = P^T dout and dk = dS^T q, dout and q read
//       MN-major (imm-trans-b 1: the rows TMA wrote, no transposed copy);
//   - query phase, after a barrier: dq = dS k for queries 64 g .., keys 0 .. 64 g + 63, dS^T and k both read
//     MN-major (imm-trans-a 1, imm-trans-b 1). dS^T is kept [key][query] in two 128-byte swizzled tiles of 64
//     queries each, written from the packed dS^T fragments (a warp's eight rows of one 16-byte column land in
//     eight different chunks: no bank conflicts);
//   - dv and dk are staged in the warp's own v rows (read by its own group's dP^T alone), dq in its q rows (no
//     product reads q after the barrier), and leave as v9's do (store_head_block_staged: times scale, rotated
//     back, 128-byte rows); a barrier ends the head, and its stage is free for the head after next.
// Budget: shared memory two stages of q, k, v, dout, out (80 KB each) + dS^T 32 KB + lse, delta 1 KB + the
// barriers = 193 KB of the 227 a block may have. Registers, warp group 0's key phase (the larger): S^T and
// dP^T accumulators 64 + 64 fp32, then the P^T and dS^T fragments 32 + 32 and the dv and dk accumulators
// 32 + 32, 128 live either way plus addresses and indices (ptxas: 234, no spills); 256 threads a block, one
// block per SM. Warp group 0 does 9 of the head's 15 64 x 64 x 64 products (4 x 2 in the key phase, 1 in the
// query phase), group 1 the other 6. The arithmetic is v9's (its operands, element-wise step and roundings),
// the products summed in the tensor cores' order: dqkv agrees with v9's to bf16's rounding, not bit for bit,
// and is deterministic (a fixed order, no atomics), as R4's recomputed backward needs.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "attention_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kV12Threads = 2 * 128;  // two warp groups
static_assert(kV12Threads == kV10Threads, "v10's preparation gives its chunks to 256 threads");
// The descriptor of a 64-wide MN-major operand (head dim 64, or a warp group's 64 rows): its leading offset,
// between 64-element blocks, is never read.
__device__ __forceinline__ std::uint64_t mn_major(const void* tile, int ks) {
  return hw::descriptor_mn_major_sw128(tile, ks, hw::kSingleMnBlock);
}

// One head's rows as the backward reads them: q, k, v prepared in place; dout raw, rows from T on zeroed; out.
struct V12Stage {
  HeadTiles head;
  unsigned char dout[kHeadTileBytes], out[kHeadTileBytes];
};
constexpr int kV12Stages = 2;

// v12's shared memory, from the first 1024-byte aligned address of the dynamic allocation.
struct V12Smem {
  V12Stage stage[kV12Stages];
  unsigned char ds_t[2][kHeadTileBytes];  // dS^T [key][query], queries 64 t .. in tile t
  float lse[kMaxT], delta[kMaxT];         // lse in log2 units
  std::uint64_t full[kV12Stages];         // a stage's five boxes' bytes
};
constexpr std::size_t kV12SmemBytes = sizeof(V12Smem) + kAtomBytes;  // room to align the start

// The kernel's tensor maps (its __grid_constant__ parameters): the raw qkv [N, 3C], dout and out [N, C].
struct V12Maps {
  const CUtensorMap *qkv, *dout, *out;
};
// The head `at`'s five boxes into `stage`, completing on `bar`. One thread issues them.
__device__ inline void load_backward_head(V12Stage& stage, const V12Maps& maps, std::uint64_t* bar,
                                          const HeadRows& at) {
  load_head(stage.head, maps.qkv, bar, at, 2 * kHeadTileBytes);
  hw::tma_load_2d(stage.dout, maps.dout, bar, at.b * at.T, at.h * kHeadDim);
  hw::tma_load_2d(stage.out, maps.out, bar, at.b * at.T, at.h * kHeadDim);
}

// The 128 threads of warp group `group` meet (named barriers 1 and 2; __syncthreads is barrier 0).
__device__ inline void warp_group_sync(int group) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + group) : "memory");
}

// threadIdx.x as the compiler sees it anew at each call. The key phase derives dozens of shared-memory
// offsets from it (dS^T's stores, the staging); in the persistent loop they are the same for every head, and
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

// Queries qc .. qc + 31 of a key block's accumulators: n8 tiles 4 c .. 4 c + 3.
template <int kTiles>
__device__ inline float (&query_chunk(float (&x)[kTiles][4], int c))[kQueryChunk / 8][4] {
  return reinterpret_cast<float(&)[kQueryChunk / 8][4]>(x[kQueryChunk / 8 * c]);
}

// The head landed in `st`: q, k, v prepared in place, dout's rows from T on zeroed, delta of every row (zero
// from T on).
__device__ inline void prepare_backward_head(V12Stage& st, float* delta, const V10Preparation& prep, int T) {
  prep.apply(st.head, T, [&](int r, int c, std::uint32_t at, const uint4& v) {
    *reinterpret_cast<uint4*>(st.head.v + at) = v;
    uint4* dout = reinterpret_cast<uint4*>(st.dout + at);
    const float dot = chunk_row_dot(*dout, *reinterpret_cast<const uint4*>(st.out + at));
    if (c == 0) delta[r] = r < T ? dot : 0.0f;
    if (r >= T) *dout = make_uint4(0, 0, 0, 0);
  });
}

// dS^T of this warp's keys (key0 + lane / 4, + 8) and queries q_base .. q_base + 16 kSteps - 1 into the dS^T
// tiles, from its A fragments (dsa[ks][2 j + half]: keys + 8 half, queries 16 ks + 8 j + 2 (lane % 4) and + 1),
// each pair of adjacent queries one 4-byte store.
template <int kSteps>
__device__ inline void store_ds_t(V12Smem& sm, const unsigned (&dsa)[kSteps][4], int key0, int q_base, int lane) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + lane / 4 + 8 * (e % 2), query = q_base + 16 * ks + 8 * (e / 2) + 2 * (lane % 4);
      *reinterpret_cast<unsigned*>(sm.ds_t[query / 64] + swizzled(key, (query % 64) / kChunk) +
                                   2 * (query % kChunk)) = dsa[ks][e];
    }
}

// Warp group `group`'s keys 64 group .. 64 group + 63 against the kQueries queries from kMaxT - kQueries on:
// dv and dk to dqkv, dS^T to shared memory (the key phase above).
template <int kQueries>
__device__ __forceinline__ void backward_key_rows(V12Smem& sm, V12Stage& st, bf16* dqkv, const HeadRows& at,
                                                  const FusedArgs& args, int group) {
  constexpr int kTiles = kQueries / 8, kSteps = kQueries / 16, q_base = kMaxT - kQueries;
  const int tid = thread_index_anew(), lane = tid % 32, warp = (tid / 32) % 4;
  const int key_base = 64 * group, key0 = key_base + kRows * warp;
  float s[kTiles][4], dp[kTiles][4];  // S^T, then P^T; dP^T, then dS^T: keys key0 + g (+8), queries q_base + 8 n ..
  float(&s_flat)[kQueries / 2] = reinterpret_cast<float(&)[kQueries / 2]>(s);
  float(&dp_flat)[kQueries / 2] = reinterpret_cast<float(&)[kQueries / 2]>(dp);
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
    hw::wgmma_bf16_ss(s_flat, hw::descriptor_k_major_sw128(st.head.k + key_base * kSwizzleRow, ks),
                      hw::descriptor_k_major_sw128(st.head.q + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
    hw::wgmma_bf16_ss(dp_flat, hw::descriptor_k_major_sw128(st.head.v + key_base * kSwizzleRow, ks),
                      hw::descriptor_k_major_sw128(st.dout + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(s_flat);
  hw::fence_accumulators(dp_flat);

  // v9's element-wise step, 32 queries at a time: a chunk wholly right of the block's diagonal and below T
  // needs no mask.
#pragma unroll
  for (int c = 0; c < kQueries / kQueryChunk; ++c) {
    const int qc = q_base + kQueryChunk * c;
    const bool masked = qc < key0 + kRows || qc + kQueryChunk > args.s.T;
    probabilities_and_ds<Exponent::log2_approx>(query_chunk(s, c), query_chunk(dp, c), sm.lse, sm.delta, key0, qc,
                                                masked, args.scale * kLog2e, args.s.T, lane);
  }
  // P^T and dS^T as bf16 A fragments (each fp32 pair dies as its word is made), dS^T also to shared memory.
  unsigned pa[kSteps][4], dsa[kSteps][4];
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    accumulators_as_a(pa[ks], s, ks);
    accumulators_as_a(dsa[ks], dp, ks);
  }
  store_ds_t(sm, dsa, key0, q_base, lane);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[ks][e]), "+r"(dsa[ks][e])::"memory");
  float dv[kHeadDim / 2], dk[kHeadDim / 2];
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
    hw::wgmma_bf16_rs<1>(dv, pa[ks], mn_major(st.dout + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
    hw::wgmma_bf16_rs<1>(dk, dsa[ks], mn_major(st.head.q + q_base * kSwizzleRow, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(dv);
  hw::fence_accumulators(dk);
  hw::fence_proxy_async_shared();  // dS^T's ordinary stores, read by the query phase's wgmmas
  warp_group_sync(group);          // the group's dP^T has read all its v rows: they may hold the stages

  const SwizzledStage stage{st.head.v, key0};
  store_head_block_staged(dqkv, stage, as_tiles(dv), 1.0f, false, args.rope, key0, args.s.T, lane,
                          [&](int t) { return at.qkv_at(t, 2); });
  store_head_block_staged(dqkv, stage, as_tiles(dk), args.scale, true, args.rope, key0, args.s.T, lane,
                          [&](int t) { return at.qkv_at(t, 1); });
}

// Warp group `group`'s queries 64 group .. 64 group + 63 against keys 0 .. kKeys - 1 (kKeys = 64 (group + 1)):
// dq = dS k to dqkv (the query phase above), staged in the group's q rows.
template <int kKeys>
__device__ __forceinline__ void backward_query_rows(V12Smem& sm, V12Stage& st, bf16* dqkv, const HeadRows& at,
                                                    const FusedArgs& args, int group) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, q0 = 64 * group + kRows * warp;
  float dq[kHeadDim / 2];
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks)
    hw::wgmma_bf16_ss<1, 1>(dq, mn_major(sm.ds_t[group], ks), mn_major(st.head.k, ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(dq);
  store_head_block_staged(dqkv, SwizzledStage{st.head.q, q0}, as_tiles(dq), args.scale, true, args.rope, q0,
                          args.s.T, lane, [&](int t) { return at.qkv_at(t, 0); });
}

// One head: prepared, then both phases; ends at a barrier after which its stage may be refilled.
__device__ __forceinline__ void backward_head(V12Smem& sm, V12Stage& st, const V10Preparation& prep, bf16* dqkv,
                                              const HeadRows& at, const FusedArgs& args) {
  const int T = args.s.T, group = static_cast<int>(threadIdx.x) / 128;
  prepare_backward_head(st, sm.delta, prep, T);
  __syncthreads();
  if (group == 0)
    backward_key_rows<kMaxT>(sm, st, dqkv, at, args, 0);
  else if (T > 64)  // else keys 64 .. are all padding
    backward_key_rows<kMaxT - 64>(sm, st, dqkv, at, args, 1);
  __syncthreads();  // every dS^T stored (and fenced); q, v, dout read for the last time
  if (group == 0)
    backward_query_rows<64>(sm, st, dqkv, at, args, 0);
  else if (T > 64)  // else queries 64 .. are all padding
    backward_query_rows<kMaxT>(sm, st, dqkv, at, args, 1);
  hw::fence_proxy_async_shared();  // this head's ordinary stores to the stage, before TMA writes it again
  __syncthreads();                 // the stage, dS^T, lse and delta are free
}

__global__ void __launch_bounds__(kV12Threads, 1)
    fused_attention_v12_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  V12Smem& sm = aligned_smem<V12Smem>(raw);
  const V12Maps maps{&qkv_map, &dout_map, &out_map};
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kV12Stages; ++s) hw::mbarrier_init(&sm.full[s], 1);
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  int head = static_cast<int>(blockIdx.x);
  if (threadIdx.x == 0 && head < heads)
    load_backward_head(sm.stage[0], maps, &sm.full[0], v10_head_rows(head, args.s));
  for (int n = 0; head < heads; head += stride, ++n) {
    const int stage = n % kV12Stages;
    const HeadRows at = v10_head_rows(head, args.s);
    // The next head's boxes into the other stage, whose last head ended at a barrier.
    if (threadIdx.x == 0 && head + stride < heads)
      load_backward_head(sm.stage[stage ^ 1], maps, &sm.full[stage ^ 1], v10_head_rows(head + stride, args.s));
    V10Preparation prep;
    prep.load(bias, args.rope, at);
    load_lse_log2<kV12Threads>(sm.lse, lse, at, args.s.heads);
    wait_or_trap(&sm.full[stage], (n / kV12Stages) & 1);
    backward_head(sm, sm.stage[stage], prep, dqkv, at, args);
  }
}

// The persistent backward's grid: as many blocks as fit at once. Set by
// fused_attention_sm90a_backward_configure.
int g_v12_grid = 0;

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_backward_configure() {
  const auto kernel = attention::fused_attention_v12_backward_kernel;
  attention::configure_sm90a("v12's backward", kernel, attention::kV12SmemBytes);
  attention::g_v12_grid =
      attention::persistent_grid("v12's backward", kernel, attention::kV12Threads, attention::kV12SmemBytes);
}

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  if (attention::g_v12_grid == 0)
    throw Error("gpt: attention v12's backward runs after fused_attention_sm90a_backward_configure()");
  const attention::FusedArgs args = attention::fused_args(s, rope);
  const CUtensorMap qkv_map = attention::qkv_tensor_map("v12 backward", out, qkv, qkv_bias, rope, s);
  attention::check_aligned16(dqkv, "v12 backward", "dqkv");
  attention::check_aligned16(dout, "v12 backward", "dout");
  const CUtensorMap dout_map = attention::head_box_map(dout, s, static_cast<std::uint64_t>(s.channels()));
  const CUtensorMap out_map = attention::head_box_map(out, s, static_cast<std::uint64_t>(s.channels()));
  const int blocks = std::min(s.batch * s.heads, attention::g_v12_grid);
  attention::fused_attention_v12_backward_kernel<<<blocks, attention::kV12Threads, attention::kV12SmemBytes,
                                                   stream>>>(qkv_map, dout_map, out_map, dqkv, lse, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
