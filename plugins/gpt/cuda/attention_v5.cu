// Fused causal attention with RoPE, versions 5, 6, 7 and 9 (bf16): v4's products (attention_mma.cuh: mma.sync
// m16n8k16, the scores in registers, warp w on the row blocks w and 7 - w, a backward without atomics) with
// the rows moved differently. v4's blocks spent their lives waiting on memory: scalar bias and RoPE loads
// (8.8 of 32 bytes used per loaded sector) with little to overlap them. The lab's figures per version are
// in plugins/gpt/README.md.
//
//   forward (v5): persistent, two blocks of four warps per SM, each walking the heads (sequence-major, so
//     neighbouring blocks share qkv rows) with two shared-memory buffers: while it computes head i, the
//     raw q, k, v of head i + grid are already on their way by cp.async (16 bytes per copy, past the
//     registers). A head is prepared in place (bias added, q and k rotated, rounded to bf16, v4's
//     formulas), its bias and RoPE factors fetched 16 bytes at a time before the wait. Each warp's output
//     block is staged in its own (already consumed) q rows and leaves as whole 128-byte rows.
//   forward (v6): the same kernel body one block per head, one buffer, four blocks (16 warps) per SM: the
//     other blocks, not a second buffer, hide a block's loads, which at two blocks per SM v5 cannot
//     (v5's forward is compute-limited there).
//   forward (v7, v9): v6's with attend_row_block_online (the softmax walked 16 keys at a time,
//     FlashAttention-2's form) on ex2.approx (Exponent::log2_approx): v6 paid a branch, a mask test and two
//     multiplications on each of 16 score tiles behind a run-time bound, 29 instructions per HMMA.
//   softmax (all, and the backward): scores in log2 units and exp2f, the causal and T masks only on the
//     blocks that cross the diagonal or T; v4 keeps expf and masks every score.
//   backward (v5, v6, v7): one block per (sequence, head) as v4 (its 110 KB of shared memory leave no room
//     for a second buffer at two blocks per SM), but q, k, v, dout and out arrive by cp.async straight into
//     shared memory (out into the ds^T buffer, free until delta is taken), prepared as the forward's, lse
//     and delta read in pairs, and dv, dk, dq staged through shared memory into 128-byte row stores. The
//     rotation's factors for the staged stores are fetched first through the read-only path, since a
//     generic load may alias shared memory.
//   backward (v9): v7's made persistent, so part of the next head arrives during this one within the same
//     110 KB: after the key phase q, v, dout, lse and delta are dead, so the next head's q, v, dout and lse
//     (by cp.async too) travel during the query phase, whose dq is staged in the warp's own ds^T columns
//     (DsColumnStage) rather than q's rows; only k and out (into ds^T) start after it. The arithmetic is
//     v7's in the same order, so v9's out and dqkv equal v7's bit for bit (the GPU tests hold them so);
//     at batch 512 on the H200 the backward takes 326 us against v7's 382.
//
// Same values as v4 up to fp32 rounding (exp2f for expf, a few contractions in the preparation); the
// backward is deterministic (no atomics, a fixed order), so R4's recomputed backward equals R3's bit for
// bit. Registers (ptxas, sm_90): v5 forward 199, v6 forward 128, v7 forward 128, backward 195 (v9's 254),
// no spills, two backward blocks per SM. What is left for the backward is a different kernel: Hopper's
// wgmma on operands TMA brings into shared memory, warps specialised into loaders and consumers
// (FlashAttention-3's form), so the next head's rows arrive while this one computes.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "attention_common.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "roofbench/cuda.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

using bf16 = __nv_bfloat16;
using namespace mma;

inline constexpr int kPairs = kHeadDim / 2;

// Rows 0 .. kMaxT-1 of one head's part of qkv (0, 1, 2 = q, k, v) or of an [N, C] tensor (part < 0) into
// shared memory [kMaxT][kRowStride], raw, by cp.async (complete at the thread's next cp_async_wait; each
// thread copies the chunks it prepares later); rows from T on are zeroed, so padding adds nothing.
__device__ void fetch_rows_async(bf16* dst, const bf16* src, const HeadRows& at, int part) {
#pragma unroll
  for (int it = 0; it < kChunksPerThread; ++it) {
    const int r = chunk_row(it), c = chunk_column(it);
    bf16* to = dst + r * kRowStride + c;
    if (r < at.T)
      cp_async16(to, src + (part < 0 ? at.rows_at(r) : at.qkv_at(r, part)) + c);
    else
      *reinterpret_cast<uint4*>(to) = make_uint4(0, 0, 0, 0);
  }
}

// x + bias, (x0, x1) rotated by (cos, sin) when given, rounded to bf16: v4's prepare_qkv_quad on the eight
// elements of one 16-byte chunk (four RoPE pairs).
__device__ inline uint4 prepare_chunk(uint4 raw, const float (&bias)[kChunk], const float* cos, const float* sin) {
  unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
    float x0 = x.x + bias[2 * i], x1 = x.y + bias[2 * i + 1];
    if (cos != nullptr) {
      const float2 g = rotate(x0, x1, cos[i], sin[i]);
      x0 = g.x;
      x1 = g.y;
    }
    w[i] = pack_bf16(x0, x1);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The bias and RoPE factors of this thread's chunks (one column, kChunksPerThread rows), fetched 16 bytes
// at a time while the rows are still in flight; apply() prepares the landed rows in place.
struct HeadPreparation {
  float bias[3][kChunk];
  float cos[kChunksPerThread][4], sin[kChunksPerThread][4];

  __device__ void load(const float* qkv_bias, RopeTable rope, const HeadRows& at) {
    const int c = chunk_column(0);
#pragma unroll
    for (int part = 0; part < 3; ++part) {
      const float* b = qkv_bias + part * at.C + at.h * kHeadDim + c;
      const float4 lo = __ldg(reinterpret_cast<const float4*>(b)), hi = __ldg(reinterpret_cast<const float4*>(b + 4));
      bias[part][0] = lo.x, bias[part][1] = lo.y, bias[part][2] = lo.z, bias[part][3] = lo.w;
      bias[part][4] = hi.x, bias[part][5] = hi.y, bias[part][6] = hi.z, bias[part][7] = hi.w;
    }
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      const int r = chunk_row(it) < at.T ? chunk_row(it) : 0;  // a padding row is not prepared
      const float4 cs = __ldg(reinterpret_cast<const float4*>(rope.cos + r * kPairs + c / 2));
      const float4 sn = __ldg(reinterpret_cast<const float4*>(rope.sin + r * kPairs + c / 2));
      cos[it][0] = cs.x, cos[it][1] = cs.y, cos[it][2] = cs.z, cos[it][3] = cs.w;
      sin[it][0] = sn.x, sin[it][1] = sn.y, sin[it][2] = sn.z, sin[it][3] = sn.w;
    }
  }

  // After this thread's cp_async_wait: its own chunks of q, k, v, bias added and q, k rotated.
  __device__ void apply(bf16* q, bf16* k, bf16* v, const HeadRows& at) const {
    const int c = chunk_column(0);
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      const int r = chunk_row(it);
      if (r >= at.T) continue;
      uint4* pq = reinterpret_cast<uint4*>(q + r * kRowStride + c);
      uint4* pk = reinterpret_cast<uint4*>(k + r * kRowStride + c);
      uint4* pv = reinterpret_cast<uint4*>(v + r * kRowStride + c);
      *pq = prepare_chunk(*pq, bias[0], cos[it], sin[it]);
      *pk = prepare_chunk(*pk, bias[1], cos[it], sin[it]);
      *pv = prepare_chunk(*pv, bias[2], nullptr, nullptr);
    }
  }
};

// Where a warp stages a finished 16 x 64 block: element (r, c) at at(r, c), 16-byte aligned for c a multiple
// of 8, eight consecutive elements from there contiguous.
//   RowStage: 16 rows of a [kMaxT][kRowStride] buffer that only this warp still reads;
//   DsColumnStage (v9): the warp's own 16 query columns of ds^T, which only its dq product read, the block's
//     four 16-column segments one below the other in rows 0 .. 63, segment s's row r at 16 s + (r + 2 s) % 16:
//     a staging store's eight rows, and a 16-byte read-back's four segments, fall on different banks (with
//     row r + 16 s the read-back's segments were 16 rows, 0 mod 32 banks, apart: 4-way conflicts).
struct RowStage {
  bf16* rows;
  __device__ bf16* at(int r, int c) const { return rows + r * kRowStride + c; }
};
struct DsColumnStage {
  bf16* columns;  // ds_t + q0
  __device__ bf16* at(int r, int c) const {
    const int segment = c / 16;
    return columns + (kRows * segment + (r + 2 * segment) % kRows) * kDsStride + c % 16;
  }
};
__device__ inline RowStage as_stage(bf16* rows) { return RowStage{rows}; }
__device__ inline DsColumnStage as_stage(DsColumnStage stage) { return stage; }

// A 16 x 64 accumulator block (rows row0 + lane/4 and + 8) to rows row0 .. row0+15 of dst: times scale,
// (q, k) rotated back to the raw qkv's frame, rounded to bf16 into the warp's own stage (free to
// overwrite), then copied out as 16-byte chunks, a row's eight chunks in eight neighbouring lanes; rows at or
// past T are not written. The rotation's factors are all fetched (read-only path) before the first staging
// store, so their round trips overlap instead of queueing behind the stores.
template <typename Stage, typename Address>
__device__ void store_head_block_staged(bf16* dst, Stage stage, const float (&acc)[kHeadDim / 8][4], float scale,
                                        bool rotate_back, RopeTable rope, int row0, int T, int lane,
                                        Address address) {
  float cos[2][kHeadDim / 8], sin[2][kHeadDim / 8];
  if (rotate_back) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = row0 + lane / 4 + 8 * half, row = t < T ? t : 0;  // a padding row is not stored
#pragma unroll
      for (int n = 0; n < kHeadDim / 8; ++n) {
        const int pair = (8 * n + 2 * (lane % 4)) / 2;
        cos[half][n] = __ldg(rope.cos + row * kPairs + pair);
        sin[half][n] = __ldg(rope.sin + row * kPairs + pair);
      }
    }
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = lane / 4 + 8 * half;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      const int c = 8 * n + 2 * (lane % 4);
      float x0 = scale * acc[n][2 * half], x1 = scale * acc[n][2 * half + 1];
      if (rotate_back) {
        const float2 g = rotate(x0, x1, cos[half][n], -sin[half][n]);
        x0 = g.x;
        x1 = g.y;
      }
      *reinterpret_cast<unsigned*>(stage.at(r, c)) = pack_bf16(x0, x1);
    }
  }
  __syncwarp();
  constexpr int kChunksPerLane = kRows * kChunksPerRow / 32;
#pragma unroll
  for (int j = 0; j < kChunksPerLane; ++j) {
    const int id = lane + 32 * j, r = id / kChunksPerRow, c = kChunk * (id % kChunksPerRow);
    if (row0 + r < T)
      *reinterpret_cast<uint4*>(dst + address(row0 + r) + c) =
          *reinterpret_cast<const uint4*>(stage.at(r, c));
  }
  __syncwarp();  // the stage may be written again
}

__device__ inline HeadRows head_rows(int head, const AttentionShape& s) {
  return HeadRows{head / s.heads, head % s.heads, s.T, s.channels()};
}

