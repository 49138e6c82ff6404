// Fused causal attention with RoPE, version 17's backward (bf16, the kernel lab's lab_attention_bf16: rows v17, on
// v15's or v9's forward, and v19, on v19's): v14's walk (attention_backward_walk_sm90a.cuh, which the keeper's backward
// (v26's) shares) with the next head's v and dout loaded as soon as the key phase has read them, so they land during
// the query phase and only q, k and out wait for the head's end. Compiled for sm_90a alone, in the lab's sm_90a
// library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: v14's backward is latency-bound (Nsight Compute at batch 512 on an H200: two blocks an SM, 0.41 warps
// eligible of 2 a scheduler), and every head starts by waiting for all five of its boxes; two of them can be on
// their way a whole query phase earlier. The same steps in the same order: dqkv equals v14's bit for bit.
// Budget: v14's shared memory and one more barrier (8 bytes), two blocks an SM; v14's registers.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v17_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV17Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

BackwardWalk g_v17_walk{"v17's backward", "walk_configure<17>", attention_v17_backward_kernel,
                        kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v17_walks() {
  static constexpr VersionWalk kWalks[] = {version_walk<&attention::g_v17_walk>(17)};
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
