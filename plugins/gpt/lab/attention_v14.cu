// Fused causal attention with RoPE, version 14's backward (bf16, the kernel lab's lab_attention_bf16: rows v14, on v9's
// forward, and v16, on v15's or v9's): v12's backward steps (attention_backward_sm90a.cuh) with a whole head in one
// warp group and two heads an SM, each block walking its own heads (persistent: blockIdx.x, then + gridDim.x, ...;
// attention_backward_walk_sm90a.cuh, which the keeper's backward (v26's) shares). Compiled for sm_90a alone, in the
// lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: Nsight Compute on v12's backward at batch 512 (H100) shows it latency-bound: 8 warps an SM, 0.39 of 2 a
// scheduler eligible, issue slots 31% busy, DRAM 49%. Its two warp groups split each head and meet at three
// block barriers a head, and the split is uneven (9 and 6 of the 15 products), so one group idles at each
// barrier. Here a block is one warp group and two blocks share an SM, so the SM holds as many warps as v12's
// but no warp waits on another head's. The steps are v12's, in the same order per element: dqkv equals v12's
// (and v13's) bit for bit.
// Budget: shared memory q, k, v, dout 64 KB + dS^T 32 KB + lse, delta 1 KB + the barrier, 98 KB with the
// alignment's spare, two blocks an SM; registers as v12's larger key half (128 live accumulators), 128 threads
// a block.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v14_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV14Walk>(aligned_smem<V14Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                    bias, args);
}

BackwardWalk g_v14_walk{"v14's backward", "walk_configure<14>", attention_v14_backward_kernel,
                        kV14SmemBytes};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v14_walks() {
  static constexpr VersionWalk kWalks[] = {version_walk<&attention::g_v14_walk>(14)};
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
