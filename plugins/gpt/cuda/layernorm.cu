// LayerNorm: forward (plain, and fused with the residual add before it) and backward. One warp per row;
// the row is read again from L1/L2 rather than held in registers so any C works.
#include <algorithm>
#include <array>
#include <utility>

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

// Rows of C = 32 k columns, k <= kMaxPerLane, are held in registers (k per lane, columns lane + 32 i), so
// every load of a row is issued before the first is used and the row is read once; other widths loop
// over the row and read it again from L1/L2.
inline constexpr int kMaxPerLane = 16;
bool rows_fit_in_registers(int C) { return C % 32 == 0 && C / 32 >= 1 && C / 32 <= kMaxPerLane; }

// The kernel of C = 32 k for k = 1 .. kMaxPerLane, picked at run time.
template <template <int> class Kernel, int... k>
constexpr auto per_lane_table(std::integer_sequence<int, k...>) {
  return std::array{Kernel<k + 1>::value...};
}
template <template <int> class Kernel>
auto kernel_for_width(int C) {
  static constexpr auto table = per_lane_table<Kernel>(std::make_integer_sequence<int, kMaxPerLane>{});
  return table[C / 32 - 1];
}

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

// The same forward with the row in registers (C = 32 kPerLane): the same sums in the same order.
template <bool kResidual, typename Y, typename Branch, int kPerLane>
__global__ void layernorm_forward_rows_kernel(LayerNormRows<Y> rows, float* sum, const float* x, const Branch* branch,
                                              const float* branch_bias) {
  constexpr int C = 32 * kPerLane;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows.N) return;
  const std::size_t base = static_cast<std::size_t>(row) * C + lane;
  float v[kPerLane], w[kPerLane], b[kPerLane];  // w and b read ahead of the stores they might alias
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    w[i] = rows.w[lane + 32 * i];
    b[i] = rows.b[lane + 32 * i];
    v[i] = x[base + 32 * i];
    if constexpr (kResidual)
      v[i] = v[i] + to_float(branch[base + 32 * i]) + (branch_bias ? branch_bias[lane + 32 * i] : 0.0f);
  }
  float total = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    if constexpr (kResidual) sum[base + 32 * i] = v[i];
    total += v[i];
  }
  const float mean = warp_sum(total) / C;
  float squares = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float d = v[i] - mean;
    squares += d * d;
  }
  const float rstd = 1.0f / sqrtf(warp_sum(squares) / C + rows.eps);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    rows.y[base + 32 * i] = from_float<Y>((v[i] - mean) * rstd * w[i] + b[i]);
  if (lane == 0) {
    rows.mean[row] = mean;
    rows.rstd[row] = rstd;
  }
}

template <bool kResidual, typename Y, typename Branch>
struct ForwardRowsKernel {
  template <int kPerLane>
  struct Of {
    static constexpr auto value = &layernorm_forward_rows_kernel<kResidual, Y, Branch, kPerLane>;
  };
};

