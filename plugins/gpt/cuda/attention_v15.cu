// Fused causal attention with RoPE, version 15's forward (bf16): the bf16 keeper's (v18's) forward on a device
// where hopper_path_available, beside v18's backward (attention_v18.cu); v9's forward runs elsewhere
// (attention.cu chooses). v10's arithmetic (TMA boxes in the 128-byte swizzle, S = q k^T and P V on wgmma, the
// exact softmax in registers) with a whole head in one warp group and three blocks an SM. Compiled for sm_90a
// alone, in the object library of the training library's sm_90a kernels; attention_sm90a_absent.cpp stands in
// without sm_90a code.
//
// Why: at T <= 128 a head's work is a short chain of dependent steps (load, prepare, scores, softmax, P V,
// store), so the SM needs several heads in flight; v10 gives each head two warp groups and two blocks an SM,
// v11 one head at a time per SM (179 us a layer at batch 512 on the H200 against v7's 119). Here, as v7 does
// with mma.sync, a block is one warp group and three share an SM, each walking its own heads
// (attention_forward_walk_sm90a.cuh, which the lab's v22 to v24 share).
// Budget: shared memory q, k, v 48 KB + the barrier, 49 KB with the alignment's spare; registers 158 (ptxas,
// no spills; at four blocks an SM, 128 registers, ptxas spills 140 bytes), so three blocks an SM. The products
// and the softmax are v10's: out and lse agree with v10's to bf16's rounding (bit for bit unless the tensor
// cores sum P V's terms in another order when v is read MN-major).
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    fused_attention_v15_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                       const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV15ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

ForwardWalk g_v15_walk{"v15's forward", "fused_attention_sm90a_forward_configure", fused_attention_v15_forward_kernel};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_forward_configure() { attention::g_v15_walk.configure(); }

int fused_attention_sm90a_forward_blocks_per_sm() { return attention::grid_blocks_per_sm(attention::g_v15_walk.grid); }
int fused_attention_sm90a_forward_grid() { return attention::g_v15_walk.grid; }

void fused_attention_sm90a_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                   const AttentionShape& s, cudaStream_t stream) {
  attention::g_v15_walk.launch(out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda
