// Fused causal attention with RoPE, version 19's forward (bf16, the kernel lab's lab_attention_bf16: row v19, with
// the keeper's backward): v15's forward (a whole head in one warp group, three blocks an SM, each walking its own
// heads) with its loads moved so that a head starts with its q and k already in shared memory. Compiled for
// sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: Nsight Compute's warp samples on v15's forward at batch 512 (H100) put 19.7% on the wait for a head's
// boxes: all three are asked for only when the head starts. Here
//   - q and k come on one barrier, v on another: the head's q and k are prepared and its half 0's scores and
//     softmax run while v is still landing (attend_query_rows's before_pv hook waits for v and prepares it);
//   - once half 1's scores are taken, q and k are free (half 0's out has left q's rows 0 .. 63), so thread 0
//     loads the next head's q and k then, and they land during half 1's softmax, P V and store; half 1's out is
//     staged in v's rows 64 .. 127 instead of q's (v is free once P V has read it);
//   - v alone is loaded at the head's start.
// The products, the softmax and the roundings are v15's: out and lse equal v15's bit for bit.
// Budget: v15's shared memory and one more barrier; 154 registers (v15: 158; three blocks an SM allow 168),
// with v's bias held across half 0's scores.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_sm90a.cuh"
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

// The head `at`'s v box on v_landed. One thread.
__device__ inline void load_v(V19Smem& sm, const CUtensorMap* map, const HeadRows& at) {
  hw::mbarrier_arrive_expect_tx(&sm.v_landed, kHeadTileBytes);
  hw::tma_load_2d(sm.head.v, map, &sm.v_landed, at.b * at.T, 2 * at.C + at.h * kHeadDim);
}

// Query half `half` as v15 takes it (scores, softmax, P V with v read MN-major in place, then out and lse), with
// before_pv between the softmax and P V, and the out staged in rows 64 half .. of q (v15's place) or, kStageInV,
// of v, once every warp's P V has read it.
template <int kKeys, bool kStageInV, typename BeforePv>
__device__ __forceinline__ void attend_query_half(HeadTiles& tiles, bf16* out, float* lse, const HeadRows& at,
                                                  const FusedArgs& args, int half, BeforePv before_pv) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, row0 = 64 * half + kRows * warp;
  AttendedRows r;
  attend_query_rows<kKeys, 1>(r, tiles, [&](int ks) { return mn_major(tiles.v, ks); }, 64 * half, args, before_pv);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + lane / 4 + 8 * h;
    if (lane % 4 == 0 && row < args.s.T) lse[at.stats_at(row, args.s.heads)] = r.row_lse[h];
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      r.o[4 * j + 2 * h] *= r.inv_sum[h];
      r.o[4 * j + 2 * h + 1] *= r.inv_sum[h];
    }
  }
  if constexpr (kStageInV) __syncthreads();  // every warp's P V has read v
  store_head_block_staged(out, SwizzledStage{kStageInV ? tiles.v : tiles.q, row0}, as_tiles(r.o), 1.0f, false,
                          args.rope, row0, args.s.T, lane, [&](int t) { return at.rows_at(t); });
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
      if (n == 0) {  // later heads' q and k were asked for during the head before
        load_qk(sm, &qkv_map, at);
        if (has_next) {
          const HeadRows next = v10_head_rows(head + stride, args.s);
          for (int part = 0; part < 2; ++part)
            hw::tma_prefetch_2d(&qkv_map, next.b * next.T, part * next.C + next.h * kHeadDim);
        }
      }
      load_v(sm, &qkv_map, at);
      // Into the L2 ahead of their loads: the next head's v (loaded at its start) and q and k of the head after
      // it (loaded during the next head's half 1).
      if (has_next) {
        const HeadRows next = v10_head_rows(head + stride, args.s);
        hw::tma_prefetch_2d(&qkv_map, next.b * next.T, 2 * next.C + next.h * kHeadDim);
      }
      if (head + 2 * stride < heads) {
        const HeadRows after = v10_head_rows(head + 2 * stride, args.s);
        for (int part = 0; part < 2; ++part)
          hw::tma_prefetch_2d(&qkv_map, after.b * after.T, part * after.C + after.h * kHeadDim);
      }
    }
    HeadPreparationSm90a<kV19Threads> prep;
    prep.load(bias, args.rope, at);
    wait_or_trap(&sm.qk_landed, n & 1);
    prep.apply_qk(sm.head, T);
    __syncthreads();  // q and k prepared (and fenced) before any wgmma reads them
    // Half 1 runs at any T, as in v15 (under `T > 64` ptxas would serialize the wgmmas).
    attend_query_half<64, false>(sm.head, out, lse, at, args, 0, [&] {
      wait_or_trap(&sm.v_landed, n & 1);
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
