// LayerNorm: forward (plain, and fused with the residual add before it) and backward. One warp per row;
// the row is read again from L1/L2 rather than held in registers so any C works.
#include <algorithm>

#include "column_reduce.cuh"
#include "common.cuh"
#include "layers.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda {
namespace {

template <typename Y>
struct LayerNormRows {
  Y* y;
  float* mean;
  float* rstd;
  const float* w;
  const float* b;
  int N, C;
  float eps;
};

// kResidual: the row is first formed as a + branch + branch_bias and written to `sum`, which the fused
// path uses to skip a separate residual-add kernel and its extra trip through memory. The statistics and
// the residual stream are fp32 whatever the storage of the branch and of y (bf16 in R2: what autocast's
// bf16 matmul hands over, and what the next matmul reads).
template <bool kResidual, typename Y, typename Branch>
__global__ void layernorm_forward_kernel(LayerNormRows<Y> rows, float* sum, const float* x, const Branch* branch,
                                         const float* branch_bias) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows.N) return;
  const int C = rows.C;
  const std::size_t base = static_cast<std::size_t>(row) * C;
  const float* in = x + base;
  float total = 0;
  if constexpr (kResidual) {
    for (int c = lane; c < C; c += 32) {
      const float s = x[base + c] + to_float(branch[base + c]) + (branch_bias ? branch_bias[c] : 0.0f);
      sum[base + c] = s;
      total += s;
    }
    in = sum + base;  // this lane reads back only what it wrote itself
  } else {
    for (int c = lane; c < C; c += 32) total += in[c];
  }
  const float mean = warp_sum(total) / C;
  float squares = 0;
  for (int c = lane; c < C; c += 32) {
    const float d = in[c] - mean;
    squares += d * d;
  }
  const float rstd = 1.0f / sqrtf(warp_sum(squares) / C + rows.eps);
  for (int c = lane; c < C; c += 32)
    rows.y[base + c] = from_float<Y>((in[c] - mean) * rstd * rows.w[c] + rows.b[c]);
  if (lane == 0) {
    rows.mean[row] = mean;
    rows.rstd[row] = rstd;
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w: the LayerNorm backward through its statistics.
// dx_bf16, when given, receives the same dx rounded to bf16 (the operand of R2's next bf16 matmuls).
__global__ void layernorm_backward_dx_kernel(float* dx, __nv_bfloat16* dx_bf16, const float* dy, const float* x,
                                             const float* mean, const float* rstd, const float* w, int N, int C,
                                             float beta) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const std::size_t base = static_cast<std::size_t>(row) * C;
  const float mu = mean[row], rs = rstd[row];
  float sum_g = 0, sum_g_xhat = 0;
  for (int c = lane; c < C; c += 32) {
    const float g = dy[base + c] * w[c];
    sum_g += g;
    sum_g_xhat += g * (x[base + c] - mu) * rs;
  }
  const float mean_g = warp_sum(sum_g) / C, mean_g_xhat = warp_sum(sum_g_xhat) / C;
  for (int c = lane; c < C; c += 32) {
    const float xhat = (x[base + c] - mu) * rs;
    const float value = rs * (dy[base + c] * w[c] - mean_g - xhat * mean_g_xhat);
    // beta == 0 must not read dx: it may hold anything, NaN included.
    const float total = beta == 0.0f ? value : beta * dx[base + c] + value;
    dx[base + c] = total;
    if (dx_bf16) dx_bf16[base + c] = __float2bfloat16_rn(total);
  }
}

// The same dx with the parameter gradients' partial sums in the same pass over dy and x (the separate
// column-sum pass read both again): block b owns rows [b R, (b + 1) R) (R from layernorm_chunks, a multiple
// of kRowsPerBlock), its warps take every kRowsPerBlock-th row, each lane keeps the running sums
// of its columns lane + 32 i in registers (the row too, so dy and x are read once), then the warps' sums
// are added in warp order: partials[b, c] = sum dy xhat (c < C), partials[b, C + c] = sum dy. A fixed
// order throughout, so the gradients are the same bits in every run. C a multiple of 32, at most
// 32 kMaxPerLane.
inline constexpr int kMaxPerLane = 16;
static_assert(kLayerNormBlockWarps == kRowsPerBlock);
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    layernorm_backward_fused_kernel(float* dx, __nv_bfloat16* dx_bf16, float* partials, const float* dy,
                                    const float* x, const float* mean, const float* rstd, const float* w, int N,
                                    int C, int chunk_rows, float beta) {
  __shared__ float warp_sums[kRowsPerBlock][2 * 32 * kMaxPerLane];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, per_lane = C / 32;
  const int row_end = min(N, (static_cast<int>(blockIdx.x) + 1) * chunk_rows);
  float sum_w[kMaxPerLane], sum_b[kMaxPerLane], w_lane[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    sum_w[i] = sum_b[i] = 0.0f;
    w_lane[i] = i < per_lane ? w[lane + 32 * i] : 0.0f;
  }
  for (int row = static_cast<int>(blockIdx.x) * chunk_rows + warp; row < row_end; row += kRowsPerBlock) {
    const std::size_t base = static_cast<std::size_t>(row) * C;
    const float mu = mean[row], rs = rstd[row];
    float g_row[kMaxPerLane], xhat[kMaxPerLane];
    float sum_g = 0, sum_g_xhat = 0;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      g_row[i] = xhat[i] = 0.0f;
      if (i < per_lane) {
        const float d = dy[base + lane + 32 * i];
        xhat[i] = (x[base + lane + 32 * i] - mu) * rs;
        g_row[i] = d * w_lane[i];
        sum_g += g_row[i];
        sum_g_xhat += g_row[i] * xhat[i];
        sum_w[i] += d * xhat[i];
        sum_b[i] += d;
      }
    }
    const float mean_g = warp_sum(sum_g) / C, mean_g_xhat = warp_sum(sum_g_xhat) / C;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      if (i >= per_lane) continue;
      const std::size_t at = base + lane + 32 * i;
      const float value = rs * (g_row[i] - mean_g - xhat[i] * mean_g_xhat);
      const float total = beta == 0.0f ? value : beta * dx[at] + value;  // beta == 0 must not read dx
      dx[at] = total;
      if (dx_bf16) dx_bf16[at] = __float2bfloat16_rn(total);
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    if (i >= per_lane) continue;
    warp_sums[warp][lane + 32 * i] = sum_w[i];
    warp_sums[warp][C + lane + 32 * i] = sum_b[i];
  }
  __syncthreads();
  for (int col = threadIdx.x; col < 2 * C; col += blockDim.x) {
    float total = 0;
    for (int k = 0; k < kRowsPerBlock; ++k) total += warp_sums[k][col];
    partials[static_cast<std::size_t>(blockIdx.x) * 2 * C + col] = total;
  }
}

