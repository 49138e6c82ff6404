// Fused causal attention with RoPE, version 2: version 1's structure (attention.cu) with every block matmul
// on TF32 tensor cores through WMMA (m16n16k8, inputs rounded to TF32 with __float_to_tf32, fp32
// accumulation, like cuBLAS's TF32 GEMMs). One block per (sequence, head, tile of 32 query rows (forward,
// dq) or key rows (dk, dv)); q, k, v and dout rows go to shared memory once, bias and RoPE applied on load;
// the scores and probabilities never leave shared memory; only the output, one log-sum-exp per row and the
// gradients go back to memory. The backward recomputes the probabilities from the log-sum-exp: one kernel
// per query tile for dq, one per key tile for dk and dv, so every gradient element has one writer.
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

// Rows t0 .. t0+count-1 of q, k or v into shared memory [padded][kHeadStride], bias added, q and k rotated;
// rows count .. padded-1 are zero (padded <= kMaxRows). A thread moves 4 channels (two RoPE pairs) per
// 16-byte load, and issues all its loads before it uses any: many loads in flight, not one at a time.
template <int kMaxRows>
__device__ void load_qkv_rows(float* dst, const float* qkv, const float* bias, RopeTable rope, const HeadRows& at,
                              int part, int t0, int count, int padded) {
  constexpr int kQuads = kHeadDim / 4, kPairs = kHeadDim / 2;
  constexpr int kPerThread = kMaxRows * kQuads / kThreads;
  static_assert(kMaxRows * kQuads % kThreads == 0);
  const float* head_bias = bias + part * at.C + at.h * kHeadDim;
  float4 raw[kPerThread];
#pragma unroll
  for (int it = 0; it < kPerThread; ++it) {
    const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
    raw[it] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < count) raw[it] = *reinterpret_cast<const float4*>(qkv + at.qkv_at(t0 + r, part) + c);
  }
#pragma unroll
  for (int it = 0; it < kPerThread; ++it) {
    const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
    const int t = t0 + r;
    if (r >= padded) continue;
    float4 x = raw[it];
    if (r < count) {
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

// Rows t0 .. t0+count-1 of an [N, C] tensor's head slice (dout) into shared memory, zero up to padded
// (<= kMaxRows); loads first, as above.
template <int kMaxRows>
__device__ void load_head_rows(float* dst, const float* src, const HeadRows& at, int t0, int count, int padded) {
  constexpr int kQuads = kHeadDim / 4;
  constexpr int kPerThread = kMaxRows * kQuads / kThreads;
  static_assert(kMaxRows * kQuads % kThreads == 0);
  float4 raw[kPerThread];
#pragma unroll
  for (int it = 0; it < kPerThread; ++it) {
    const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
    raw[it] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < count) raw[it] = *reinterpret_cast<const float4*>(src + at.rows_at(t0 + r) + c);
  }
#pragma unroll
  for (int it = 0; it < kPerThread; ++it) {
    const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
    if (r < padded) *reinterpret_cast<float4*>(dst + r * kHeadStride + c) = raw[it];
  }
}

// scale times the gradient rows of rotated q or k (or of v) from shared memory to dqkv, rotated back: the
// gradient of the raw qkv, which is also that of its bias.
__device__ void store_qkv_gradient_rows(float* dqkv, const float* src, float scale, RopeTable rope,
                                        const HeadRows& at, int part, int t0, int count) {
  constexpr int kQuads = kHeadDim / 4, kPairs = kHeadDim / 2;
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
inline constexpr std::size_t kForwardSmem = sizeof(float) * (kHeadTile + 2 * kHeadAll + kScores);
inline constexpr std::size_t kBackwardDqSmem =
    sizeof(float) * (2 * kHeadTile + 2 * kHeadAll + kScores + kWarpScratch + 2 * kTile);
inline constexpr std::size_t kBackwardDkvSmem =
    sizeof(float) * (2 * kHeadTile + 2 * kHeadAll + kScores + kWarpScratch + 2 * kMaxT);

__global__ void __launch_bounds__(kThreads)
    fused_attention_v2_forward_kernel(float* out, float* lse, const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) float smem[];
  float* q = smem;                    // [32][kHeadStride], later the output
  float* k = q + kHeadTile;           // [128][kHeadStride]
  float* v = k + kHeadAll;            // [128][kHeadStride]
  float* scores = v + kHeadAll;       // [32][kScoreStride]: scores, then probabilities
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), s.T, s.channels()};
  const int q0 = blockIdx.x * kTile, rows = min(kTile, s.T - q0), keys = q0 + rows;  // causal: keys < keys
  const int rows_pad = pad16(rows), keys_pad = pad16(keys);

  load_qkv_rows<kTile>(q, qkv, bias, args.rope, at, 0, q0, rows, rows_pad);
  load_qkv_rows<kMaxT>(k, qkv, bias, args.rope, at, 1, 0, keys, keys_pad);
  load_qkv_rows<kMaxT>(v, qkv, bias, args.rope, at, 2, 0, keys, keys_pad);
  __syncthreads();

  // scores = q k^T: k's rows read as the columns of a column-major k^T.
  tensor_core_matmul<RowMajor, ColMajor>(rows_pad, keys_pad, kHeadDim, q, kHeadStride, k, kHeadStride,
                                         StoreTile{scores, kScoreStride});
  __syncthreads();

  // A warp per row: softmax over the keys j <= q0 + i; zero above the diagonal, in the padding columns
  // and in the padding rows (p v then adds nothing from them).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
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
    for (int j = lane; j < keys_pad; j += 32) row[j] = j <= last ? expf(args.scale * row[j] - max) * inv_sum : 0.0f;
    if (lane == 0) lse[at.stats_at(q0 + i, s.heads)] = max + logf(sum);
  }
  __syncthreads();

  // out = p v into q's buffer (q was last read by the score product), then to memory.
  tensor_core_matmul<RowMajor, RowMajor>(rows_pad, kHeadDim, keys_pad, scores, kScoreStride, v, kHeadStride,
                                         StoreTile{q, kHeadStride});
  __syncthreads();
  constexpr int kQuads = kHeadDim / 4;
  for (int idx = threadIdx.x; idx < rows * kQuads; idx += blockDim.x) {
    const int r = idx / kQuads, c = 4 * (idx % kQuads);
    *reinterpret_cast<float4*>(out + at.rows_at(q0 + r) + c) =
        *reinterpret_cast<const float4*>(q + r * kHeadStride + c);
  }
}

// dq for one query tile: p = exp(scale q.k - lse), ds = p (dout.v - delta), dq = scale ds k. Also writes
// delta = rowsum(dout * out) for the dk/dv kernel that runs next.
__global__ void __launch_bounds__(kThreads)
    fused_attention_v2_backward_dq_kernel(float* dqkv, float* delta, const float* dout, const float* out,
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
  const HeadRows at{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), s.T, s.channels()};
  const int q0 = blockIdx.x * kTile, rows = min(kTile, s.T - q0), keys = q0 + rows;
  const int rows_pad = pad16(rows), keys_pad = pad16(keys);

  load_qkv_rows<kTile>(q, qkv, bias, args.rope, at, 0, q0, rows, rows_pad);
  load_qkv_rows<kMaxT>(k, qkv, bias, args.rope, at, 1, 0, keys, keys_pad);
  load_qkv_rows<kMaxT>(v, qkv, bias, args.rope, at, 2, 0, keys, keys_pad);
  load_head_rows<kTile>(dO, dout, at, q0, rows, rows_pad);

  // delta in fp32 straight from memory (dout and out rows), a warp per row; zero statistics in the padding.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = warp; i < kTile; i += kWarps) {
    float dot = 0;
    if (i < rows) {
      const float* o = out + at.rows_at(q0 + i);
      const float* g = dout + at.rows_at(q0 + i);
      for (int d = lane; d < kHeadDim; d += 32) dot += g[d] * o[d];
    }
    dot = warp_sum(dot);
    if (lane == 0) {
      row_delta[i] = dot;
      row_lse[i] = i < rows ? lse[at.stats_at(q0 + i, s.heads)] : 0.0f;
      if (i < rows) delta[at.stats_at(q0 + i, s.heads)] = dot;
    }
  }
  __syncthreads();

  // p = exp(scale q.k - lse) on each warp's own tiles, zero where masked or padded.
  float* mine = scratch + warp * kScratch;
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
}

