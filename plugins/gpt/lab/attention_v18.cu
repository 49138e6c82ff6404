// Fused causal attention with RoPE, version 18's backward (bf16, the kernel lab's lab_attention_bf16: rows v18, on
// v15's forward (v9's where a batch's heads are too few for v15's grid), and v20, on v19's; the keeper's until v22):
// v17's walk (attention_backward_walk_sm90a.cuh, which the keeper's backward (v26's) shares) with each head's lse held
// in a register across the wait for its boxes, scaled into shared memory after it, and the next head's lse asked of the
// L2 with its boxes. Compiled for sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without
// sm_90a code.
//
// Why: in v17's walk every head waited on the lse's load from global memory, which the L2 had not seen, before
// it waited for its boxes: Nsight Compute's warp samples on v17's backward at batch 512 (H100) put 8.5% on that
// scaling right after the load. The same steps in the same order: dqkv equals v17's (and v14's) bit for bit.
// Budget: v17's shared memory (98 KB), two blocks an SM; v17's registers and one float a thread across the wait.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v18_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV18Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

BackwardWalk g_v18_walk{"v18's backward", "walk_configure<18>", attention_v18_backward_kernel,
                        kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v18_walks() {
  static constexpr VersionWalk kWalks[] = {version_walk<&attention::g_v18_walk>(18)};
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
