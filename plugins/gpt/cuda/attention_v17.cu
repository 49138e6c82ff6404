// Fused causal attention with RoPE, version 17's backward (bf16): the bf16 keeper's (v17's) backward on a device
// where hopper_path_available, beside v15's forward (attention_v15.cu); v9's backward runs elsewhere
// (attention.cu chooses). v12's backward steps (attention_backward_sm90a.cuh, which the lab's v12 shares) with a
// whole head in one warp group and two heads an SM (v14's walk, attention_backward_walk_sm90a.cuh, which the
// lab's v14 shares), the next head's v and dout loaded as soon as the key phase has read them. Compiled for
// sm_90a alone, in the object library of the training library's sm_90a kernels; attention_sm90a_absent.cpp
// stands in without sm_90a code.
//
// Why: v14's backward is latency-bound (Nsight Compute at batch 512 on an H200: two blocks an SM, 0.41 warps
// eligible of 2 a scheduler), and every head starts by waiting for all five of its boxes; two of them can be on
// their way a whole query phase earlier, so they land during the query phase and only q, k and out wait for
// the head's end. The same steps in the same order: dqkv equals v14's (and v12's) bit for bit.
// Budget: shared memory q, k, v, dout 64 KB + dS^T 32 KB + lse, delta 1 KB + two barriers, 98 KB with the
// alignment's spare, two blocks an SM; registers as v12's larger key half (128 live accumulators), 128 threads
// a block.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v17_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV17Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                   bias, args);
}

BackwardWalk g_v17_walk{"v17's backward", "fused_attention_sm90a_backward_configure",
                        fused_attention_v17_backward_kernel, kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_backward_configure() { attention::g_v17_walk.configure(); }

int fused_attention_sm90a_backward_blocks_per_sm() { return attention::grid_blocks_per_sm(attention::g_v17_walk.grid); }

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  attention::g_v17_walk.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda
