// Fused causal attention with RoPE, version 15's forward (bf16, the kernel lab's lab_attention_bf16: row v15, with
// v12's backward, and rows v16, v17, v18 and v21 where a batch's heads number at least four per block of its grid,
// v9's forward below; the keeper's until v22): v10's arithmetic (TMA boxes in the 128-byte swizzle, S = q k^T and
// P V on wgmma, the exact softmax in registers) with a whole head in one warp group and three blocks an SM, each
// walking its own heads (v15's walk, attention_forward_walk_sm90a.cuh, which the keeper's v29 shares). Compiled
// for sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: at T <= 128 a head's work is a short chain of dependent steps (load, prepare, scores, softmax, P V,
// store), so the SM needs several heads in flight; v10 gives each head two warp groups and two blocks an SM,
// v11 one head at a time per SM (179 us a layer at batch 512 on the H200 against v7's 119). Here, as v7 does
// with mma.sync, a block is one warp group and three share an SM.
// Budget: shared memory q, k, v 48 KB + the barrier, 49 KB with the alignment's spare; registers 158 (ptxas,
// no spills; at four blocks an SM, 128 registers, ptxas spills 140 bytes), so three blocks an SM. The products
// and the softmax are v10's: out and lse agree with v10's to bf16's rounding (bit for bit unless the tensor
// cores sum P V's terms in another order when v is read MN-major).
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    attention_v15_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV15ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

ForwardWalk g_v15_walk{"v15's forward", "attention_v15_forward_configure", attention_v15_forward_kernel};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v15_forward_configure() { attention::g_v15_walk.configure(); }

void attention_v15_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v15_walk.launch(out, lse, qkv, qkv_bias, rope, s, stream);
}

// v15's forward where the keeper's rule (sm90a_forward_pays) picks it on v15's grid, v9's below: the keeper's
// forward until v22.
void attention_v15_or_v9_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                 const AttentionShape& s, cudaStream_t stream) {
  attention::g_v15_walk.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda::lab
