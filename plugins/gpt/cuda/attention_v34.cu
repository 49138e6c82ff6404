// Fused causal attention with RoPE, version 34 (bf16): the bf16 keeper's (v34's) forward and backward on a device where
// hopper_path_available; v9's run elsewhere (attention.cu chooses, and runs v9's forward too where a batch's heads are
// too few for this forward's persistent grid). The forward is v29's: v15's walk (attention_forward_walk_sm90a.cuh,
// which the lab's v15, v22, v23, v24, v26 and v28 share) with each thread's bias and RoPE factors fetched by 16-byte
// loads and each head's q loaded a head ahead into a tile of its own (q_ahead), so that a head waits for its k and v
// alone: a whole head in one warp group, three blocks an SM. The backward is v26's with both query halves' dq
// products issued at once (dq_together): v18's walk (attention_backward_walk_sm90a.cuh, which the lab's v14, v17,
// v18, v21, v22, v25 to v28, v30, v31, v35 and v36 share) on v12's backward steps (attention_backward_sm90a.cuh): a
// whole head in one warp group, two heads an SM, the next head's v and dout loaded as soon as the key phase has read
// them, each head's lse held across the wait for its boxes and asked of the L2 ahead, its bias and RoPE factors
// fetched by 16-byte loads, no head's boxes asked of the L2 ahead of their loads, and half 1's dq computed while half
// 0's is stored. Compiled for sm_90a alone, in the object library of the training library's sm_90a kernels;
// attention_sm90a_absent.cpp stands in without sm_90a code.
//
// Why: in v26's backward each of a head's 15 products waited for the one before; with the two dq products issued
// together the backward took 295-297 us a layer against v26's 301-302 (H100, batch 512, back to back).
// The same loads and the same arithmetic: out, lse and dqkv equal v26's and v29's bit for bit.
// Budget: forward, shared memory q, k, v and the next head's q 64 KB + two barriers, 65 KB with the alignment's
// spare, 167 registers (ptxas, no spills), three blocks an SM; backward, shared memory q, k, v, dout 64 KB + dS^T
// 32 KB + lse, delta 1 KB + two barriers, 98 KB with the alignment's spare, 252 registers, two blocks an SM; 128
// threads a block. The trainers' backward is v34's summing dqkv's columns as it stores them (qkv_bias_sums, for
// qkv's bias gradient): 6 KB more shared memory, 104 KB, 254 registers, still two blocks an SM.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "column_reduce.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    fused_attention_v29_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                       const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV29ForwardWalk>(aligned_smem<V29Smem>(raw), &qkv_map, out, lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v34_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV34Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

// v34's walk summing dqkv's columns as it stores them (kV34QkvBiasWalk): the trainers' backward, with qkv's bias
// gradient, on this path (lab_attention_qkv_bias_bf16's v3).
__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v34_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                                 const __grid_constant__ CUtensorMap dout_map,
                                                 const __grid_constant__ CUtensorMap out_map, bf16* dqkv,
                                                 const float* lse, const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV34QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                    lse, bias, args);
}

ForwardWalk g_v29_forward{"v29's forward", "fused_attention_sm90a_forward_configure",
                          fused_attention_v29_forward_kernel, kV29SmemBytes};
BackwardWalk g_v34_backward{"v34's backward", "fused_attention_sm90a_backward_configure",
                            fused_attention_v34_backward_kernel, kV17SmemBytes};
BackwardWalk g_qkv_bias_backward{"v34's backward with qkv's bias sums", "fused_attention_sm90a_backward_configure",
                                 fused_attention_v34_qkv_bias_backward_kernel, kQkvBiasSmemBytes, true};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_forward_configure() { attention::g_v29_forward.configure(); }

int fused_attention_sm90a_forward_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_v29_forward.grid);
}
int fused_attention_sm90a_forward_grid() { return attention::g_v29_forward.grid; }

void fused_attention_sm90a_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                   const AttentionShape& s, cudaStream_t stream) {
  attention::g_v29_forward.launch(out, lse, qkv, qkv_bias, rope, s, stream);
}

void fused_attention_sm90a_backward_configure() {
  attention::g_v34_backward.configure();
  attention::g_qkv_bias_backward.configure();
}

int fused_attention_sm90a_backward_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_v34_backward.grid);
}

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  attention::g_v34_backward.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

int fused_attention_sm90a_backward_and_bias_gradient_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_qkv_bias_backward.grid);
}

void fused_attention_sm90a_backward_and_bias_gradient(bf16* dqkv, float* dbias, float* partials, float*,
                                                     const bf16* dout, const bf16* out, const float* lse,
                                                     const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                                     const AttentionShape& s, cudaStream_t stream) {
  attention::g_qkv_bias_backward.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream, partials);
  const int cols = 3 * s.channels();
  column_finish(ColumnOutputs{{dbias}, cols}, partials, s.batch, cols, stream);
}

}  // namespace roofbench::gpt::cuda
