// Fused causal attention with RoPE, version 12's backward (bf16, the kernel lab's lab_attention_bf16: rows v12,
// on v11's forward, v13, on v9's, and v15, on v15's): a backward on Hopper's own instructions (sm_90a: TMA boxes
// completing on an mbarrier, wgmma on operands in shared memory or registers). Compiled for sm_90a alone, in the
// lab's sm_90a library (attention_sm90a.cuh holds what it shares with the lab's v10 and v11 forwards, and
// attention_backward_sm90a.cuh its steps, which v14's, v17's, v18's, v22's and v26's (the keeper's) backwards run
// a head a warp group); attention_v10_absent.cpp stands in without sm_90a code.
//
// At T <= 128 and head dim 64 one block holds a whole head, so the backward needs no loop over tiles and no
// atomics: a block of two warp groups computes dq, dk and dv of all a head's rows. It is persistent (one block
// per SM walks the heads: blockIdx.x, then + gridDim.x, ...) with two head stages, so the next head's rows
// land while this one computes:
//   - thread 0 loads a head's q, k, v (the raw qkv map), dout and out (maps over [N, C]) as five 128 x 64
//     boxes in the 128-byte swizzle into a stage, all on its mbarrier: the first head's before the loop, each
//     next head's into the other stage as the loop turns to this one; every thread fetches this head's bias
//     and RoPE factors and its lse (times log2(e), v9's log2 units) before waiting for the stage;
//   - every thread prepares its chunks in place and takes delta (attention_backward_sm90a.cuh's steps, which
//     v14 shares);
//   - key phase: warp group g takes key half g (keys 64 g .. against the queries 64 g .. 127: N = 128 queries
//     for g = 0, 64 for g = 1): S^T, dP^T, the element-wise step, dS^T to shared memory, dv and dk;
//   - query phase, after a barrier: warp group g takes query half g, dq = dS k;
//   - a barrier ends the head, and its stage is free for the head after next.
// Budget: shared memory two stages of q, k, v, dout, out (80 KB each) + dS^T 32 KB + lse, delta 1 KB + the
// barriers = 193 KB of the 227 a block may have. Registers: the larger key half's 128 live accumulators plus
// addresses and indices (ptxas: 234, no spills); 256 threads a block, one block per SM. Warp group 0 does 9 of
// the head's 15 64 x 64 x 64 products (4 x 2 in the key phase, 1 in the query phase), group 1 the other 6.
// dqkv agrees with v9's to bf16's rounding, not bit for bit, and is deterministic (a fixed order, no atomics),
// as R4's recomputed backward needs.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kV12Threads = 2 * 128;  // two warp groups
static_assert(kV12Threads == kV10Threads, "v10's preparation gives its chunks to 256 threads");
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

// One head: prepared, then both phases; ends at a barrier after which its stage may be refilled.
__device__ __forceinline__ void backward_head(V12Smem& sm, V12Stage& st, const V10Preparation& prep, bf16* dqkv,
                                              const HeadRows& at, const FusedArgs& args) {
  const int T = args.s.T, group = static_cast<int>(threadIdx.x) / 128;
  const BackwardHead h{st.head, st.dout, sm.ds_t, sm.lse, sm.delta};
  prepare_backward_head(h, st.out, prep, T);
  __syncthreads();
  if (group == 0)
    backward_key_rows<kMaxT>(h, dqkv, at, args, 0, 0);
  else if (T > 64)  // else keys 64 .. are all padding
    backward_key_rows<kMaxT - 64>(h, dqkv, at, args, 1, 1);
  __syncthreads();  // every dS^T stored (and fenced); q, v, dout read for the last time
  if (group == 0)
    backward_query_rows<64>(h, dqkv, at, args, 0);
  else if (T > 64)  // else queries 64 .. are all padding
    backward_query_rows<kMaxT>(h, dqkv, at, args, 1);
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
    hw::mbarrier_wait_or_trap(&sm.full[stage], (n / kV12Stages) & 1);
    backward_head(sm, sm.stage[stage], prep, dqkv, at, args);
  }
}

// The persistent backward's grid: as many blocks as fit at once. Set by attention_v12_backward_configure.
int g_v12_grid = 0;

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v12_backward_configure() {
  const auto kernel = attention::fused_attention_v12_backward_kernel;
  attention::configure_sm90a("v12's backward", kernel, attention::kV12SmemBytes);
  attention::g_v12_grid =
      attention::persistent_grid("v12's backward", kernel, attention::kV12Threads, attention::kV12SmemBytes);
}

void attention_v12_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                            const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  if (attention::g_v12_grid == 0)
    throw Error("gpt: attention v12's backward runs after attention_v12_backward_configure()");
  const attention::FusedArgs args = attention::fused_args(s, rope);
  const attention::BackwardTensorMaps maps =
      attention::backward_tensor_maps("v12 backward", dqkv, dout, out, qkv, qkv_bias, rope, s);
  const int blocks = std::min(s.batch * s.heads, attention::g_v12_grid);
  attention::fused_attention_v12_backward_kernel<<<blocks, attention::kV12Threads, attention::kV12SmemBytes,
                                                   stream>>>(maps.qkv, maps.dout, maps.out, dqkv, lse, qkv_bias,
                                                             args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::lab
