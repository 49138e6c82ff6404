// Fused causal attention with RoPE, versions 30's and 31's backwards (bf16, the kernel lab's lab_attention_bf16:
// rows v30 and v31, on the keeper's forward, v29's):
//   - v30: v26's walk (attention_backward_walk_sm90a.cuh) with the next head's out loaded into dS^T's first tile
//     as soon as query half 0 has read that tile (a block barrier), on the early barrier with its v and dout
//     (out_mid_query), instead of with the late boxes when the head ends: out lands during query half 1, and
//     only q and k wait for the head's end.
//   - v31: v30 with that load issued by thread 0 once query half 0's dq product has completed, with no block
//     barrier between the query halves (out_after_dq).
// Compiled for sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: in v26's backward (Nsight Compute, H100, batch 512) 11.5% of the warp samples wait for the late boxes, q,
// k and out (48 KB), asked for only when the head before has ended; out is read by the preparation alone (for
// delta), and its tile is free half a phase earlier. The same loads into the same tiles, so its GPU test asks for
// the keeper's dqkv bit for bit. v31 drops v30's block barrier between the halves, there only to know the tile read.
// Budget: v26's shared memory (98 KB) and registers, two blocks an SM; v30 one more block barrier a head.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v30_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV30Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v31_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV31Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

BackwardWalk g_v30_walk{"v30's backward", "walk_configure<30>", attention_v30_backward_kernel,
                        kV17SmemBytes};
BackwardWalk g_v31_walk{"v31's backward", "walk_configure<31>", attention_v31_backward_kernel,
                        kV17SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v30_walks() {
  static constexpr VersionWalk kWalks[] = {
      version_walk<&attention::g_v30_walk>(30),
      version_walk<&attention::g_v31_walk>(31),
  };
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
