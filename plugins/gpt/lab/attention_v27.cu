// Fused causal attention with RoPE, versions 27 and 28 (bf16, the kernel lab's lab_attention_bf16: rows v27 and
// v28). Compiled for sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a
// code.
//   - v27's backward: v26's walk (attention_backward_walk_sm90a.cuh) with the RoPE factors that rotate dk and dq
//     back asked of the L1 ahead of their loads (rope_l1_prefetch); row v27 runs it on v26's forward.
//   - v28: v27's backward and v26's forward, each asking the L2 for the next head's boxes half a head ahead of
//     their loads (the backward's late_l2_prefetch: q, k and out when v and dout are loaded; the forward's
//     mid_head_l2_prefetch: q, k and v once query half 0 has run).
//
// Why: in v26's backward (Nsight Compute, H100, batch 512) 7.7% of the warp samples sit on the first uses of the
// RoPE factors loaded for dk's and dq's stores, each a round trip to the L2 after a product, and 11.5% on the
// wait for the late boxes; in its forward 18.8% on the wait for the head's boxes. v26 reads 0.98x the model's
// DRAM bytes (the counters pass), so a prefetch that is read twice shows there.
// The prefetches change no value: dqkv, out and lse equal v26's bit for bit.
// Budget: v26's shared memory and blocks an SM; a prefetch is an instruction without a destination register.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v27_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV27Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    attention_v28_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV28ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v28_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV28Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

BackwardWalk g_v27_backward{"v27's backward", "walk_configure<27>", attention_v27_backward_kernel,
                            kV17SmemBytes};
ForwardWalk g_v28_forward{"v28's forward", "attention_v28_configure", attention_v28_forward_kernel};
BackwardWalk g_v28_backward{"v28's backward", "attention_v28_configure", attention_v28_backward_kernel,
                            kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v28_configure() {
  attention::g_v28_forward.configure();
  attention::g_v28_backward.configure();
  fused_attention_v9_configure();
}

void attention_v28_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v28_forward.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}

void attention_v28_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                            const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  attention::g_v28_backward.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

std::span<const VersionWalk> attention_v27_walks() {
  static constexpr VersionWalk kWalks[] = {version_walk<&attention::g_v27_backward>(27)};
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
