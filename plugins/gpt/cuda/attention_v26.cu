// Fused causal attention with RoPE, version 26 (bf16): the bf16 keeper's (v26's) forward and backward on a device
// where hopper_path_available; v9's run elsewhere (attention.cu chooses, and runs v9's forward too where a batch's
// heads are too few for this forward's persistent grid). v22's kernels without the L2 prefetch of the next head's
// boxes (the walks' l2_prefetch, tma_prefetch_2d): each head's boxes are read from DRAM by their own TMA loads
// alone. The forward is v15's walk (attention_forward_walk_sm90a.cuh, which the lab's v15, v22, v23 and v24
// share) with each thread's bias and RoPE factors fetched by 16-byte loads: a whole head in one warp group, three
// blocks an SM. The backward is v18's walk (attention_backward_walk_sm90a.cuh, which the lab's v14, v17, v18, v21,
// v22 and v25 share) on v12's backward steps (attention_backward_sm90a.cuh): a whole head in one warp group, two
// heads an SM, the next head's v and dout loaded as soon as the key phase has read them, each head's lse held
// across the wait for its boxes and asked of the L2 ahead, its bias and RoPE factors fetched by 16-byte loads.
// Compiled for sm_90a alone, in the object library of the training library's sm_90a kernels;
// attention_sm90a_absent.cpp stands in without sm_90a code.
//
// Why: v22's kernels read 781 MiB of DRAM a layer at batch 512 (H100, the counters pass) against v9's 514, which
// fetch each head once and ask the L2 for nothing ahead; v26 reads 515 MiB, so the lines prefetched a head ahead
// were the second reads. Without the prefetch the layer took 5-6% less time.
// The same loads into the same tiles: out, lse and dqkv equal v22's bit for bit.
// Budget: forward, shared memory q, k, v 48 KB + the barrier, 49 KB with the alignment's spare, 167 registers
// (ptxas, no spills), three blocks an SM; backward, shared memory q, k, v, dout 64 KB + dS^T 32 KB + lse, delta
// 1 KB + two barriers, 98 KB with the alignment's spare, 254 registers, two blocks an SM; 128 threads a block.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    fused_attention_v26_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                       const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV26ForwardWalk>(aligned_smem<V15Smem>(raw), &qkv_map, out, lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v26_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV26Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

ForwardWalk g_v26_forward{"v26's forward", "fused_attention_sm90a_forward_configure",
                          fused_attention_v26_forward_kernel};
BackwardWalk g_v26_backward{"v26's backward", "fused_attention_sm90a_backward_configure",
                            fused_attention_v26_backward_kernel, kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_forward_configure() { attention::g_v26_forward.configure(); }

int fused_attention_sm90a_forward_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_v26_forward.grid);
}
int fused_attention_sm90a_forward_grid() { return attention::g_v26_forward.grid; }

void fused_attention_sm90a_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                   const AttentionShape& s, cudaStream_t stream) {
  attention::g_v26_forward.launch(out, lse, qkv, qkv_bias, rope, s, stream);
}

void fused_attention_sm90a_backward_configure() { attention::g_v26_backward.configure(); }

int fused_attention_sm90a_backward_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_v26_backward.grid);
}

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  attention::g_v26_backward.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda
