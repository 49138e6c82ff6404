// Cross-entropy over the vocabulary: eager as three launches, fused as one; and the step's mean loss.
#include "common.cuh"
#include "layers.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda {
namespace {

// max and log-sum-exp of one row, a warp per row (V is small: tens of tokens).
struct RowStats {
  float max, lse;
};
__device__ inline RowStats row_stats(const float* row, int V, int lane) {
  float max = -INFINITY;
  for (int v = lane; v < V; v += 32) max = fmaxf(max, row[v]);
  max = warp_max(max);
  float sum = 0;
  for (int v = lane; v < V; v += 32) sum += expf(row[v] - max);
  return {max, max + logf(warp_sum(sum))};
}

__global__ void log_softmax_kernel(float* logprobs, const float* logits, int N, int V) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* in = logits + static_cast<std::size_t>(row) * V;
  const RowStats stats = row_stats(in, V, lane);
  for (int v = lane; v < V; v += 32) logprobs[static_cast<std::size_t>(row) * V + v] = in[v] - stats.lse;
}

__global__ void nll_kernel(float* losses, const float* logprobs, const std::uint8_t* targets, int N, int V) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < N) losses[row] = -logprobs[static_cast<std::size_t>(row) * V + targets[row]];
}

__global__ void cross_entropy_backward_kernel(float* dlogits, const float* logprobs, const std::uint8_t* targets,
                                              int N, int V) {
  const std::size_t n = static_cast<std::size_t>(N) * V;
  const float inv_n = 1.0f / N;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = i / V;
    const int v = static_cast<int>(i % V);
    dlogits[i] = (expf(logprobs[i]) - (v == targets[row] ? 1.0f : 0.0f)) * inv_n;
  }
}

template <typename D>
__global__ void fused_cross_entropy_kernel(float* losses, D* dlogits, const float* logits,
                                           const std::uint8_t* targets, int N, int V) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const std::size_t base = static_cast<std::size_t>(row) * V;
  const RowStats stats = row_stats(logits + base, V, lane);
  const int target = targets[row];
  const float inv_n = 1.0f / N;
  for (int v = lane; v < V; v += 32)
    dlogits[base + v] = from_float<D>((expf(logits[base + v] - stats.lse) - (v == target ? 1.0f : 0.0f)) * inv_n);
  if (lane == 0) losses[row] = stats.lse - logits[base + target];
}

inline constexpr int kLossThreads = 1024;

// One block, a fixed summation order: the same losses always give the same mean.
__global__ void mean_loss_kernel(float* loss, float* history, int history_size,
                                 const unsigned long long* step_counter, const float* losses, int N) {
  __shared__ float warp_sums[kLossThreads / 32];
  float sum = 0;
  for (int i = threadIdx.x; i < N; i += blockDim.x) sum += losses[i];
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = warp_sum(threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.0f);
    if (threadIdx.x == 0) {
      const float mean = sum / N;
      *loss = mean;
      // The step that drew this batch is counter - 1; wraps harmlessly before the first draw.
      history[(*step_counter - 1) & static_cast<unsigned long long>(history_size - 1)] = mean;
    }
  }
}

unsigned row_blocks(int N) { return ceil_div(N, kRowsPerBlock); }

}  // namespace

void log_softmax_forward(float* logprobs, const float* logits, int N, int V, cudaStream_t stream) {
  log_softmax_kernel<<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(logprobs, logits, N, V);
  ROOFBENCH_CUDA_LAUNCH();
}

void nll_forward(float* losses, const float* logprobs, const std::uint8_t* targets, int N, int V,
                 cudaStream_t stream) {
  nll_kernel<<<ceil_div(N, 256), 256, 0, stream>>>(losses, logprobs, targets, N, V);
  ROOFBENCH_CUDA_LAUNCH();
}

void cross_entropy_backward(float* dlogits, const float* logprobs, const std::uint8_t* targets, int N, int V,
                            cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(N) * V;
  cross_entropy_backward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dlogits, logprobs,
                                                                                           targets, N, V);
  ROOFBENCH_CUDA_LAUNCH();
}

void fused_cross_entropy(float* losses, float* dlogits, const float* logits, const std::uint8_t* targets, int N,
                         int V, cudaStream_t stream) {
  fused_cross_entropy_kernel<<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(losses, dlogits, logits, targets,
                                                                               N, V);
  ROOFBENCH_CUDA_LAUNCH();
}

void fused_cross_entropy(float* losses, bf16* dlogits, const float* logits, const std::uint8_t* targets, int N,
                         int V, cudaStream_t stream) {
  fused_cross_entropy_kernel<<<row_blocks(N), kRowsPerBlock * 32, 0, stream>>>(losses, dlogits, logits, targets,
                                                                               N, V);
  ROOFBENCH_CUDA_LAUNCH();
}

void mean_loss(float* loss, float* history, int history_size, const unsigned long long* step_counter,
               const float* losses, int N, cudaStream_t stream) {
  if (history_size <= 0 || (history_size & (history_size - 1)) != 0)
    throw Error("gpt: the loss history size must be a power of two");
  mean_loss_kernel<<<1, kLossThreads, 0, stream>>>(loss, history, history_size, step_counter, losses, N);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
