// Fused causal attention with RoPE, version 9 (bf16): the bf16 keeper's (v44's, R2 and up) forward and
// backward on a device without the sm_90a path (attention_v44.cu's there): v4's products
// (attention_mma.cuh: mma.sync m16n8k16, the scores in registers, warp w on the row blocks w and 7 - w, a
// backward without atomics) with the rows moved by cp.async (attention_rows.cuh). v4's blocks spent their
// lives waiting on memory: scalar bias and RoPE loads (8.8 of 32 bytes used per loaded sector) with little to
// overlap them. The lab's figures per version, the retired v4 .. v6 among them, are in plugins/gpt/README.md;
// v7, whose forward this is and whose backward this one's is made from, is in plugins/gpt/lab/attention_v7.cu.
//
//   forward (v7's kernel): one block of four warps per head, one buffer, four blocks (16 warps) per SM: the
//     other blocks hide a block's loads. The raw q, k, v arrive by cp.async (16 bytes per copy, past the
//     registers); a head is prepared in place (bias added, q and k rotated, rounded to bf16), its bias and
//     RoPE factors fetched 16 bytes at a time before the wait. Each row block's softmax is online
//     (attend_row_block_online: the softmax walked 16 keys at a time, FlashAttention-2's form) on ex2.approx
//     (Exponent::log2_approx). Each warp's output block is staged in its own (already consumed) q rows and
//     leaves as whole 128-byte rows.
//   softmax (both, and the backward): scores in log2 units, the causal and T masks only on the blocks that
//     cross the diagonal or T.
//   backward: persistent, two blocks per SM walking the heads (sequence-major), so part of the next head
//     arrives during this one within the same 110 KB of shared memory: after the key phase q, v, dout, lse
//     and delta are dead, so the next head's q, v, dout and lse (by cp.async too) travel during the query
//     phase, whose dq is staged in the warp's own ds^T columns (DsColumnStage) rather than q's rows; only k
//     and out (into ds^T) start after it. lse and delta are read in pairs, and dv, dk, dq staged through
//     shared memory into 128-byte row stores; the rotation's factors for the staged stores are fetched first
//     through the read-only path, since a generic load may alias shared memory. The arithmetic is v7's in
//     the same order, so v9's out and dqkv equal v7's bit for bit (the lab's GPU tests hold them so); at
//     batch 512 on the H200 the backward takes 326 us against v7's 382.
//
// The backward is deterministic (no atomics, a fixed order), so R4's recomputed backward equals R3's bit for
// bit. Registers (ptxas, sm_90): forward 128, backward 254, no spills, two backward blocks per SM. What is
// left for the backward is a different kernel: Hopper's wgmma on operands TMA brings into shared memory,
// warps specialised into loaders and consumers (FlashAttention-3's form), so the next head's rows arrive
// while this one computes.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "attention_common.cuh"
#include "attention_mma.cuh"
#include "attention_rows.cuh"
#include "common.cuh"
#include "roofbench/cuda.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

// The other place a warp stages a finished 16 x 64 block (attention_rows.cuh has RowStage):
//   DsColumnStage: the warp's own 16 query columns of ds^T, which only its dq product read, the block's
//     four 16-column segments one below the other in rows 0 .. 63, segment s's row r at 16 s + (r + 2 s) % 16:
//     a staging store's eight rows, and a 16-byte read-back's four segments, fall on different banks (with
//     row r + 16 s the read-back's segments were 16 rows, 0 mod 32 banks, apart: 4-way conflicts).
struct DsColumnStage {
  bf16* columns;  // ds_t + q0
  __device__ bf16* at(int r, int c) const {
    const int segment = c / 16;
    return columns + (kRows * segment + (r + 2 * segment) % kRows) * kDsStride + c % 16;
  }
};
__device__ inline RowStage as_stage(bf16* rows) { return RowStage{rows}; }
__device__ inline DsColumnStage as_stage(DsColumnStage stage) { return stage; }

__device__ inline HeadRows head_rows(int head, const AttentionShape& s) {
  return HeadRows{head / s.heads, head % s.heads, s.T, s.channels()};
}
// One head's q, k and v rows in shared memory.
struct ForwardSmem {
  bf16 head[3][kHeadElements];  // q, k, v
};

