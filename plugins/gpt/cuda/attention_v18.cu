// Fused causal attention with RoPE, version 18's backward (bf16): the bf16 keeper's (v18's) backward on a device
// where hopper_path_available, beside v15's forward (attention_v15.cu); v9's backward runs elsewhere
// (attention.cu chooses). v12's backward steps (attention_backward_sm90a.cuh, which the lab's v12 shares) with a
// whole head in one warp group and two heads an SM, the next head's v and dout loaded as soon as the key phase has
// read them (v17's walk, attention_backward_walk_sm90a.cuh, which the lab's v14, v17 and v21 share), and each
// head's lse held in a register across the wait for its boxes, scaled into shared memory after it, the next
// head's lse asked of the L2 with its boxes. Compiled for sm_90a alone, in the object library of the training
// library's sm_90a kernels; attention_sm90a_absent.cpp stands in without sm_90a code.
//
// Why: in v17's walk every head waited on the lse's load from global memory, which the L2 had not seen, before
// it waited for its boxes: Nsight Compute's warp samples on v17's backward at batch 512 (H100) put 8.5% on that
// scaling right after the load. The same steps in the same order: dqkv equals v17's (and v14's) bit for bit.
// Budget: shared memory q, k, v, dout 64 KB + dS^T 32 KB + lse, delta 1 KB + two barriers, 98 KB with the
// alignment's spare, two blocks an SM; registers as v12's larger key half (128 live accumulators) and one float a
// thread across the wait, 128 threads a block.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v18_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV18Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

BackwardWalk g_v18_walk{"v18's backward", "fused_attention_sm90a_backward_configure",
                        fused_attention_v18_backward_kernel, kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_backward_configure() { attention::g_v18_walk.configure(); }

int fused_attention_sm90a_backward_blocks_per_sm() { return attention::grid_blocks_per_sm(attention::g_v18_walk.grid); }

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  attention::g_v18_walk.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda
