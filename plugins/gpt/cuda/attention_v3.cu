// Fused causal attention with RoPE, version 3: version 2's tensor-core kernels (attention_v2.cu, kept for
// A/B) with one block per (sequence, head) instead of one per (sequence, head, 32-row tile). The block walks
// its 32-row tiles in turn and keeps what they share in shared memory: the forward and dq load each k and v
// row once (tile i adds keys 32i .. 32i+31 to those already there) instead of once per query tile; the dk/dv
// kernel walks its key tiles from the last to the first and so loads each q and dout row once. The next
// tile's rows are fetched into registers before the current tile's products and written to shared memory
// (bias and RoPE applied) after them, so the loads overlap the tensor-core work. Within a tile the
// products, masks and softmax are version 2's, unchanged.
//
// WMMA's fragment element order is unspecified, so fragments go through shared memory
// (store_matrix_sync) before any row-dependent work; only order-independent element-wise operations (the
// TF32 rounding) touch a fragment's elements directly. Row counts are padded to the 16-row WMMA tile with
// zero rows in shared memory; the masks below keep padding out of every result.
#include <mma.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "attention_common.cuh"
#include "attention_tensor_core.cuh"
#include "common.cuh"
#include "roofbench/cuda_check.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

using namespace tensor_core;

// One 32-row tile of q, k or v (part 0, 1, 2 of qkv) or of an [N, C] tensor's head slice (part < 0: dout),
// moved in two steps: fetch() issues the 16-byte loads of rows t0 .. t0+count-1 into registers (zero past
// count), commit() writes them to shared memory [padded][kHeadStride] (qkv: bias added, q and k rotated;
// rows count .. padded-1 zero; padded <= 32). Between the two the block computes with the loads in flight.
inline constexpr int kQuads = kHeadDim / 4;
inline constexpr int kFetchPerThread = kTile * kQuads / kThreads;
static_assert(kTile * kQuads % kThreads == 0);
static_assert(kQuads == 16 && 32 % kQuads == 0);  // dq's delta: a row's quads fill half a warp

struct RowFetch {
  float4 raw[kFetchPerThread];

  __device__ void fetch(const float* src, const HeadRows& at, int part, int t0, int count) {
#pragma unroll
    for (int it = 0; it < kFetchPerThread; ++it) {
      const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
      raw[it] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (r < count) {
        const std::size_t row = part < 0 ? at.rows_at(t0 + r) : at.qkv_at(t0 + r, part);
        raw[it] = *reinterpret_cast<const float4*>(src + row + c);
      }
    }
  }

  // bias: qkv's bias, read only for part >= 0.
  __device__ void commit(float* dst, const float* bias, RopeTable rope, const HeadRows& at, int part, int t0,
                         int count, int padded) const {
    constexpr int kPairs = kHeadDim / 2;
#pragma unroll
    for (int it = 0; it < kFetchPerThread; ++it) {
      const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
      const int t = t0 + r;
      if (r >= padded) continue;
      float4 x = raw[it];
      if (r < count && part >= 0) {
        const float* head_bias = bias + part * at.C + at.h * kHeadDim;
        x = make_float4(x.x + head_bias[c], x.y + head_bias[c + 1], x.z + head_bias[c + 2], x.w + head_bias[c + 3]);
        if (part < 2) {
          const int i = c / 2;  // the first of this thread's two pairs
          const float2 lo = rotate(x.x, x.y, rope.cos[t * kPairs + i], rope.sin[t * kPairs + i]);
          const float2 hi = rotate(x.z, x.w, rope.cos[t * kPairs + i + 1], rope.sin[t * kPairs + i + 1]);
          x = make_float4(lo.x, lo.y, hi.x, hi.y);
        }
      }
      *reinterpret_cast<float4*>(dst + r * kHeadStride + c) = x;
    }
  }
};

// scale times the gradient rows of rotated q or k (or of v) from shared memory to dqkv, rotated back: the
// gradient of the raw qkv, which is also that of its bias.
__device__ void store_qkv_gradient_rows(float* dqkv, const float* src, float scale, RopeTable rope,
                                        const HeadRows& at, int part, int t0, int count) {
  constexpr int kPairs = kHeadDim / 2;
  for (int idx = threadIdx.x; idx < count * kQuads; idx += blockDim.x) {
    const int r = idx / kQuads, c = 4 * (idx % kQuads), t = t0 + r;
    const float* row = src + r * kHeadStride + c;
    float4 g = make_float4(scale * row[0], scale * row[1], scale * row[2], scale * row[3]);
    if (part < 2) {
      const int i = c / 2;
      const float2 lo = rotate(g.x, g.y, rope.cos[t * kPairs + i], -rope.sin[t * kPairs + i]);
      const float2 hi = rotate(g.z, g.w, rope.cos[t * kPairs + i + 1], -rope.sin[t * kPairs + i + 1]);
      g = make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    *reinterpret_cast<float4*>(dqkv + at.qkv_at(t, part) + c) = g;
  }
}

// Shared memory of each kernel, in floats; sized for the largest T so the opt-in happens once. Every
// buffer starts at a multiple of 8 floats (32 bytes, WMMA's pointer alignment).
inline constexpr int kHeadTile = kTile * kHeadStride;   // 32 rows of a head
inline constexpr int kHeadAll = kMaxT * kHeadStride;    // up to 128 rows of a head
inline constexpr int kScores = kTile * kScoreStride;    // 32 rows of up to 128 scores
inline constexpr int kWarpScratch = kWarps * kScratch;
static_assert(kHeadTile % 8 == 0 && kHeadAll % 8 == 0 && kScores % 8 == 0 && kWarpScratch % 8 == 0);
// Two blocks per SM (the shared memory allows two): registers capped at 128 per thread to keep it so.
inline constexpr int kBlocksPerSm = 2;
inline constexpr std::size_t kForwardSmem = sizeof(float) * (kHeadTile + 2 * kHeadAll + kScores);
inline constexpr std::size_t kBackwardDqSmem =
    sizeof(float) * (2 * kHeadTile + 2 * kHeadAll + kScores + kWarpScratch + 2 * kTile);
inline constexpr std::size_t kBackwardDkvSmem =
    sizeof(float) * (2 * kHeadTile + 2 * kHeadAll + kScores + kWarpScratch + 2 * kMaxT);

// One block per (sequence, head): the query tiles in turn, keys and values accumulating in shared memory.
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fused_attention_v3_forward_kernel(float* out, float* lse, const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) float smem[];
  float* q = smem;                    // [32][kHeadStride]: the tile's queries, later its output
  float* k = q + kHeadTile;           // [128][kHeadStride]: keys 0 .. the tile's last
  float* v = k + kHeadAll;            // [128][kHeadStride]
  float* scores = v + kHeadAll;       // [32][kScoreStride]: scores, then probabilities
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  RowFetch fq, fk, fv;  // the next tile's rows of q, k and v
  fq.fetch(qkv, at, 0, 0, min(kTile, s.T));
  fk.fetch(qkv, at, 1, 0, min(kTile, s.T));
  fv.fetch(qkv, at, 2, 0, min(kTile, s.T));
  for (int q0 = 0; q0 < s.T; q0 += kTile) {
    const int rows = min(kTile, s.T - q0), keys = q0 + rows;  // causal: keys < keys
    const int rows_pad = pad16(rows), keys_pad = pad16(keys);
    // The previous tile is done with q and the scores (the barrier that closed it); its keys and values stay,
    // this tile's join them at rows q0 .. q0+rows-1 (zero up to keys_pad = q0 + rows_pad).
    fq.commit(q, bias, args.rope, at, 0, q0, rows, rows_pad);
    fk.commit(k + q0 * kHeadStride, bias, args.rope, at, 1, q0, rows, rows_pad);
    fv.commit(v + q0 * kHeadStride, bias, args.rope, at, 2, q0, rows, rows_pad);
    __syncthreads();
    if (const int next = q0 + kTile; next < s.T) {  // the next tile's loads fly while this one computes
      const int next_rows = min(kTile, s.T - next);
      fq.fetch(qkv, at, 0, next, next_rows);
      fk.fetch(qkv, at, 1, next, next_rows);
      fv.fetch(qkv, at, 2, next, next_rows);
    }

    // scores = q k^T: k's rows read as the columns of a column-major k^T.
    tensor_core_matmul<RowMajor, ColMajor>(rows_pad, keys_pad, kHeadDim, q, kHeadStride, k, kHeadStride,
                                           StoreTile{scores, kScoreStride});
    __syncthreads();

    // A warp per row: softmax over the keys j <= q0 + i; zero above the diagonal, in the padding columns
    // and in the padding rows (p v then adds nothing from them).
    for (int i = warp; i < rows_pad; i += kWarps) {
      float* row = scores + i * kScoreStride;
      if (i >= rows) {
        for (int j = lane; j < keys_pad; j += 32) row[j] = 0.0f;
        continue;
      }
      const int last = q0 + i;  // the last key this query sees
      float max = -INFINITY;
      for (int j = lane; j <= last; j += 32) max = fmaxf(max, args.scale * row[j]);
      max = warp_max(max);
      float sum = 0;
      for (int j = lane; j <= last; j += 32) sum += expf(args.scale * row[j] - max);
      sum = warp_sum(sum);
      const float inv_sum = 1.0f / sum;
      for (int j = lane; j < keys_pad; j += 32)
        row[j] = j <= last ? expf(args.scale * row[j] - max) * inv_sum : 0.0f;
      if (lane == 0) lse[at.stats_at(q0 + i, s.heads)] = max + logf(sum);
    }
    __syncthreads();

    // out = p v into q's buffer (q was last read by the score product), then to memory.
    tensor_core_matmul<RowMajor, RowMajor>(rows_pad, kHeadDim, keys_pad, scores, kScoreStride, v, kHeadStride,
                                           StoreTile{q, kHeadStride});
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * kQuads; idx += blockDim.x) {
      const int r = idx / kQuads, c = 4 * (idx % kQuads);
      *reinterpret_cast<float4*>(out + at.rows_at(q0 + r) + c) =
          *reinterpret_cast<const float4*>(q + r * kHeadStride + c);
    }
    __syncthreads();  // the output has left q before the next tile's queries land there
  }
}

// dq, one block per (sequence, head), the query tiles in turn (keys and values accumulating as in the
// forward): p = exp(scale q.k - lse), ds = p (dout.v - delta), dq = scale ds k. Also writes
// delta = rowsum(dout * out) for the dk/dv kernel that runs next (from out's rows, fetched with the rest).
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fused_attention_v3_backward_dq_kernel(float* dqkv, float* delta, const float* dout, const float* out,
                                          const float* lse, const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) float smem[];
  float* q = smem;                             // [32][kHeadStride], later dq (rotated, unscaled)
  float* dO = q + kHeadTile;                   // [32][kHeadStride]
  float* k = dO + kHeadTile;                   // [128][kHeadStride]
  float* v = k + kHeadAll;                     // [128][kHeadStride]
  float* scores = v + kHeadAll;                // [32][kScoreStride]: p, then ds
  float* scratch = scores + kScores;           // [kWarps][16 x 16]
  float* row_lse = scratch + kWarpScratch;     // [32]
  float* row_delta = row_lse + kTile;          // [32]
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* mine = scratch + warp * kScratch;

  // The rows t0 .. t0+31 (those below T) of q, dout, out, k and v, and the log-sum-exp of row t0 + thread
  // (threads 0 .. 31), into registers.
  RowFetch fq, fo, fout, fk, fv;
  float next_lse = 0.0f;
  const auto fetch = [&](int t0) {
    const int count = min(kTile, s.T - t0);
    fq.fetch(qkv, at, 0, t0, count);
    fo.fetch(dout, at, -1, t0, count);
    fout.fetch(out, at, -1, t0, count);
    fk.fetch(qkv, at, 1, t0, count);
    fv.fetch(qkv, at, 2, t0, count);
    const int r = static_cast<int>(threadIdx.x);
    next_lse = r < count ? lse[at.stats_at(t0 + r, s.heads)] : 0.0f;
  };

  fetch(0);
  for (int q0 = 0; q0 < s.T; q0 += kTile) {
    const int rows = min(kTile, s.T - q0), keys = q0 + rows;
    const int rows_pad = pad16(rows), keys_pad = pad16(keys);
    fq.commit(q, bias, args.rope, at, 0, q0, rows, rows_pad);
    fo.commit(dO, bias, args.rope, at, -1, q0, rows, rows_pad);
    fk.commit(k + q0 * kHeadStride, bias, args.rope, at, 1, q0, rows, rows_pad);
    fv.commit(v + q0 * kHeadStride, bias, args.rope, at, 2, q0, rows, rows_pad);
    if (static_cast<int>(threadIdx.x) < kTile) row_lse[threadIdx.x] = next_lse;  // zero past rows

    // delta = rowsum(dout * out) in fp32 from the registers: row r's 16 quads sit in 16 consecutive threads
    // (half a warp), summed with shuffles inside the half; zero in the padding rows (their quads are zero).
#pragma unroll
    for (int it = 0; it < kFetchPerThread; ++it) {
      const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads;
      const float4 g = fo.raw[it], o = fout.raw[it];
      float dot = g.x * o.x + g.y * o.y + g.z * o.z + g.w * o.w;
      for (int offset = kQuads / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullWarp, dot, offset);
      if (idx % kQuads == 0) {
        row_delta[r] = dot;
        if (r < rows) delta[at.stats_at(q0 + r, s.heads)] = dot;
      }
    }
    __syncthreads();
    if (q0 + kTile < s.T) fetch(q0 + kTile);  // the next tile's loads fly while this one computes

    // p = exp(scale q.k - lse) on each warp's own tiles, zero where masked or padded.
    tensor_core_matmul<RowMajor, ColMajor>(
        rows_pad, keys_pad, kHeadDim, q, kHeadStride, k, kHeadStride, [&](int m0, int n0, const Accumulator& acc) {
          wmma::store_matrix_sync(scores + m0 * kScoreStride + n0, acc, kScoreStride, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int i = m0 + e / kMn, j = n0 + e % kMn;
            float& cell = scores[i * kScoreStride + j];
            cell = i < rows && j <= q0 + i ? expf(args.scale * cell - row_lse[i]) : 0.0f;
          }
          __syncwarp();
        });
    __syncthreads();

    // ds = p (dout.v - delta), in place of p.
    tensor_core_matmul<RowMajor, ColMajor>(
        rows_pad, keys_pad, kHeadDim, dO, kHeadStride, v, kHeadStride, [&](int m0, int n0, const Accumulator& acc) {
          wmma::store_matrix_sync(mine, acc, kMn, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int i = m0 + e / kMn, j = n0 + e % kMn;
            float& cell = scores[i * kScoreStride + j];
            cell = cell * (mine[e] - row_delta[i]);
          }
          __syncwarp();
        });
    __syncthreads();

    // dq = ds k (scaled on the way out) into q's buffer: q was last read by the score product.
    tensor_core_matmul<RowMajor, RowMajor>(rows_pad, kHeadDim, keys_pad, scores, kScoreStride, k, kHeadStride,
                                           StoreTile{q, kHeadStride});
    __syncthreads();
    store_qkv_gradient_rows(dqkv, q, args.scale, args.rope, at, 0, q0, rows);
    __syncthreads();  // dq has left q, and the statistics are read, before the next tile overwrites them
  }
}

// dk and dv, one block per (sequence, head), the key tiles from the last to the first: a key tile is seen
// by the queries t >= its first key, so each tile adds its own 32 query (and dout) rows to those the later
// tiles loaded. Products are transposed (rows are keys, columns queries): p^T = exp(scale k.q - lse),
// dv = p^T dout, ds^T = p^T (v.dout - delta), dk = scale ds^T q.
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fused_attention_v3_backward_dkv_kernel(float* dqkv, const float* delta, const float* dout, const float* lse,
                                           const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) float smem[];
  float* k = smem;                             // [32][kHeadStride], later dv
  float* v = k + kHeadTile;                    // [32][kHeadStride], later dk (rotated, unscaled)
  float* q_all = v + kHeadTile;                // [128][kHeadStride]: query t at row t, t >= the tile's first key
  float* dO_all = q_all + kHeadAll;            // [128][kHeadStride]: likewise
  float* probs = dO_all + kHeadAll;            // [32][kScoreStride]: [key][query], p^T then ds^T
  float* scratch = probs + kScores;            // [kWarps][16 x 16]
  float* lse_all = scratch + kWarpScratch;     // [128], row t at t
  float* delta_all = lse_all + kMaxT;          // [128], row t at t
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* mine = scratch + warp * kScratch;

  // The rows t0 .. t0+31 (those below T) of k, v, q, dout and the two statistics (threads 0 .. 31, one row
  // each), into registers.
  RowFetch fk, fv, fq, fo;
  float next_lse = 0.0f, next_delta = 0.0f;
  const auto fetch = [&](int t0) {
    const int count = min(kTile, s.T - t0);
    fk.fetch(qkv, at, 1, t0, count);
    fv.fetch(qkv, at, 2, t0, count);
    fq.fetch(qkv, at, 0, t0, count);
    fo.fetch(dout, at, -1, t0, count);
    const int r = static_cast<int>(threadIdx.x);
    next_lse = r < count ? lse[at.stats_at(t0 + r, s.heads)] : 0.0f;
    next_delta = r < count ? delta[at.stats_at(t0 + r, s.heads)] : 0.0f;
  };

  const int tiles = (s.T + kTile - 1) / kTile;
  fetch((tiles - 1) * kTile);
  for (int tile = tiles - 1; tile >= 0; --tile) {
    const int k0 = tile * kTile, keys = min(kTile, s.T - k0), queries = s.T - k0;  // query r is t = k0 + r
    const int keys_pad = pad16(keys), queries_pad = pad16(queries);
    // The later tile is done with k, v and the probabilities (the barrier that closed it); its query rows
    // stay, this tile's rows k0 .. k0+keys-1 join them (zero up to k0 + keys_pad: only the first tile
    // walked, the last one, can be partial, and its padding rows then stay zero for every later tile).
    fk.commit(k, bias, args.rope, at, 1, k0, keys, keys_pad);
    fv.commit(v, bias, args.rope, at, 2, k0, keys, keys_pad);
    fq.commit(q_all + k0 * kHeadStride, bias, args.rope, at, 0, k0, keys, keys_pad);
    fo.commit(dO_all + k0 * kHeadStride, bias, args.rope, at, -1, k0, keys, keys_pad);
    if (static_cast<int>(threadIdx.x) < keys_pad) {
      lse_all[k0 + static_cast<int>(threadIdx.x)] = next_lse;
      delta_all[k0 + static_cast<int>(threadIdx.x)] = next_delta;
    }
    __syncthreads();
    if (tile > 0) fetch(k0 - kTile);  // the next tile's loads fly while this one computes

    // This tile's view: query r (t = k0 + r) at row r.
    const float* q = q_all + k0 * kHeadStride;
    const float* dO = dO_all + k0 * kHeadStride;
    const float* row_lse = lse_all + k0;
    const float* row_delta = delta_all + k0;

    // p^T: key j (t = k0 + j) is seen by query r (t = k0 + r) when j <= r; zero elsewhere and in the padding.
    tensor_core_matmul<RowMajor, ColMajor>(
        keys_pad, queries_pad, kHeadDim, k, kHeadStride, q, kHeadStride, [&](int m0, int n0, const Accumulator& acc) {
          wmma::store_matrix_sync(probs + m0 * kScoreStride + n0, acc, kScoreStride, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int j = m0 + e / kMn, r = n0 + e % kMn;
            float& cell = probs[j * kScoreStride + r];
            cell = j < keys && r < queries && j <= r ? expf(args.scale * cell - row_lse[r]) : 0.0f;
          }
          __syncwarp();
        });
    __syncthreads();

    // dv = p^T dout into k's buffer (k was last read by the score product), then to memory.
    tensor_core_matmul<RowMajor, RowMajor>(keys_pad, kHeadDim, queries_pad, probs, kScoreStride, dO, kHeadStride,
                                           StoreTile{k, kHeadStride});
    __syncthreads();  // dv complete; p^T read for the last time
    store_qkv_gradient_rows(dqkv, k, 1.0f, args.rope, at, 2, k0, keys);

    // ds^T = p^T (v.dout - delta), in place of p^T; dout's rows read as the columns of dout^T.
    tensor_core_matmul<RowMajor, ColMajor>(
        keys_pad, queries_pad, kHeadDim, v, kHeadStride, dO, kHeadStride, [&](int m0, int n0, const Accumulator& acc) {
          wmma::store_matrix_sync(mine, acc, kMn, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int j = m0 + e / kMn, r = n0 + e % kMn;
            float& cell = probs[j * kScoreStride + r];
            cell = cell * (mine[e] - row_delta[r]);
          }
          __syncwarp();
        });
    __syncthreads();

    // dk = ds^T q (scaled on the way out) into v's buffer: v was last read by the product above.
    tensor_core_matmul<RowMajor, RowMajor>(keys_pad, kHeadDim, queries_pad, probs, kScoreStride, q, kHeadStride,
                                           StoreTile{v, kHeadStride});
    __syncthreads();
    store_qkv_gradient_rows(dqkv, v, args.scale, args.rope, at, 1, k0, keys);
    __syncthreads();  // dv and dk have left k and v before the next tile's keys land there
  }
}

// One block per (sequence, head).
dim3 grid(const AttentionShape& s) { return dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch)); }

// The kernels move rows 16 bytes at a time.
void check_aligned(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    throw Error(std::string("gpt: attention v3 needs 16-byte aligned buffers (") + what + ")");
}

}  // namespace

void configure_v3() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v3_forward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kForwardSmem)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v3_backward_dq_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBackwardDqSmem)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v3_backward_dkv_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBackwardDkvSmem)));
}

void forward_v3(float* out, float* lse, const float* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  check_aligned(out, "out");
  check_aligned(qkv, "qkv");
  fused_attention_v3_forward_kernel<<<grid(args.s), kThreads, kForwardSmem, stream>>>(out, lse, qkv, qkv_bias,
                                                                                       args);
  ROOFBENCH_CUDA_LAUNCH();
}

void backward_v3(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
                 const float* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_aligned(dqkv, "dqkv");
  check_aligned(dout, "dout");
  check_aligned(out, "out");
  check_aligned(qkv, "qkv");
  fused_attention_v3_backward_dq_kernel<<<grid(args.s), kThreads, kBackwardDqSmem, stream>>>(
      dqkv, delta, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
  fused_attention_v3_backward_dkv_kernel<<<grid(args.s), kThreads, kBackwardDkvSmem, stream>>>(
      dqkv, delta, dout, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::attention
