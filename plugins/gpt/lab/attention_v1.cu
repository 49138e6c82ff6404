// Fused causal attention with RoPE, version 1 (fp32, the kernel lab's lab_attention): SIMT fp32 block
// matmuls, one block per (sequence, head, tile of 32 rows); q, k and v are loaded once from the raw qkv with
// the bias and RoPE applied on the way in, the scores live in shared memory, and only the output and one
// log-sum-exp per row go back to memory. The backward recomputes the probabilities from the log-sum-exp
// (FlashAttention's trick) in two kernels: one per query tile for dq, one per key tile for dk and dv, so
// that every gradient element has one writer and needs no atomics. R1 runs v8 (plugins/gpt/cuda/attention_v8.cu).
#include <cuda_runtime.h>

#include "attention_common.cuh"
#include "attention_versions.hpp"
#include "common.cuh"
#include "layers.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench::gpt::cuda {
namespace {

using attention::FusedArgs;
using attention::HeadRows;
using attention::kHeadDim;
using attention::kMaxT;
using attention::rotate;

inline constexpr int kTile = 32;                  // query rows (forward, dq) or key rows (dk, dv) per block
inline constexpr int kRowStride = kHeadDim + 1;  // padding: a column walk hits 32 different banks
inline constexpr int kThreads = 256;
inline constexpr int kThreadRows = 8, kThreadCols = 32;  // the thread grid of block_matmul
static_assert(kThreadRows * kThreadCols == kThreads);

// A matrix in shared memory read as value(row, k) = p[row * row_stride + k * k_stride]; the strides
// express a transpose without moving data.
struct SmemView {
  const float* p;
  int row_stride, k_stride;
};

// out(m, n) = sum_{k < K} a(m, k) b(n, k) for m < M, n < N, handed to epilogue(m, n, value). Each thread
// owns a kRm x kRn register tile at rows ty + i*8 and columns tx + j*32 of each 8kRm x 32kRn block tile:
// a warp shares one row (a broadcast read of a) and walks 32 consecutive columns of b (conflict-free with
// the padded strides used below). Out-of-range rows and columns are clamped on load and dropped on store.
template <int kRm, int kRn, typename Epilogue>
__device__ void block_matmul(int M, int N, int K, SmemView a, SmemView b, Epilogue epilogue) {
  const int tx = threadIdx.x % kThreadCols, ty = threadIdx.x / kThreadCols;
  for (int m0 = 0; m0 < M; m0 += kThreadRows * kRm)
    for (int n0 = 0; n0 < N; n0 += kThreadCols * kRn) {
      const float* a_rows[kRm];
      const float* b_rows[kRn];
#pragma unroll
      for (int i = 0; i < kRm; ++i) a_rows[i] = a.p + min(m0 + ty + i * kThreadRows, M - 1) * a.row_stride;
#pragma unroll
      for (int j = 0; j < kRn; ++j) b_rows[j] = b.p + min(n0 + tx + j * kThreadCols, N - 1) * b.row_stride;
      float acc[kRm][kRn] = {};
      for (int k = 0; k < K; ++k) {
        float av[kRm], bv[kRn];
#pragma unroll
        for (int i = 0; i < kRm; ++i) av[i] = a_rows[i][k * a.k_stride];
#pragma unroll
        for (int j = 0; j < kRn; ++j) bv[j] = b_rows[j][k * b.k_stride];
#pragma unroll
        for (int i = 0; i < kRm; ++i)
#pragma unroll
          for (int j = 0; j < kRn; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
#pragma unroll
      for (int i = 0; i < kRm; ++i)
#pragma unroll
        for (int j = 0; j < kRn; ++j) {
          const int m = m0 + ty + i * kThreadRows, n = n0 + tx + j * kThreadCols;
          if (m < M && n < N) epilogue(m, n, acc[i][j]);
        }
    }
}

// Rows t0 .. t0+count-1 of q, k or v into shared memory [count][kRowStride], bias added, q and k rotated.
// A thread moves one adjacent channel pair, the unit RoPE rotates.
__device__ void load_qkv_rows(float* dst, const float* qkv, const float* bias, RopeTable rope, const HeadRows& at,
                              int part, int t0, int count) {
  constexpr int kPairs = kHeadDim / 2;
  const float* head_bias = bias + part * at.C + at.h * kHeadDim;
  for (int idx = threadIdx.x; idx < count * kPairs; idx += blockDim.x) {
    const int r = idx / kPairs, i = idx % kPairs, t = t0 + r;
    const float2 raw = *reinterpret_cast<const float2*>(qkv + at.qkv_at(t, part) + 2 * i);
    float2 x = make_float2(raw.x + head_bias[2 * i], raw.y + head_bias[2 * i + 1]);
    if (part < 2) x = rotate(x.x, x.y, rope.cos[t * kPairs + i], rope.sin[t * kPairs + i]);
    dst[r * kRowStride + 2 * i] = x.x;
    dst[r * kRowStride + 2 * i + 1] = x.y;
  }
}

// Rows of an [N, C] tensor's head slice (dout) into shared memory.
__device__ void load_head_rows(float* dst, const float* src, const HeadRows& at, int t0, int count) {
  for (int idx = threadIdx.x; idx < count * kHeadDim; idx += blockDim.x) {
    const int r = idx / kHeadDim, d = idx % kHeadDim;
    dst[r * kRowStride + d] = src[at.rows_at(t0 + r) + d];
  }
}

// Gradient rows of rotated q or k (or of v) from shared memory to dqkv, rotated back: the gradient of the
// raw qkv, which is also that of its bias.
__device__ void store_qkv_gradient_rows(float* dqkv, const float* src, RopeTable rope, const HeadRows& at, int part,
                                        int t0, int count) {
  constexpr int kPairs = kHeadDim / 2;
  for (int idx = threadIdx.x; idx < count * kPairs; idx += blockDim.x) {
    const int r = idx / kPairs, i = idx % kPairs, t = t0 + r;
    float2 g = make_float2(src[r * kRowStride + 2 * i], src[r * kRowStride + 2 * i + 1]);
    if (part < 2) g = rotate(g.x, g.y, rope.cos[t * kPairs + i], -rope.sin[t * kPairs + i]);
    *reinterpret_cast<float2*>(dqkv + at.qkv_at(t, part) + 2 * i) = g;
  }
}

// Shared memory of each kernel, in floats; sized for the largest T so the opt-in happens once.
inline constexpr int kScoreStride = kMaxT + 1;
inline constexpr int kKeyTileStride = kTile + 1;
inline constexpr std::size_t kForwardSmem =
    sizeof(float) * (kTile * kRowStride + 2 * kMaxT * kRowStride + kTile * kScoreStride);
inline constexpr std::size_t kBackwardDqSmem =
    sizeof(float) * (2 * kTile * kRowStride + 2 * kMaxT * kRowStride + kTile * kScoreStride + 2 * kTile);
inline constexpr std::size_t kBackwardDkvSmem =
    sizeof(float) * (2 * kTile * kRowStride + 2 * kMaxT * kRowStride + kMaxT * kKeyTileStride + 2 * kMaxT);

__global__ void __launch_bounds__(kThreads) fused_attention_forward_kernel(float* out, float* lse, const float* qkv,
                                                                          const float* bias, FusedArgs args) {
  extern __shared__ float smem[];
  float* q = smem;                          // [kTile][kRowStride]
  float* k = q + kTile * kRowStride;        // [kMaxT][kRowStride]
  float* v = k + kMaxT * kRowStride;        // [kMaxT][kRowStride]
  float* scores = v + kMaxT * kRowStride;   // [kTile][kScoreStride]: scores, then probabilities
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), s.T, s.channels()};
  const int q0 = blockIdx.x * kTile, rows = min(kTile, s.T - q0), keys = q0 + rows;  // causal: keys < keys

  load_qkv_rows(q, qkv, bias, args.rope, at, 0, q0, rows);
  load_qkv_rows(k, qkv, bias, args.rope, at, 1, 0, keys);
  load_qkv_rows(v, qkv, bias, args.rope, at, 2, 0, keys);
  __syncthreads();

  block_matmul<4, 4>(rows, keys, kHeadDim, SmemView{q, kRowStride, 1}, SmemView{k, kRowStride, 1},
                     [&](int i, int j, float dot) {
                       scores[i * kScoreStride + j] = j <= q0 + i ? args.scale * dot : -INFINITY;
                     });
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = warp; i < rows; i += kThreads / 32) {
    float* row = scores + i * kScoreStride;
    float max = -INFINITY;
    for (int j = lane; j < keys; j += 32) max = fmaxf(max, row[j]);
    max = warp_max(max);
    float sum = 0;
    for (int j = lane; j < keys; j += 32) sum += expf(row[j] - max);  // exp(-inf) = 0 above the diagonal
    sum = warp_sum(sum);
    const float inv_sum = 1.0f / sum;
    for (int j = lane; j < keys; j += 32) row[j] = expf(row[j] - max) * inv_sum;
    if (lane == 0) lse[at.stats_at(q0 + i, s.heads)] = max + logf(sum);
  }
  __syncthreads();

