// LayerNorm: forward (plain, and fused with the residual add before it) and backward. One warp per row;
// the row is read again from L1/L2 rather than held in registers so any C works.
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

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int N, int C, float beta, float* partials,
                        cudaStream_t stream, bf16* dx_bf16) {
  layernorm_backward_dx_kernel<<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(dx, dx_bf16, dy, x, mean, rstd, w,
                                                                                 N, C, beta);
  ROOFBENCH_CUDA_LAUNCH();
  column_sums(dw, db, C, N, 2 * C, LayerNormParamTerm{dy, x, mean, rstd, C}, partials, stream);
}

}  // namespace roofbench::gpt::cuda