template <bool kResidual, typename Y, typename Branch>
void launch_forward(LayerNormRows<Y> rows, float* sum, const float* x, const Branch* branch, const float* branch_bias,
                    cudaStream_t stream) {
  auto kernel = &layernorm_forward_kernel<kResidual, Y, Branch>;
  if (rows_fit_in_registers(rows.C))
    kernel = kernel_for_width<ForwardRowsKernel<kResidual, Y, Branch>::template Of>(rows.C);
  kernel<<<ceil_div(rows.N, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(rows, sum, x, branch, branch_bias);
  ROOFBENCH_CUDA_LAUNCH();
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w: the LayerNorm backward through its statistics.
// dx_bf16, when given, receives the same dx rounded to bf16 (the operand of R2's next bf16 matmuls).
// dy fp32, or bf16 (R2 and up: the output of a bf16 matmul, as autocast hands it over), widened on load.
template <typename DY>
__global__ void layernorm_backward_dx_kernel(float* dx, __nv_bfloat16* dx_bf16, const DY* dy, const float* x,
                                             const float* mean, const float* rstd, const float* w, int N, int C,
                                             float beta) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const std::size_t base = static_cast<std::size_t>(row) * C;
  const float mu = mean[row], rs = rstd[row];
  float sum_g = 0, sum_g_xhat = 0;
  for (int c = lane; c < C; c += 32) {
    const float g = to_float(dy[base + c]) * w[c];
    sum_g += g;
    sum_g_xhat += g * (x[base + c] - mu) * rs;
  }
  const float mean_g = warp_sum(sum_g) / C, mean_g_xhat = warp_sum(sum_g_xhat) / C;
  for (int c = lane; c < C; c += 32) {
    const float xhat = (x[base + c] - mu) * rs;
    const float value = rs * (to_float(dy[base + c]) * w[c] - mean_g - xhat * mean_g_xhat);
    // beta == 0 must not read dx: it may hold anything, NaN included.
    const float total = beta == 0.0f ? value : beta * dx[base + c] + value;
    dx[base + c] = total;
    if (dx_bf16) dx_bf16[base + c] = __float2bfloat16_rn(total);
  }
}

// The same dx with the parameter gradients' partial sums in the same pass over dy and x (the separate
// column-sum pass read both again): block b owns rows [b R, (b + 1) R) (R from layernorm_chunks, a multiple
// of kRowsPerBlock), its warps take every kRowsPerBlock-th row, each lane keeps the running sums of its
// kPerLane = C / 32 columns lane + 32 i in registers (the row too: every load of a row, dx's included when
// beta != 0, is issued before the first is used, and dy and x are read once), then the warps' sums are added
// in warp order: partials[b, c] = sum dy xhat (c < C), partials[b, C + c] = sum dy and, with_dx_sums,
// partials[b, 2C + c] = sum of the final dx (the bias gradient of the projection below whose output
// gradient dx is); a chunk's row of partials is 3C wide then, else 2C, so one second pass adds them all. A fixed order throughout, so the gradients are the same bits in every run.
static_assert(kLayerNormBlockWarps == kRowsPerBlock);

// Two blocks per SM (128 registers a thread): w is read from L1 each row rather than held in registers.
template <int kPerLane, typename DY>
__global__ void __launch_bounds__(kRowsPerBlock * 32, 2)
    layernorm_backward_fused_kernel(float* dx, __nv_bfloat16* dx_bf16, float* partials, bool with_dx_sums,
                                    const DY* dy, const float* x, const float* mean, const float* rstd,
                                    const float* __restrict__ w, int N, int chunk_rows, float beta) {
  constexpr int C = 32 * kPerLane;
  __shared__ float warp_sums[kRowsPerBlock][3 * C];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row_end = min(N, (static_cast<int>(blockIdx.x) + 1) * chunk_rows);
  float sum_w[kPerLane], sum_b[kPerLane], sum_dx[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) sum_w[i] = sum_b[i] = sum_dx[i] = 0.0f;
  for (int row = static_cast<int>(blockIdx.x) * chunk_rows + warp; row < row_end; row += kRowsPerBlock) {
    const std::size_t base = static_cast<std::size_t>(row) * C + lane;
    float d[kPerLane], xhat[kPerLane], before[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      d[i] = to_float(dy[base + 32 * i]);
      xhat[i] = x[base + 32 * i];
      before[i] = beta == 0.0f ? 0.0f : dx[base + 32 * i];  // beta == 0 must not read dx: it may hold NaN
    }
    const float mu = mean[row], rs = rstd[row];
    float sum_g = 0, sum_g_xhat = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      xhat[i] = (xhat[i] - mu) * rs;
      const float g = d[i] * __ldg(w + lane + 32 * i);
      sum_g += g;
      sum_g_xhat += g * xhat[i];
      sum_w[i] += d[i] * xhat[i];
      sum_b[i] += d[i];
      d[i] = g;  // from here on d holds g = dy w
    }
    const float mean_g = warp_sum(sum_g) / C, mean_g_xhat = warp_sum(sum_g_xhat) / C;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const float value = rs * (d[i] - mean_g - xhat[i] * mean_g_xhat);
      const float total = beta == 0.0f ? value : beta * before[i] + value;
      sum_dx[i] += total;
      dx[base + 32 * i] = total;
      if (dx_bf16) dx_bf16[base + 32 * i] = __float2bfloat16_rn(total);
    }
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    warp_sums[warp][lane + 32 * i] = sum_w[i];
    warp_sums[warp][C + lane + 32 * i] = sum_b[i];
    warp_sums[warp][2 * C + lane + 32 * i] = sum_dx[i];
  }
  __syncthreads();
  const int columns = with_dx_sums ? 3 * C : 2 * C;
  for (int col = threadIdx.x; col < columns; col += blockDim.x) {
    float total = 0;
    for (int k = 0; k < kRowsPerBlock; ++k) total += warp_sums[k][col];
    partials[static_cast<std::size_t>(blockIdx.x) * columns + col] = total;
  }
}