  block_matmul<4, 2>(rows, kHeadDim, keys, SmemView{scores, kScoreStride, 1}, SmemView{v, 1, kRowStride},
                     [&](int i, int d, float value) { out[at.rows_at(q0 + i) + d] = value; });
}

// dq for one query tile: p = exp(scale q.k - lse), ds = p (dout.v - delta), dq = scale ds k. Also writes
// delta = rowsum(dout * out) for the dk/dv kernel that runs next.
__global__ void __launch_bounds__(kThreads)
    fused_attention_backward_dq_kernel(float* dqkv, float* delta, const float* dout, const float* out,
                                       const float* lse, const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ float smem[];
  float* q = smem;                             // [kTile][kRowStride], later dq (rotated)
  float* dO = q + kTile * kRowStride;          // [kTile][kRowStride]
  float* k = dO + kTile * kRowStride;          // [kMaxT][kRowStride]
  float* v = k + kMaxT * kRowStride;           // [kMaxT][kRowStride]
  float* scores = v + kMaxT * kRowStride;      // [kTile][kScoreStride]: p, then ds
  float* row_lse = scores + kTile * kScoreStride;  // [kTile]
  float* row_delta = row_lse + kTile;              // [kTile]
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), s.T, s.channels()};
  const int q0 = blockIdx.x * kTile, rows = min(kTile, s.T - q0), keys = q0 + rows;

  load_qkv_rows(q, qkv, bias, args.rope, at, 0, q0, rows);
  load_qkv_rows(k, qkv, bias, args.rope, at, 1, 0, keys);
  load_qkv_rows(v, qkv, bias, args.rope, at, 2, 0, keys);
  load_head_rows(dO, dout, at, q0, rows);
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = warp; i < rows; i += kThreads / 32) {
    const float* o = out + at.rows_at(q0 + i);
    float dot = 0;
    for (int d = lane; d < kHeadDim; d += 32) dot += dO[i * kRowStride + d] * o[d];
    dot = warp_sum(dot);
    if (lane == 0) {
      row_delta[i] = dot;
      delta[at.stats_at(q0 + i, s.heads)] = dot;
      row_lse[i] = lse[at.stats_at(q0 + i, s.heads)];
    }
  }
  __syncthreads();

  block_matmul<4, 4>(rows, keys, kHeadDim, SmemView{q, kRowStride, 1}, SmemView{k, kRowStride, 1},
                     [&](int i, int j, float dot) {
                       scores[i * kScoreStride + j] = j <= q0 + i ? expf(args.scale * dot - row_lse[i]) : 0.0f;
                     });
  __syncthreads();
  block_matmul<4, 4>(rows, keys, kHeadDim, SmemView{dO, kRowStride, 1}, SmemView{v, kRowStride, 1},
                     [&](int i, int j, float dp) {
                       float& cell = scores[i * kScoreStride + j];  // this thread's own cell: p in, ds out
                       cell = cell * (dp - row_delta[i]);
                     });
  __syncthreads();
  block_matmul<4, 2>(rows, kHeadDim, keys, SmemView{scores, kScoreStride, 1}, SmemView{k, 1, kRowStride},
                     [&](int i, int d, float value) { q[i * kRowStride + d] = args.scale * value; });
  __syncthreads();
  store_qkv_gradient_rows(dqkv, q, args.rope, at, 0, q0, rows);
}

