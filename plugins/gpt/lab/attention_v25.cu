// Fused causal attention with RoPE, version 25's backward (bf16, the kernel lab's lab_attention_bf16: row v25, on
// v22's forward): v22's walk (attention_backward_walk_sm90a.cuh) with dq stored from the registers instead of
// through q's rows, so that q's tile is free once the key phase has ended and the next head's q loads with its v
// and dout during the query phase: only k and out wait for the head's end. Compiled for sm_90a alone, in the lab's
// sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: with its read-only loads 16 bytes wide, 14% of v22's backward warp samples (H100, batch 512) wait for
// the head's late boxes, q, k and out, asked for only when the head before has ended. The same values and
// roundings, so its GPU test asks for v22's dqkv bit for bit.
// Budget: v22's shared memory (98 KB), two blocks an SM; dq's 4-byte stores in place of its staging.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v25_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV25Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

BackwardWalk g_v25_walk{"v25's backward", "walk_configure<25>", attention_v25_backward_kernel,
                        kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v25_walks() {
  static constexpr VersionWalk kWalks[] = {version_walk<&attention::g_v25_walk>(25)};
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
