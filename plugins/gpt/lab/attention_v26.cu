// Fused causal attention with RoPE, version 26's forward (bf16, the kernel lab's lab_attention_bf16: rows v26 and
// v27, with v26's backward and v27's; the keeper's until v29): v15's forward walk (attention_forward_walk_sm90a.cuh)
// with each thread's bias and RoPE factors fetched by 16-byte loads and no head's boxes asked of the L2 ahead of
// their loads (kV26ForwardWalk): each head's q, k and v asked for when the head starts. Also version 26's backward
// (the keeper's until v34; rows v26 and v29), v22's walk without the L2 prefetch of the next head's boxes (kV26Walk),
// and the same summing dqkv's columns as it stores them (kQkvBiasWalk; lab_attention_qkv_bias_bf16's v2).
// Compiled for sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: v22's forward asked the L2 for the next head's boxes a head ahead, and about half of those lines were
// evicted before use and read twice; without the prefetch the layer took 5-6% less time (H100, batch 512).
// The same values and roundings as v22's forward: out and lse equal its bits.
// Budget: shared memory q, k, v 48 KB + the barrier, 49 KB with the alignment's spare, 167 registers (ptxas, no
// spills), three blocks an SM.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    attention_v26_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV26ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v26_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV26Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v26_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kQkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                    lse, bias, args);
}

ForwardWalk g_v26_forward{"v26's forward", "attention_v26_forward_configure", attention_v26_forward_kernel};
BackwardWalk g_v26_backward{"v26's backward", "walk_configure<26>", attention_v26_backward_kernel,
                            kV17SmemBytes};
BackwardWalk g_v26_qkv_bias_backward{"v26's backward with qkv's bias sums", "walk_configure<26>",
                                     attention_v26_qkv_bias_backward_kernel, kQkvBiasSmemBytes, true};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v26_forward_configure() {
  attention::g_v26_forward.configure();
  fused_attention_v9_configure();
}

void attention_v26_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v26_forward.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}

std::span<const VersionWalk> attention_v26_walks() {
  static constexpr VersionWalk kWalks[] = {
      version_walk<&attention::g_v26_backward, &attention::g_v26_qkv_bias_backward>(26),
  };
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
