// Fused causal attention with RoPE, versions 23's and 24's forwards (bf16, the kernel lab's lab_attention_bf16:
// rows v23 and v24, with v22's backward, lab/attention_v22.cu): v22's forward at four blocks an SM, v24's also
// fetching each thread's bias and RoPE factors only once the head's boxes have landed. v15's walk
// (attention_forward_walk_sm90a.cuh) where a batch's heads number at least four per block of its grid, v9's
// forward below, as the keeper chooses. Compiled for sm_90a alone, in the lab's sm_90a library;
// attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: with its bias and RoPE factors fetched by 16-byte loads, a quarter of v22's forward samples (Nsight Compute,
// H100, batch 512) wait for the head's boxes: a fourth block an SM gives the SM more heads to run meanwhile, at 128
// registers (ptxas spills 64 bytes a thread in v23, 40 in v24, which holds no factors across the wait). The same
// values in the same arithmetic, so the GPU tests ask for v22's out, lse and dqkv bit for bit.
// Budget: v22's forward's shared memory (four blocks of 49 KB fit an SM's 228 KB).
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kFourBlocks = 4;

__global__ void __launch_bounds__(kV15Threads, kFourBlocks)
    attention_v23_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV22ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

__global__ void __launch_bounds__(kV15Threads, kFourBlocks)
    attention_v24_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV24ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

ForwardWalk g_v23_forward{"v23's forward", "attention_v23_configure", attention_v23_forward_kernel};
ForwardWalk g_v24_forward{"v24's forward", "attention_v24_configure", attention_v24_forward_kernel};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v23_configure() {
  attention::g_v23_forward.configure();
  attention_v22_configure();
}
void attention_v24_configure() {
  attention::g_v24_forward.configure();
  attention_v22_configure();
}

void attention_v23_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v23_forward.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}
void attention_v24_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v24_forward.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda::lab
