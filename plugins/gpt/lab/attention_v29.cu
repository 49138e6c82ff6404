// Fused causal attention with RoPE, version 29's forward (bf16, the kernel lab's lab_attention_bf16: row v29, with
// v26's backward): v26's forward walk (attention_forward_walk_sm90a.cuh) with each head's q loaded a head ahead,
// into a tile of its own (q_ahead, V29Smem), so that a head waits for its k and v alone; the preparation reads q
// from that tile and writes it, prepared, into the head's. Compiled for sm_90a alone, in the lab's sm_90a
// library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: in v26's forward (Nsight Compute, H100, batch 512) 18.8% of the warp samples wait for the head's three
// boxes, all asked for when the head starts; three blocks of v15's 49 KB leave about 80 KB of an SM's shared
// memory unused, room for a fourth tile a block. Unlike the lab's v19 (q and k loaded during half 1 of the head
// before, out staged in v) nothing else moves, and unlike v22's and v28's L2 prefetches the early bytes land in
// shared memory, where nothing evicts them.
// The same values and roundings: out and lse equal v26's bit for bit.
// Budget: shared memory q, k, v and the next q 64 KB + two barriers, 65 KB with the alignment's spare, three
// blocks an SM; v26's registers.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    attention_v29_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads<kV29ForwardWalk>(aligned_smem<V29Smem>(raw), &qkv_map, out, lse, bias, args);
}

ForwardWalk g_v29_forward{"v29's forward", "attention_v29_forward_configure", attention_v29_forward_kernel,
                          kV29SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v29_forward_configure() {
  attention::g_v29_forward.configure();
  fused_attention_v9_configure();
}

void attention_v29_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v29_forward.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda::lab
