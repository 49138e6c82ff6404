// Fused causal attention with RoPE, version 21's backward (bf16, the kernel lab's lab_attention_bf16: row v21, on
// v15's or v9's forward): v18's walk (attention_backward_walk_sm90a.cuh) with each query half's RoPE factors,
// which rotate dq back to the raw qkv's frame, fetched while the tensor cores compute dq. Compiled for sm_90a
// alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: Nsight Compute's warp samples on v17's backward at batch 512 (H100) put 5.6% on multiplies in dq's
// stores that wait for those factors' loads, issued only once dq is ready. The same steps in the same order, so
// its GPU test asks for v17's dqkv bit for bit.
// Budget: v18's shared memory; 32 more floats a thread live across the dq product (the query phase, where fewer
// registers are live than in the key phase).
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v21_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV21Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

BackwardWalk g_v21_walk{"v21's backward", "walk_configure<21>", attention_v21_backward_kernel,
                        kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v21_walks() {
  static constexpr VersionWalk kWalks[] = {version_walk<&attention::g_v21_walk>(21)};
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
