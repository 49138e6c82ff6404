// Fused causal attention with RoPE, version 22 (bf16, the kernel lab's lab_attention_bf16: row v22; the keeper's
// until v26): v18's kernels with each thread's bias and RoPE factors, which prepare its chunks of q, k and v,
// fetched by 16-byte loads (HeadPreparationSm90a::load's kFloat4), each walk asking the L2 for the next head's
// boxes while it computes one: v15's forward walk (attention_forward_walk_sm90a.cuh) where a batch's heads number
// at least four per block of its grid, v9's forward below, as the keeper chooses; v18's backward walk
// (attention_backward_walk_sm90a.cuh), which rows v23 and v24 run too. Compiled for sm_90a alone, in the lab's
// sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: a thread fetches 24 bias floats and 64 RoPE factors a head one by one, 88 read-only loads where 22 fetch
// the same bytes; Nsight Compute's warp samples on v15's forward (H100, batch 512) put about 7% on those loads.
// The same values in the same arithmetic, so its GPU test asks for v18's out, lse and dqkv bit for bit.
// Budget: v18's shared memory; forward 159 registers (ptxas, no spills), three blocks an SM; backward 254, two.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    attention_v22_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV22ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v22_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV22Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

ForwardWalk g_v22_forward{"v22's forward", "attention_v22_configure", attention_v22_forward_kernel};
BackwardWalk g_v22_backward{"v22's backward", "attention_v22_configure", attention_v22_backward_kernel,
                            kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v22_configure() {
  attention::g_v22_forward.configure();
  attention::g_v22_backward.configure();
  fused_attention_v9_configure();
}

void attention_v22_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v22_forward.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}

void attention_v22_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                            const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  attention::g_v22_backward.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda::lab
