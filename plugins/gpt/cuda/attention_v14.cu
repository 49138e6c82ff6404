// Fused causal attention with RoPE, version 14's backward (bf16): the bf16 keeper's (v16's) backward on a device
// where hopper_path_available, beside v15's forward (attention_v15.cu); v9's backward runs elsewhere
// (attention.cu chooses). v12's backward steps (attention_backward_sm90a.cuh, which the lab's v12 shares) with a
// whole head in one warp group and two heads an SM. Compiled for sm_90a alone, in the object library of the
// training library's sm_90a kernels; attention_sm90a_absent.cpp stands in without sm_90a code.
//
// Why: Nsight Compute on v12's backward at batch 512 (H100) shows it latency-bound: 8 warps an SM, 0.39 of 2 a
// scheduler eligible, issue slots 31% busy, DRAM 49%. Its two warp groups split each head and meet at three
// block barriers a head, and the split is uneven (9 and 6 of the 15 products), so one group idles at each
// barrier. Here a block is one warp group walking its own heads (persistent: blockIdx.x, then + gridDim.x, ...)
// and two blocks share an SM, so the SM holds as many warps as v12's but no warp waits on another head's:
//   - thread 0 loads the head's q, k, v (the raw qkv map), dout and out as five 128 x 64 boxes on the block's
//     mbarrier, out into the dS^T tiles (read for delta before the key phase writes dS^T there), then asks the
//     L2 for the next head's boxes (tma_prefetch_2d), so that head's load reads the L2; every thread fetches the
//     head's bias, RoPE factors and lse while the boxes fly;
//   - the group prepares the head and takes delta, runs key half 0 (128 queries) and key half 1 (64), then,
//     after a barrier, query half 0 (64 keys) and query half 1 (128): all 15 products;
//   - a barrier ends the head; the next head's boxes land in the same tiles.
// Budget: shared memory q, k, v, dout 64 KB + dS^T 32 KB + lse, delta 1 KB + the barrier, 98 KB with the
// alignment's spare, two blocks an SM; registers as v12's larger key half (128 live accumulators), 128 threads
// a block. The steps are v12's, in the same order per element: dqkv equals v12's (and v13's) bit for bit.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kV14Threads = 128;  // one warp group
constexpr int kV14BlocksPerSm = 2;

// v14's shared memory, from the first 1024-byte aligned address of the dynamic allocation.
struct V14Smem {
  HeadTiles head;
  unsigned char dout[kHeadTileBytes];
  unsigned char ds_t[2][kHeadTileBytes];  // dS^T; out's tile lands in the first until delta is taken
  float lse[kMaxT], delta[kMaxT];         // lse in log2 units
  std::uint64_t full;                     // the head's five boxes' bytes
};
constexpr std::size_t kV14SmemBytes = sizeof(V14Smem) + kAtomBytes;  // room to align the start

// The kernel's tensor maps (its __grid_constant__ parameters): the raw qkv [N, 3C], dout and out [N, C].
struct V14Maps {
  const CUtensorMap *qkv, *dout, *out;
};

// The head `at`'s five boxes, out into dS^T's first tile, completing on the block's barrier. One thread.
__device__ inline void load_v14_head(V14Smem& sm, const V14Maps& maps, const HeadRows& at) {
  load_head(sm.head, maps.qkv, &sm.full, at, 2 * kHeadTileBytes);
  hw::tma_load_2d(sm.dout, maps.dout, &sm.full, at.b * at.T, at.h * kHeadDim);
  hw::tma_load_2d(sm.ds_t[0], maps.out, &sm.full, at.b * at.T, at.h * kHeadDim);
}

// The head `at`'s five boxes into the L2 ahead of load_v14_head. One thread.
__device__ inline void prefetch_v14_head(const V14Maps& maps, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
#pragma unroll
  for (int part = 0; part < 3; ++part) hw::tma_prefetch_2d(maps.qkv, row, part * at.C + col);
  hw::tma_prefetch_2d(maps.dout, row, col);
  hw::tma_prefetch_2d(maps.out, row, col);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    fused_attention_v14_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                        const __grid_constant__ CUtensorMap dout_map,
                                        const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                        const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  V14Smem& sm = aligned_smem<V14Smem>(raw);
  const V14Maps maps{&qkv_map, &dout_map, &out_map};
  const BackwardHead h{sm.head, sm.dout, sm.ds_t, sm.lse, sm.delta};
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x), T = args.s.T;
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.full, 1);
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  for (int head = static_cast<int>(blockIdx.x), n = 0; head < heads; head += stride, ++n) {
    const HeadRows at = v10_head_rows(head, args.s);
    if (threadIdx.x == 0) {
      load_v14_head(sm, maps, at);
      if (head + stride < heads) prefetch_v14_head(maps, v10_head_rows(head + stride, args.s));
    }
    HeadPreparationSm90a<kV14Threads> prep;
    prep.load(bias, args.rope, at);
    load_lse_log2<kV14Threads>(sm.lse, lse, at, args.s.heads);
    wait_or_trap(&sm.full, n & 1);
    prepare_backward_head(h, sm.ds_t[0], prep, T);
    __syncthreads();  // every chunk prepared, delta taken: out's tile may take dS^T
    backward_key_rows<kMaxT>(h, dqkv, at, args, 0, 0);
    if (T > 64) backward_key_rows<kMaxT - 64>(h, dqkv, at, args, 1, 0);  // else keys 64 .. are all padding
    __syncthreads();  // every dS^T stored (and fenced)
    backward_query_rows<64>(h, dqkv, at, args, 0);
    if (T > 64) backward_query_rows<kMaxT>(h, dqkv, at, args, 1);  // else queries 64 .. are all padding
    hw::fence_proxy_async_shared();  // this head's ordinary stores to the tiles, before TMA writes them again
    __syncthreads();                 // the tiles, lse and delta are free
  }
}

// The persistent backward's grid: as many blocks as fit at once. Set by
// fused_attention_sm90a_backward_configure.
int g_v14_grid = 0;

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_backward_configure() {
  // Two blocks of 98 KB need the carveout that gives an SM the most shared memory.
  attention::g_v14_grid = attention::configure_shared_sm90a(
      "v14's backward", attention::fused_attention_v14_backward_kernel, attention::kV14Threads,
      attention::kV14SmemBytes);
}

int fused_attention_sm90a_backward_blocks_per_sm() { return attention::grid_blocks_per_sm(attention::g_v14_grid); }

void fused_attention_sm90a_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                    cudaStream_t stream) {
  if (attention::g_v14_grid == 0)
    throw Error("gpt: attention v14's backward runs after fused_attention_sm90a_backward_configure()");
  const attention::FusedArgs args = attention::fused_args(s, rope);
  const attention::BackwardTensorMaps maps =
      attention::backward_tensor_maps("v14 backward", dqkv, dout, out, qkv, qkv_bias, rope, s);
  const int blocks = std::min(s.batch * s.heads, attention::g_v14_grid);
  attention::fused_attention_v14_backward_kernel<<<blocks, attention::kV14Threads, attention::kV14SmemBytes,
                                                   stream>>>(maps.qkv, maps.dout, maps.out, dqkv, lse, qkv_bias,
                                                             args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