// dk and dv for one key tile, over the queries that see it (t >= the tile's first key). Products are
// transposed (rows are keys, columns queries): p^T = exp(scale k.q - lse), dv = p^T dout,
// ds^T = p^T (v.dout - delta), dk = scale ds^T q.
__global__ void __launch_bounds__(kThreads)
    fused_attention_v2_backward_dkv_kernel(float* dqkv, const float* delta, const float* dout, const float* lse,
                                           const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) float smem[];
  float* k = smem;                             // [32][kHeadStride], later dv
  float* v = k + kHeadTile;                    // [32][kHeadStride], later dk (rotated, unscaled)
  float* q = v + kHeadTile;                    // [128][kHeadStride]
  float* dO = q + kHeadAll;                    // [128][kHeadStride]
  float* probs = dO + kHeadAll;                // [32][kScoreStride]: [key][query], p^T then ds^T
  float* scratch = probs + kScores;            // [kWarps][16 x 16]
  float* row_lse = scratch + kWarpScratch;     // [128]
  float* row_delta = row_lse + kMaxT;          // [128]
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), s.T, s.channels()};
  const int k0 = blockIdx.x * kTile, keys = min(kTile, s.T - k0), queries = s.T - k0;  // query r is t = k0 + r
  const int keys_pad = pad16(keys), queries_pad = pad16(queries);

  load_qkv_rows<kTile>(k, qkv, bias, args.rope, at, 1, k0, keys, keys_pad);
  load_qkv_rows<kTile>(v, qkv, bias, args.rope, at, 2, k0, keys, keys_pad);
  load_qkv_rows<kMaxT>(q, qkv, bias, args.rope, at, 0, k0, queries, queries_pad);
  load_head_rows<kMaxT>(dO, dout, at, k0, queries, queries_pad);
  for (int r = threadIdx.x; r < queries_pad; r += blockDim.x) {
    row_lse[r] = r < queries ? lse[at.stats_at(k0 + r, s.heads)] : 0.0f;
    row_delta[r] = r < queries ? delta[at.stats_at(k0 + r, s.heads)] : 0.0f;
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* mine = scratch + warp * kScratch;
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
}

dim3 grid(const AttentionShape& s) {
  return dim3(ceil_div(s.T, kTile), static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
}

// The kernels move rows 16 bytes at a time.
void check_aligned(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    throw Error(std::string("gpt: attention v2 needs 16-byte aligned buffers (") + what + ")");
}

}  // namespace

void configure_v2() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v2_forward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kForwardSmem)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v2_backward_dq_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBackwardDqSmem)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v2_backward_dkv_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBackwardDkvSmem)));
}

void forward_v2(float* out, float* lse, const float* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  check_aligned(out, "out");
  check_aligned(qkv, "qkv");
  fused_attention_v2_forward_kernel<<<grid(args.s), kThreads, kForwardSmem, stream>>>(out, lse, qkv, qkv_bias,
                                                                                       args);
  ROOFBENCH_CUDA_LAUNCH();
}

void backward_v2(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
                 const float* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_aligned(dqkv, "dqkv");
  check_aligned(dout, "dout");
  check_aligned(qkv, "qkv");
  fused_attention_v2_backward_dq_kernel<<<grid(args.s), kThreads, kBackwardDqSmem, stream>>>(
      dqkv, delta, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
  fused_attention_v2_backward_dkv_kernel<<<grid(args.s), kThreads, kBackwardDkvSmem, stream>>>(
      dqkv, delta, dout, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::attention
