// Fused causal attention with RoPE, version 38 (bf16): the bf16 keeper's (v38's) forward and backward on a device where
// hopper_path_available; v9's run elsewhere (attention.cu chooses, and runs v9's forward too where a batch's heads are
// too few for this forward's persistent grid). The forward is v29's: v15's walk (attention_forward_walk_sm90a.cuh,
// which the lab's v15, v22, v23, v24, v26 and v28 share) with each thread's bias and RoPE factors fetched by 16-byte
// loads and each head's q loaded a head ahead into a tile of its own (q_ahead), so that a head waits for its k and v
// alone: a whole head in one warp group, three blocks an SM. The backward is v34's (v26's with both query halves' dq
// products issued at once) with dk's and dq's RoPE factors fetched while the tensor cores compute dk and dq, from the
// table's lane-ordered copy in 16-byte loads: v18's walk (attention_backward_walk_sm90a.cuh, which the lab's
// backwards from v14 on share) on v12's backward steps (attention_backward_sm90a.cuh): a whole head in one warp
// group, two heads an SM, the next head's v and dout loaded as soon as the key phase has read them, each head's lse
// held across the wait for its boxes. Compiled for sm_90a alone, in the object library of the training library's
// sm_90a kernels; attention_sm90a_absent.cpp stands in without sm_90a code.
//
// Why: three first uses of the RoPE factors, each a 4-byte load waiting on the L2 after a product, held about 9% of
// v26's backward warp samples (Nsight Compute, H100, batch 512); fetched under the products, 16 bytes a load, the
// layer took 381 us against v34's 413 (H100, batch 512, back to back). The same arithmetic: out, lse and dqkv equal
// v29's bit for bit.
// Budget: forward, shared memory q, k, v and the next head's q 64 KB + two barriers, 65 KB with the alignment's
// spare, 167 registers (ptxas, no spills), three blocks an SM; backward, shared memory q, k, v, dout 64 KB + dS^T
// 32 KB + lse, delta 1 KB + two barriers, 98 KB with the alignment's spare, 255 registers, no spills, two blocks an
// SM; 128 threads a block. The trainers' backward is v38's summing dqkv's columns as it stores them (qkv_bias_sums,
// for qkv's bias gradient): 6 KB more shared memory, 104 KB, 255 registers and 8 bytes spilled, still two blocks an
// SM. Both read the RoPE table's lane-ordered copy (RopeTable::lane_ordered).
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
    fused_attention_v29_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                       const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV29ForwardWalk>(aligned_smem<V29Smem>(raw), &qkv_map, out, lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v38_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV38Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

// v38's walk summing dqkv's columns as it stores them (kV38QkvBiasWalk): the trainers' backward, with qkv's bias
// gradient, on this path (lab_attention_qkv_bias_bf16's v5).
__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v38_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                                 const __grid_constant__ CUtensorMap dout_map,
                                                 const __grid_constant__ CUtensorMap out_map, bf16* dqkv,
                                                 const float* lse, const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV38QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

ForwardWalk g_v29_forward{"v29's forward", "fused_attention_sm90a_forward_configure",
                          fused_attention_v29_forward_kernel, kV29SmemBytes};
BackwardWalk g_v38_backward = policy_walk<kV38Walk>("v38's backward", "fused_attention_sm90a_backward_configure",
                                                   fused_attention_v38_backward_kernel, kV17SmemBytes);
BackwardWalk g_qkv_bias_backward =
    policy_walk<kV38QkvBiasWalk>("v38's backward with qkv's bias sums", "fused_attention_sm90a_backward_configure",
                                 fused_attention_v38_qkv_bias_backward_kernel, kQkvBiasSmemBytes);

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
  attention::g_v38_backward.configure();
  attention::g_qkv_bias_backward.configure();
}

int fused_attention_sm90a_backward_blocks_per_sm() {
  return attention::grid_blocks_per_sm(attention::g_v38_backward.grid);
}

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  attention::g_v38_backward.launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
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