__device__ inline void fetch_head_async(bf16 (&buffer)[3][kHeadElements], const bf16* qkv, const HeadRows& at) {
#pragma unroll
  for (int part = 0; part < 3; ++part) fetch_rows_async(buffer[part], qkv, at, part);
}
// The forward of one head whose raw q, k, v are in `head` (this thread's cp.async copies complete):
// prepared in place, then each warp's two row blocks, their output staged in their own q rows.
__device__ __forceinline__ void forward_head(bf16 (&head)[3][kHeadElements], const HeadPreparation& prep, bf16* out,
                                             float* lse, const HeadRows& at, const FusedArgs& args) {
  const AttentionShape& s = args.s;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  prep.apply(head[0], head[1], head[2], at);
  __syncthreads();
  for (int pass = 0; pass < 2; ++pass) {
    const int m = warp_row_block(warp, pass), q0 = kRows * m;
    if (q0 >= s.T) continue;
    float o[kHeadDim / 8][4], row_lse[2];
    attend_row_block_online(o, row_lse, head[0], head[1], head[2], m, s.T, args.scale, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q0 + lane / 4 + 8 * h;
      if (lane % 4 == 0 && row < s.T) lse[at.stats_at(row, s.heads)] = row_lse[h];
    }
    // Only this warp reads q's rows q0 .. q0+15, and it has them in registers now.
    __syncwarp();
    store_head_block_staged(out, RowStage{head[0] + q0 * kRowStride}, o, 1.0f, false, args.rope, q0, s.T, lane,
                            [&](int t) { return at.rows_at(t); });
  }
}

// v7's forward, v9's: one block per head (grid: every head), one buffer, four blocks per SM, so only other
// blocks hide a block's loads. The kernel keeps v7's name, which profiles show.
__global__ void __launch_bounds__(kThreads, 4)
    fused_attention_v7_forward_kernel(bf16* out, float* lse, const bf16* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  ForwardSmem& sm = *reinterpret_cast<ForwardSmem*>(smem_bytes);
  const HeadRows at = head_rows(static_cast<int>(blockIdx.x), args.s);
  fetch_head_async(sm.head, qkv, at);
  cp_async_commit();
  HeadPreparation prep;
  prep.load(bias, args.rope, at);
  cp_async_wait<0>();
  forward_head(sm.head, prep, out, lse, at, args);
}

// v9's backward: v7's kernel made persistent (two blocks per SM walk the heads, sequence-major), each
// block fetching its next head while it finishes this one. After the key phase, q, v, dout, lse and delta
// are free: the next head's q, v, dout and lse start by cp.async, and dq is staged in the warp's own ds^T
// columns instead of q's rows. After the query phase k and ds^T are free too, and the next k and out start
// (out into ds^T, as v7's): the rows the next head still waits for. (Holding the next out in registers
// through the query phase instead took ptxas to 255 registers and spills.)

// The head's log-sum-exp, raw, into dst: 16 bytes a thread by cp.async (threads 0 .. kMaxT/4 - 1) where T
// is a multiple of 4 (the rows then start 16-byte aligned), else loaded; rows from T on zero.
__device__ inline void fetch_lse_async(float* dst, const float* lse, const HeadRows& at, int heads) {
  const int t0 = 4 * static_cast<int>(threadIdx.x);
  if (t0 >= kMaxT) return;
  if (at.T % 4 == 0 && t0 < at.T) {
    cp_async16(dst + t0, lse + at.stats_at(t0, heads));
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[t0 + e] = t0 + e < at.T ? lse[at.stats_at(t0 + e, heads)] : 0.0f;
  }
}
// After this thread's wait: its own four log-sum-exps of fetch_lse_async into log2 units.
__device__ inline void scale_lse_log2(float* lse_rows) {
  const int t0 = 4 * static_cast<int>(threadIdx.x);
  if (t0 >= kMaxT) return;
#pragma unroll
  for (int e = 0; e < 4; ++e) lse_rows[t0 + e] *= kLog2e;
}

// What the key phase alone reads: q, v, dout and lse, by cp.async (one group).
__device__ inline void fetch_key_phase_inputs(BackwardSmem& sm, const bf16* qkv, const bf16* dout, const float* lse,
                                              const HeadRows& at, int heads) {
  fetch_rows_async(sm.q, qkv, at, 0);
  fetch_rows_async(sm.v, qkv, at, 2);
  fetch_rows_async(sm.dout, dout, at, -1);
  fetch_lse_async(sm.lse, lse, at, heads);
  cp_async_commit();
}
// The rest: k, and out into the ds^T buffer (free until delta is taken), by cp.async (the second group).
__device__ inline void fetch_k_and_out(BackwardSmem& sm, const bf16* qkv, const bf16* out, const HeadRows& at) {
  fetch_rows_async(sm.k, qkv, at, 1);
  fetch_rows_async(sm.ds_t, out, at, -1);
  cp_async_commit();
}

