// Fused causal attention with RoPE, version 19's forward (bf16, the kernel lab's lab_attention_bf16: rows v19, with
// v17's backward, and v20, with v18's): v15's forward (a whole head in one warp group, three blocks an SM,
// each walking its own heads) with its loads moved so that a head starts with its q and k already in shared
// memory. Compiled for sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without
// sm_90a code.
//
// Why: Nsight Compute's warp samples on v15's forward at batch 512 (H100) put 19.7% on the wait for a head's
// boxes: all three are asked for only when the head starts. Here
//   - q and k come on one barrier, v on another: the head's q and k are prepared and its half 0's scores and
//     softmax run while v is still landing (attend_query_rows's before_pv hook waits for v and prepares it);
//   - once half 1's scores are taken, q and k are free (half 0's out has left q's rows 0 .. 63), so thread 0
//     loads the next head's q and k then, and they land during half 1's softmax, P V and store; half 1's out is
//     staged in v's rows 64 .. 127 instead of q's (v is free once P V has read it);
//   - v alone is loaded at the head's start.
// The products, the softmax and the roundings are v15's, so its GPU test asks for v15's out and lse bit for bit.
// Budget: v15's shared memory and one more barrier; 153 registers (v15: 158; three blocks an SM allow 168),
// with v's bias held across half 0's scores.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_sm90a.cuh"
#include "attention_forward_half_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kV19Threads = 128;  // one warp group
constexpr int kV19BlocksPerSm = 3;

struct V19Smem {
  HeadTiles head;
  std::uint64_t qk_landed, v_landed;  // the q and k boxes' bytes; v's
};
constexpr std::size_t kV19SmemBytes = sizeof(V19Smem) + kAtomBytes;  // room to align the start

// The head `at`'s q and k boxes on qk_landed. One thread.
__device__ inline void load_qk(V19Smem& sm, const CUtensorMap* map, const HeadRows& at) {
  const int row = at.b * at.T, col = at.h * kHeadDim;
  hw::mbarrier_arrive_expect_tx(&sm.qk_landed, 2 * kHeadTileBytes);
  hw::tma_load_2d(sm.head.q, map, &sm.qk_landed, row, col);
  hw::tma_load_2d(sm.head.k, map, &sm.qk_landed, row, at.C + col);
}

// Parts first .. first + count - 1 of the head `at`'s boxes (0 q, 1 k, 2 v) into the L2 ahead of their loads.
// One thread.
__device__ inline void prefetch_parts(const CUtensorMap* map, const HeadRows& at, int first, int count) {
  for (int part = first; part < first + count; ++part)
    hw::tma_prefetch_2d(map, at.b * at.T, part * at.C + at.h * kHeadDim);
}

// The head `at`'s v box on v_landed. One thread.
__device__ inline void load_v(V19Smem& sm, const CUtensorMap* map, const HeadRows& at) {
  hw::mbarrier_arrive_expect_tx(&sm.v_landed, kHeadTileBytes);
  hw::tma_load_2d(sm.head.v, map, &sm.v_landed, at.b * at.T, 2 * at.C + at.h * kHeadDim);
}

__global__ void __launch_bounds__(kV19Threads, kV19BlocksPerSm)
    attention_v19_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  V19Smem& sm = aligned_smem<V19Smem>(raw);
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x), T = args.s.T;
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.qk_landed, 1);
    hw::mbarrier_init(&sm.v_landed, 1);
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  for (int head = static_cast<int>(blockIdx.x), n = 0; head < heads; head += stride, ++n) {
    const HeadRows at = v10_head_rows(head, args.s);
    const bool has_next = head + stride < heads;
    if (threadIdx.x == 0) {
      // Later heads' q and k were asked for during the head before; into the L2 ahead of their loads: the next
      // head's v (loaded at its start) and its q and k at the first head, the q and k of the head after it.
      if (n == 0) load_qk(sm, &qkv_map, at);
      load_v(sm, &qkv_map, at);
      if (has_next) prefetch_parts(&qkv_map, v10_head_rows(head + stride, args.s), n == 0 ? 0 : 2, n == 0 ? 3 : 1);
      if (head + 2 * stride < heads) prefetch_parts(&qkv_map, v10_head_rows(head + 2 * stride, args.s), 0, 2);
    }
    HeadPreparationSm90a<kV19Threads> prep;
    prep.load(bias, args.rope, at);
    hw::mbarrier_wait_or_trap(&sm.qk_landed, n & 1);
    prep.apply_qk(sm.head, T);
    __syncthreads();  // q and k prepared (and fenced) before any wgmma reads them
    // Half 1 runs at any T, as in v15 (under `T > 64` ptxas would serialize the wgmmas).
    attend_query_half<64, false>(sm.head, out, lse, at, args, 0, [&] {
      hw::mbarrier_wait_or_trap(&sm.v_landed, n & 1);
      prep.apply_v(sm.head, T);
      __syncthreads();  // v prepared (and fenced) before P V reads it
    });
    attend_query_half<kMaxT, true>(sm.head, out, lse, at, args, 1, [&] {
      hw::fence_proxy_async_shared();  // half 0's staging stores into q, before TMA writes q again
      __syncthreads();                 // every warp's scores have read q and k
      if (threadIdx.x == 0 && has_next) load_qk(sm, &qkv_map, v10_head_rows(head + stride, args.s));
    });
    hw::fence_proxy_async_shared();  // the staging stores into v, before TMA writes v again
    __syncthreads();                 // v is free
  }
}

int g_v19_grid = 0;  // the persistent forward's grid, set by attention_v19_forward_configure

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v19_forward_configure() {
  // Three blocks of 49 KB need the carveout that gives an SM the most shared memory.
  attention::g_v19_grid = attention::configure_shared_sm90a("v19's forward", attention::attention_v19_forward_kernel,
                                                            attention::kV19Threads, attention::kV19SmemBytes);
}

void attention_v19_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  if (attention::g_v19_grid == 0)
    throw Error("gpt: attention v19's forward runs after attention_v19_forward_configure()");
  const attention::FusedArgs args = attention::fused_args(s, rope);
  const CUtensorMap map = attention::qkv_tensor_map("v19", out, qkv, qkv_bias, rope, s);
  attention::check_aligned16(out, "v19", "out");
  const int blocks = std::min(s.batch * s.heads, attention::g_v19_grid);
  attention::attention_v19_forward_kernel<<<blocks, attention::kV19Threads, attention::kV19SmemBytes, stream>>>(
      map, out, lse, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::lab
