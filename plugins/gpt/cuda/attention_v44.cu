// Fused causal attention with RoPE, version 44 (bf16): the bf16 keeper's (v44's) forward and backward on a device where
// hopper_path_available; v9's run elsewhere (attention.cu chooses, and runs v9's forward too where a batch's heads are
// too few for this forward's persistent grid). The forward is v29's: v15's walk (attention_forward_walk_sm90a.cuh,
// which the lab's v15, v22, v23, v24, v26 and v28 share) with each thread's bias and RoPE factors fetched by 16-byte
// loads and each head's q loaded a head ahead into a tile of its own (q_ahead), so that a head waits for its k and v
// alone: a whole head in one warp group, three blocks an SM. The backward is v43's walk
// (attention_backward_query_first_sm90a.cuh): each row's delta taken from its scores in a query phase that runs first
// and computes dq, so out is never read, then v38's key phase (its RoPE factors fetched under the products from the
// table's lane-ordered copy, 16 bytes a load) with a masked chunk's exponents dropped by a select, as v39's, storing
// no dS^T: a whole head in one warp group, two heads an SM, each head's dout loaded a whole head ahead. Compiled for
// sm_90a alone, in the object library of the training library's sm_90a kernels; attention_sm90a_absent.cpp stands in
// without sm_90a code.
//
// Why: at batch 512 v38's backward moved its bytes at about the H100's measured read roof; v44 reads no out (16 KB of
// a head's 128 KB) and, without dS^T's stores, holds the select that spilled beside v38's key phase: 366 against v38's
// 378 us a layer (H100, batch 512, back to back). Out and lse equal v29's bit for bit; dqkv is v43's, within bf16's
// rounding of v38's (delta in fp32 from P dP, not from the bf16 out).
// Budget: forward, shared memory q, k, v and the next head's q 64 KB + two barriers, 65 KB with the alignment's
// spare, 167 registers (ptxas, no spills), three blocks an SM; backward, shared memory q, k, v 48 KB, two dout tiles
// 32 KB, dq's stage 16 KB, lse and delta 1 KB and three barriers, 98 KB with the alignment's spare, 248 registers, no
// spills, two blocks an SM; 128 threads a block. The trainers' backward is v44's summing dqkv's columns as it stores
// them (qkv_bias_sums, for qkv's bias gradient): 6 KB more shared memory, 104 KB, 252 registers, no spills, still two
// blocks an SM. Both read the RoPE table's lane-ordered copy (RopeTable::lane_ordered).
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_query_first_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
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
    fused_attention_v44_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads_query_first<V44KeyPhase::kValue>(aligned_smem<V43Smem>(raw),
                                                       V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse, bias, args);
}

// v44's walk summing dqkv's columns as it stores them: the trainers' backward, with qkv's bias gradient, on this path
// (lab_attention_qkv_bias_bf16's v10).
__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v44_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                                 const __grid_constant__ CUtensorMap dout_map,
                                                 const __grid_constant__ CUtensorMap out_map, bf16* dqkv,
                                                 const float* lse, const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads_query_first<V44KeyPhase::kValue>(aligned_smem<V43QkvBiasSmem>(raw),
                                                       V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse, bias, args);
}

ForwardWalk g_v29_forward{"v29's forward", "fused_attention_sm90a_forward_configure",
                          fused_attention_v29_forward_kernel, kV29SmemBytes};
BackwardWalk g_v44_backward = query_first_walk<V44KeyPhase, V43Smem>(
    "v44's backward", "fused_attention_sm90a_backward_configure", fused_attention_v44_backward_kernel);
BackwardWalk g_qkv_bias_backward = query_first_walk<V44KeyPhase, V43QkvBiasSmem>(
    "v44's backward with qkv's bias sums", "fused_attention_sm90a_backward_configure",
    fused_attention_v44_qkv_bias_backward_kernel);

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
  attention::g_v44_backward.configure();
  attention::g_qkv_bias_backward.configure();
}

int fused_attention_sm90a_backward_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_v44_backward.grid);
}

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  attention::g_v44_backward.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

int fused_attention_sm90a_backward_and_bias_gradient_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_qkv_bias_backward.grid);
}

void fused_attention_sm90a_backward_and_bias_gradient(bf16* dqkv, float* dbias, float* partials, float*,
                                                     const bf16* dout, const bf16* out, const float* lse,
                                                     const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                                     const AttentionShape& s, cudaStream_t stream) {
  attention::g_qkv_bias_backward.launch_with_bias_gradient(dqkv, dbias, partials, dout, out, lse, qkv, qkv_bias, rope,
                                                          s, stream);
}

}  // namespace roofbench::gpt::cuda