__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_v9_backward_kernel(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                       const bf16* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  BackwardSmem& sm = *reinterpret_cast<BackwardSmem*>(smem_bytes);
  const AttentionShape& s = args.s;
  const int heads = s.batch * s.heads, stride = static_cast<int>(gridDim.x);
  int head = static_cast<int>(blockIdx.x);
  if (head >= heads) return;
  const int lane = threadIdx.x % 32;
  HeadRows at = head_rows(head, s);
  const auto store = [&](const float(&acc)[kHeadDim / 8][4], float scale, bool rotate_back, int row0, int part,
                         auto stage) {
    store_head_block_staged(dqkv, as_stage(stage), acc, scale, rotate_back, args.rope, row0, s.T, lane,
                            [&](int t) { return at.qkv_at(t, part); });
  };
  fetch_key_phase_inputs(sm, qkv, dout, lse, at, s.heads);
  fetch_k_and_out(sm, qkv, out, at);
  for (;;) {
    HeadPreparation prep;
    prep.load(bias, args.rope, at);
    cp_async_wait<1>();
    scale_lse_log2(sm.lse);
    cp_async_wait<0>();
    prep.apply(sm.q, sm.k, sm.v, at);
    store_delta(sm.delta, sm.dout, [&](int it) {
      return *reinterpret_cast<const uint4*>(sm.ds_t + chunk_row(it) * kRowStride + chunk_column(it));
    });
    __syncthreads();
    backward_key_blocks<Exponent::log2_approx>(sm, s.T, args.scale, store);
    __syncthreads();  // q, v, dout, lse and delta are free
    const int next = head + stride;
    const HeadRows next_at = head_rows(next < heads ? next : head, s);
    if (next < heads) fetch_key_phase_inputs(sm, qkv, dout, lse, next_at, s.heads);
    backward_query_blocks(sm, s.T, args.scale, store, [&](int q0) { return DsColumnStage{sm.ds_t + q0}; });
    if (next >= heads) break;
    __syncthreads();  // k and ds^T are free
    fetch_k_and_out(sm, qkv, out, next_at);
    head = next;
    at = next_at;
  }
}

// The persistent backward's blocks: as many as fit at once, never more than there are heads. Set by
// configure_v9, after both kernels' shared-memory limits: nonzero, both kernels can launch.
int g_backward_v9_grid = 0;

// Both kernels take more than the default 48 KB of dynamic shared memory: launched before configure_v9
// they would fail with a bare "invalid argument".
void require_configured(const char* version) {
  if (g_backward_v9_grid == 0)
    throw Error(std::string("gpt: attention ") + version + " runs after fused_attention_v9_configure()");
}

// What every launch needs: the kernels configured, and 16-byte aligned rows of out, qkv and the tables.
void check_launch(const char* version, const bf16* out, const bf16* qkv, const float* qkv_bias,
                  const FusedArgs& args) {
  require_configured(version);
  check_head_operands_aligned(version, out, qkv, qkv_bias, args.rope);
}

}  // namespace

void configure_v9() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v7_forward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(ForwardSmem))));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v9_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmem))));
  int device = 0, sms = 0, backward_per_sm = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&backward_per_sm, fused_attention_v9_backward_kernel,
                                                               kThreads, sizeof(BackwardSmem)));
  if (backward_per_sm < 1) throw Error("gpt: attention v9's backward does not fit on this GPU's SMs");
  g_backward_v9_grid = sms * backward_per_sm;
}

void forward_v9(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  check_launch("v9", out, qkv, qkv_bias, args);
  const int heads = args.s.batch * args.s.heads;
  fused_attention_v7_forward_kernel<<<heads, kThreads, sizeof(ForwardSmem), stream>>>(out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

void backward_v9(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_launch("v9 backward", out, qkv, qkv_bias, args);
  check_aligned16(dqkv, "v9 backward", "dqkv");
  check_aligned16(dout, "v9 backward", "dout");
  check_aligned16(lse, "v9 backward", "lse");  // fetched 16 bytes at a time (fetch_lse_async)
  const int heads = args.s.batch * args.s.heads;
  fused_attention_v9_backward_kernel<<<std::min(heads, g_backward_v9_grid), kThreads, sizeof(BackwardSmem), stream>>>(
      dqkv, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::attention