template <typename DY>
struct FusedBackwardArgs {
  float* dx;
  __nv_bfloat16* dx_bf16;
  float* partials;
  bool with_dx_sums;
  const DY* dy;
  const float *x, *mean, *rstd, *w;
  int N, chunk_rows, chunks;
  float beta;
};

template <typename DY, int kPerLane>
void launch_fused_backward(const FusedBackwardArgs<DY>& a, cudaStream_t stream) {
  layernorm_backward_fused_kernel<kPerLane, DY><<<a.chunks, kRowsPerBlock * 32, 0, stream>>>(
      a.dx, a.dx_bf16, a.partials, a.with_dx_sums, a.dy, a.x, a.mean, a.rstd, a.w, a.N, a.chunk_rows, a.beta);
  ROOFBENCH_CUDA_LAUNCH();
}

template <typename DY>
struct FusedBackwardLauncher {
  template <int kPerLane>
  struct Of {
    static constexpr auto value = &launch_fused_backward<DY, kPerLane>;
  };
};

// Columns [0, C): dy xhat (the weight gradient); [C, 2C): dy (the bias gradient).
template <typename DY>
struct LayerNormParamTerm {
  const DY* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  int C;
  __device__ float operator()(int row, int column) const {
    const bool weight = column < C;
    const int c = weight ? column : column - C;
    const std::size_t at = static_cast<std::size_t>(row) * C + c;
    const float d = to_float(dy[at]);
    return weight ? d * (x[at] - mean[row]) * rstd[row] : d;
  }
};

unsigned row_blocks(int N) { return ceil_div(N, kRowsPerBlock); }

}  // namespace

namespace {
template <typename Y>
void launch_layernorm_forward(Y* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                              int C, float eps, cudaStream_t stream) {
  launch_forward<false, Y, float>(LayerNormRows<Y>{y, mean, rstd, w, b, N, C, eps}, nullptr, x, nullptr, nullptr,
                                  stream);
}

template <typename Y, typename Branch>
void launch_residual_layernorm_forward(float* sum, Y* y, float* mean, float* rstd, const float* a,
                                       const Branch* branch, const float* branch_bias, const float* w,
                                       const float* b, int N, int C, float eps, cudaStream_t stream) {
  launch_forward<true, Y, Branch>(LayerNormRows<Y>{y, mean, rstd, w, b, N, C, eps}, sum, a, branch, branch_bias,
                                  stream);
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

namespace {
template <typename DY>
void launch_layernorm_backward(float* dx, float* dw, float* db, const DY* dy, const float* x, const float* mean,
                               const float* rstd, const float* w, int N, int C, float beta, float* partials,
                               cudaStream_t stream, bf16* dx_bf16, float* dx_column_sum) {
  if (rows_fit_in_registers(C)) {
    const LayerNormChunks chunks = layernorm_chunks(N);
    const bool with_dx_sums = dx_column_sum != nullptr;
    const FusedBackwardArgs<DY> args{dx, dx_bf16, partials, with_dx_sums, dy, x, mean, rstd, w, N, chunks.rows,
                                     chunks.count, beta};
    kernel_for_width<FusedBackwardLauncher<DY>::template Of>(C)(args, stream);
    column_finish(ColumnOutputs{{dw, db, dx_column_sum}, C}, partials, chunks.count, (with_dx_sums ? 3 : 2) * C,
                  stream);
    return;
  }
  layernorm_backward_dx_kernel<DY><<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(dx, dx_bf16, dy, x, mean, rstd,
                                                                                     w, N, C, beta);
  ROOFBENCH_CUDA_LAUNCH();
  column_sums(ColumnOutputs{{dw, db}, C}, N, 2 * C, LayerNormParamTerm<DY>{dy, x, mean, rstd, C}, partials, stream);
  if (dx_column_sum) column_sum(dx_column_sum, dx, N, C, partials, stream);
}
}  // namespace

void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int N, int C, float beta, float* partials,
                        cudaStream_t stream, bf16* dx_bf16, float* dx_column_sum) {
  launch_layernorm_backward(dx, dw, db, dy, x, mean, rstd, w, N, C, beta, partials, stream, dx_bf16, dx_column_sum);
}

void layernorm_backward(float* dx, float* dw, float* db, const bf16* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int N, int C, float beta, float* partials,
                        cudaStream_t stream, bf16* dx_bf16, float* dx_column_sum) {
  launch_layernorm_backward(dx, dw, db, dy, x, mean, rstd, w, N, C, beta, partials, stream, dx_bf16, dx_column_sum);
}

}  // namespace roofbench::gpt::cuda