// dk and dv for one key tile, over the queries that see it (t >= the tile's first key):
// dv = p^T dout, ds = p (dout.v - delta), dk = scale ds^T q.
__global__ void __launch_bounds__(kThreads)
    fused_attention_backward_dkv_kernel(float* dqkv, const float* delta, const float* dout, const float* lse,
                                        const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ float smem[];
  float* k = smem;                              // [kTile][kRowStride], later dk (rotated)
  float* v = k + kTile * kRowStride;            // [kTile][kRowStride], later dv
  float* q = v + kTile * kRowStride;            // [kMaxT][kRowStride]
  float* dO = q + kMaxT * kRowStride;           // [kMaxT][kRowStride]
  float* probs = dO + kMaxT * kRowStride;       // [kMaxT][kKeyTileStride]: [query][key], p then ds
  float* row_lse = probs + kMaxT * kKeyTileStride;  // [kMaxT]
  float* row_delta = row_lse + kMaxT;               // [kMaxT]
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), s.T, s.channels()};
  const int k0 = blockIdx.x * kTile, keys = min(kTile, s.T - k0), queries = s.T - k0;  // query r is t = k0 + r

  load_qkv_rows(k, qkv, bias, args.rope, at, 1, k0, keys);
  load_qkv_rows(v, qkv, bias, args.rope, at, 2, k0, keys);
  load_qkv_rows(q, qkv, bias, args.rope, at, 0, k0, queries);
  load_head_rows(dO, dout, at, k0, queries);
  for (int r = threadIdx.x; r < queries; r += blockDim.x) {
    row_lse[r] = lse[at.stats_at(k0 + r, s.heads)];
    row_delta[r] = delta[at.stats_at(k0 + r, s.heads)];
  }
  __syncthreads();

  // Rows of these products are keys and columns queries: a warp then walks 32 queries of q or dout.
  block_matmul<4, 4>(keys, queries, kHeadDim, SmemView{k, kRowStride, 1}, SmemView{q, kRowStride, 1},
                     [&](int j, int r, float dot) {
                       probs[r * kKeyTileStride + j] = j <= r ? expf(args.scale * dot - row_lse[r]) : 0.0f;
                     });
  __syncthreads();
  // v is not overwritten: dv goes straight to memory (no rotation to undo).
  block_matmul<4, 2>(keys, kHeadDim, queries, SmemView{probs, 1, kKeyTileStride}, SmemView{dO, 1, kRowStride},
                     [&](int j, int d, float value) { dqkv[at.qkv_at(k0 + j, 2) + d] = value; });
  __syncthreads();  // the dv product read p, which ds replaces
  block_matmul<4, 4>(keys, queries, kHeadDim, SmemView{v, kRowStride, 1}, SmemView{dO, kRowStride, 1},
                     [&](int j, int r, float dp) {
                       float& cell = probs[r * kKeyTileStride + j];  // this thread's own cell: p in, ds out
                       cell = cell * (dp - row_delta[r]);
                     });
  __syncthreads();
  // k was last read by the score product, so dk can take its place.
  block_matmul<4, 2>(keys, kHeadDim, queries, SmemView{probs, 1, kKeyTileStride}, SmemView{q, 1, kRowStride},
                     [&](int j, int d, float value) { k[j * kRowStride + d] = args.scale * value; });
  __syncthreads();
  store_qkv_gradient_rows(dqkv, k, args.rope, at, 1, k0, keys);
}

dim3 fused_grid(const AttentionShape& s) {
  return dim3(ceil_div(s.T, kTile), static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
}

}  // namespace

namespace lab {

void attention_v1_configure() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kForwardSmem)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_backward_dq_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBackwardDqSmem)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_backward_dkv_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBackwardDkvSmem)));
}

void attention_v1_forward(float* out, float* lse, const float* qkv, const float* qkv_bias, RopeTable rope,
                          const AttentionShape& s, cudaStream_t stream) {
  const FusedArgs args = attention::fused_args(s, rope);
  fused_attention_forward_kernel<<<fused_grid(s), kThreads, kForwardSmem, stream>>>(out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

void attention_v1_backward(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
                           const float* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                           cudaStream_t stream) {
  const FusedArgs args = attention::fused_args(s, rope);
  fused_attention_backward_dq_kernel<<<fused_grid(s), kThreads, kBackwardDqSmem, stream>>>(
      dqkv, delta, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
  fused_attention_backward_dkv_kernel<<<fused_grid(s), kThreads, kBackwardDkvSmem, stream>>>(
      dqkv, delta, dout, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace lab
}  // namespace roofbench::gpt::cuda