struct ForwardSmemV5 {
  bf16 head[2][3][kHeadElements];  // [buffer][q, k, v]
};
// v6 never fetches ahead: it needs (and is given) the first buffer only.
inline constexpr std::size_t kForwardSmemOneHead = sizeof(bf16) * 3 * kHeadElements;

__device__ inline void fetch_head_async(bf16 (&buffer)[3][kHeadElements], const bf16* qkv, const HeadRows& at) {
#pragma unroll
  for (int part = 0; part < 3; ++part) fetch_rows_async(buffer[part], qkv, at, part);
}

// How a forward computes a row block: attend_row_block's one pass (v5, v6) or the online softmax (v7).
enum class RowBlockForm { one_pass, online };

// The forward of one head whose raw q, k, v are in `head` (this thread's cp.async copies complete):
// prepared in place, then each warp's two row blocks, their output staged in their own q rows.
template <RowBlockForm kForm = RowBlockForm::one_pass>
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
    if constexpr (kForm == RowBlockForm::online)
      attend_row_block_online(o, row_lse, head[0], head[1], head[2], m, s.T, args.scale, lane);
    else
      attend_row_block<Exponent::log2>(o, row_lse, head[0], head[1], head[2], m, s.T, args.scale, lane);
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

// v5: persistent (grid: as many blocks as fit at once, two per SM), two buffers.
__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_v5_forward_kernel(bf16* out, float* lse, const bf16* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  ForwardSmemV5& sm = *reinterpret_cast<ForwardSmemV5*>(smem_bytes);
  const AttentionShape& s = args.s;
  const int heads = s.batch * s.heads;
  const int first = static_cast<int>(blockIdx.x), stride = static_cast<int>(gridDim.x);
  if (first >= heads) return;
  fetch_head_async(sm.head[0], qkv, head_rows(first, s));
  cp_async_commit();
  for (int head = first, i = 0; head < heads; head += stride, ++i) {
    // The next head's rows travel while this one is computed; its buffer was last read before the barrier
    // that ended the previous iteration.
    if (head + stride < heads) fetch_head_async(sm.head[(i + 1) % 2], qkv, head_rows(head + stride, s));
    cp_async_commit();
    const HeadRows at = head_rows(head, s);
    HeadPreparation prep;
    prep.load(bias, args.rope, at);
    cp_async_wait<1>();
    forward_head(sm.head[i % 2], prep, out, lse, at, args);
    __syncthreads();
  }
}

// v6 and v7: one block per head (grid: every head), one buffer, four blocks per SM, so only other blocks
// hide a block's loads.
template <RowBlockForm kForm>
__device__ __forceinline__ void forward_one_head_per_block(bf16* out, float* lse, const bf16* qkv, const float* bias,
                                                           const FusedArgs& args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  ForwardSmemV5& sm = *reinterpret_cast<ForwardSmemV5*>(smem_bytes);
  const HeadRows at = head_rows(static_cast<int>(blockIdx.x), args.s);
  fetch_head_async(sm.head[0], qkv, at);
  cp_async_commit();
  HeadPreparation prep;
  prep.load(bias, args.rope, at);
  cp_async_wait<0>();
  forward_head<kForm>(sm.head[0], prep, out, lse, at, args);
}

__global__ void __launch_bounds__(kThreads, 4)
    fused_attention_v6_forward_kernel(bf16* out, float* lse, const bf16* qkv, const float* bias, FusedArgs args) {
  forward_one_head_per_block<RowBlockForm::one_pass>(out, lse, qkv, bias, args);
}

__global__ void __launch_bounds__(kThreads, 4)
    fused_attention_v7_forward_kernel(bf16* out, float* lse, const bf16* qkv, const float* bias, FusedArgs args) {
  forward_one_head_per_block<RowBlockForm::online>(out, lse, qkv, bias, args);
}