bool layernorm_backward_fusable(int C) { return C % 32 == 0 && C / 32 <= kMaxPerLane; }

// Columns [0, C): dy xhat (the weight gradient); [C, 2C): dy (the bias gradient).
struct LayerNormParamTerm {
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  int C;
  __device__ float operator()(int row, int column) const {
    const bool weight = column < C;
    const int c = weight ? column : column - C;
    const std::size_t at = static_cast<std::size_t>(row) * C + c;
    return weight ? dy[at] * (x[at] - mean[row]) * rstd[row] : dy[at];
  }
};

unsigned row_blocks(int N) { return ceil_div(N, kRowsPerBlock); }

}  // namespace

namespace {
template <typename Y>
void launch_layernorm_forward(Y* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                              int C, float eps, cudaStream_t stream) {
  layernorm_forward_kernel<false, Y, float><<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(
      LayerNormRows<Y>{y, mean, rstd, w, b, N, C, eps}, nullptr, x, nullptr, nullptr);
  ROOFBENCH_CUDA_LAUNCH();
}

template <typename Y, typename Branch>
void launch_residual_layernorm_forward(float* sum, Y* y, float* mean, float* rstd, const float* a,
                                       const Branch* branch, const float* branch_bias, const float* w,
                                       const float* b, int N, int C, float eps, cudaStream_t stream) {
  layernorm_forward_kernel<true, Y, Branch><<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(
      LayerNormRows<Y>{y, mean, rstd, w, b, N, C, eps}, sum, a, branch, branch_bias);
  ROOFBENCH_CUDA_LAUNCH();
}
}  // namespace

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                       int C, float eps, cudaStream_t stream) {
  launch_layernorm_forward(y, mean, rstd, x, w, b, N, C, eps, stream);
}

void layernorm_forward(bf16* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                       int C, float eps, cudaStream_t stream) {
  launch_layernorm_forward(y, mean, rstd, x, w, b, N, C, eps, stream);
}

void residual_layernorm_forward(float* sum, float* y, float* mean, float* rstd, const float* a, const float* branch,
                                const float* branch_bias, const float* w, const float* b, int N, int C, float eps,
                                cudaStream_t stream) {
  launch_residual_layernorm_forward(sum, y, mean, rstd, a, branch, branch_bias, w, b, N, C, eps, stream);
}

void residual_layernorm_forward(float* sum, bf16* y, float* mean, float* rstd, const float* a, const bf16* branch,
                                const float* branch_bias, const float* w, const float* b, int N, int C, float eps,
                                cudaStream_t stream) {
  launch_residual_layernorm_forward(sum, y, mean, rstd, a, branch, branch_bias, w, b, N, C, eps, stream);
}

std::size_t layernorm_partials_floats(int N, int C) {
  return std::max(column_partials_floats(N, 2 * C), layernorm_chunk_partials(N, C));
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int N, int C, float beta, float* partials,
                        cudaStream_t stream, bf16* dx_bf16) {
  if (layernorm_backward_fusable(C)) {
    const LayerNormChunks chunks = layernorm_chunks(N);
    layernorm_backward_fused_kernel<<<chunks.count, kRowsPerBlock * 32, 0, stream>>>(
        dx, dx_bf16, partials, dy, x, mean, rstd, w, N, C, chunks.rows, beta);
    ROOFBENCH_CUDA_LAUNCH();
    column_finish(dw, db, C, partials, chunks.count, 2 * C, stream);
    return;
  }
  layernorm_backward_dx_kernel<<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(dx, dx_bf16, dy, x, mean, rstd, w,
                                                                                 N, C, beta);
  ROOFBENCH_CUDA_LAUNCH();
  column_sums(dw, db, C, N, 2 * C, LayerNormParamTerm{dy, x, mean, rstd, C}, partials, stream);
}

}  // namespace roofbench::gpt::cuda