// delta = rowsum(dout * out) in fp32, as v4, over this thread's chunks of dout (in shared memory, landed by
// its own copies) and of out (out_chunk(it), its chunk it); a row's chunks sit in kChunksPerRow
// neighbouring threads, summed by shuffles.
template <typename OutChunk>
__device__ __forceinline__ void store_delta(float* delta, const bf16* dout_rows, OutChunk out_chunk) {
#pragma unroll
  for (int it = 0; it < kChunksPerThread; ++it) {
    const int r = chunk_row(it), c = chunk_column(it);
    const uint4 a = *reinterpret_cast<const uint4*>(dout_rows + r * kRowStride + c);
    const uint4 b = out_chunk(it);
    const bf16* x = reinterpret_cast<const bf16*>(&a);
    const bf16* y = reinterpret_cast<const bf16*>(&b);
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < kChunk; ++e) dot += __bfloat162float(x[e]) * __bfloat162float(y[e]);
    for (int offset = kChunksPerRow / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullWarp, dot, offset);
    if (c == 0) delta[r] = dot;
  }
}

template <Exponent kExp>
__device__ __forceinline__ void backward_head(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                              const bf16* qkv, const float* bias, const FusedArgs& args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  BackwardSmem& sm = *reinterpret_cast<BackwardSmem*>(smem_bytes);
  static_assert(kHeadElements <= kMaxT * kDsStride, "out's rows wait in the ds^T buffer");
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int lane = threadIdx.x % 32;
  {
    bf16* out_rows = sm.ds_t;  // until delta is taken; ds^T is first written after the barrier below
    fetch_rows_async(sm.q, qkv, at, 0);
    fetch_rows_async(sm.k, qkv, at, 1);
    fetch_rows_async(sm.v, qkv, at, 2);
    fetch_rows_async(sm.dout, dout, at, -1);
    fetch_rows_async(out_rows, out, at, -1);
    cp_async_commit();
    load_lse_log2<kThreads>(sm.lse, lse, at, s.heads);
    HeadPreparation prep;
    prep.load(bias, args.rope, at);
    cp_async_wait<0>();
    prep.apply(sm.q, sm.k, sm.v, at);
    store_delta(sm.delta, sm.dout, [&](int it) {
      return *reinterpret_cast<const uint4*>(out_rows + chunk_row(it) * kRowStride + chunk_column(it));
    });
  }
  __syncthreads();

  backward_row_blocks<kExp>(
      sm, s.T, args.scale,
      [&](const float(&acc)[kHeadDim / 8][4], float scale, bool rotate_back, int row0, int part, bf16* stage) {
        store_head_block_staged(dqkv, RowStage{stage}, acc, scale, rotate_back, args.rope, row0, s.T, lane,
                                [&](int t) { return at.qkv_at(t, part); });
      });
}

// v5's and v6's backward (exp2f), and v7's (ex2.approx).
__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_v5_backward_kernel(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                       const bf16* qkv, const float* bias, FusedArgs args) {
  backward_head<Exponent::log2>(dqkv, dout, out, lse, qkv, bias, args);
}

__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_v7_backward_kernel(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                       const bf16* qkv, const float* bias, FusedArgs args) {
  backward_head<Exponent::log2_approx>(dqkv, dout, out, lse, qkv, bias, args);
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

// Blocks of the persistent forward: as many as fit at once, never more than there are heads. Set by
// configure_v5, after the three kernels' shared-memory limits: nonzero, every v5/v6 kernel can launch.
int g_forward_grid = 0;
int g_backward_v9_grid = 0;  // the persistent backward's blocks, likewise

// v5's, v6's and v7's kernels all take more than the default 48 KB of dynamic shared memory: launched before
// configure_v5 they would fail with a bare "invalid argument".
void require_configured(const char* version) {
  if (g_forward_grid == 0)
    throw Error(std::string("gpt: attention ") + version + " runs after fused_attention_configure()");
}

// What every v5/v6/v7 launch needs: the kernels configured, and 16-byte aligned rows of out, qkv and the tables.
void check_launch(const char* version, const bf16* out, const bf16* qkv, const float* qkv_bias,
                  const FusedArgs& args) {
  require_configured(version);
  check_head_operands_aligned(version, out, qkv, qkv_bias, args.rope);
}

}  // namespace

void configure_v5() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v5_forward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(ForwardSmemV5))));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v6_forward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kForwardSmemOneHead)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v7_forward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kForwardSmemOneHead)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v5_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmem))));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v7_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmem))));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v9_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmem))));
  int device = 0, sms = 0, per_sm = 0, backward_per_sm = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_attention_v5_forward_kernel, kThreads,
                                                               sizeof(ForwardSmemV5)));
  ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&backward_per_sm, fused_attention_v9_backward_kernel,
                                                               kThreads, sizeof(BackwardSmem)));
  if (per_sm < 1) throw Error("gpt: attention v5's forward does not fit on this GPU's SMs");
  if (backward_per_sm < 1) throw Error("gpt: attention v9's backward does not fit on this GPU's SMs");
  g_backward_v9_grid = sms * backward_per_sm;
  g_forward_grid = sms * per_sm;
}

void forward_v5(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  check_launch("v5", out, qkv, qkv_bias, args);
  const int heads = args.s.batch * args.s.heads;
  fused_attention_v5_forward_kernel<<<std::min(heads, g_forward_grid), kThreads, sizeof(ForwardSmemV5), stream>>>(
      out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

namespace {
using ForwardKernel = void (*)(bf16*, float*, const bf16*, const float*, FusedArgs);

// v6's and v7's launch: one block per head.
void launch_one_head_per_block(ForwardKernel kernel, const char* version, bf16* out, float* lse, const bf16* qkv,
                               const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_launch(version, out, qkv, qkv_bias, args);
  const int heads = args.s.batch * args.s.heads;
  kernel<<<heads, kThreads, kForwardSmemOneHead, stream>>>(out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}
}  // namespace

void forward_v6(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  launch_one_head_per_block(fused_attention_v6_forward_kernel, "v6", out, lse, qkv, qkv_bias, args, stream);
}

void forward_v7(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  launch_one_head_per_block(fused_attention_v7_forward_kernel, "v7", out, lse, qkv, qkv_bias, args, stream);
}

namespace {
using BackwardKernel = void (*)(bf16*, const bf16*, const bf16*, const float*, const bf16*, const float*, FusedArgs);

// grid: one block per (sequence, head), head_grid's, or v9's persistent blocks.
void launch_backward(BackwardKernel kernel, const char* version, dim3 grid, bf16* dqkv, const bf16* dout,
                     const bf16* out, const float* lse, const bf16* qkv, const float* qkv_bias, const FusedArgs& args,
                     cudaStream_t stream) {
  check_launch(version, out, qkv, qkv_bias, args);
  check_aligned16(dqkv, version, "dqkv");
  check_aligned16(dout, version, "dout");
  kernel<<<grid, kThreads, sizeof(BackwardSmem), stream>>>(dqkv, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}
}  // namespace

void backward_v5(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  launch_backward(fused_attention_v5_backward_kernel, "v5 and v6 backward", head_grid(args.s), dqkv, dout, out, lse,
                  qkv, qkv_bias, args, stream);
}

void backward_v7(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  launch_backward(fused_attention_v7_backward_kernel, "v7 backward", head_grid(args.s), dqkv, dout, out, lse, qkv,
                  qkv_bias, args, stream);
}

void backward_v9(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_aligned16(lse, "v9 backward", "lse");  // fetched 16 bytes at a time (fetch_lse_async)
  const int heads = args.s.batch * args.s.heads;
  launch_backward(fused_attention_v9_backward_kernel, "v9 backward", dim3(std::min(heads, g_backward_v9_grid)), dqkv,
                  dout, out, lse, qkv, qkv_bias, args, stream);
}

}  // namespace roofbench::gpt::cuda::attention
