// The naive path's softmax: one thread block per score row, three passes over the row (max, sum, write),
// the way a framework without a fused kernel runs attention between its two batched GEMMs.
#include <cmath>

#include "attention_common.cuh"
#include "roofbench/cuda.hpp"

namespace roofbench::kernels {
namespace {
using namespace attention_detail;

constexpr int kSoftmaxThreads = 256;

__device__ float block_reduce(float value, bool is_max, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = is_max ? fmaxf(value, other) : value + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `shared` may still be read from the previous reduction
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  value = is_max ? -INFINITY : 0.0f;
  for (int w = 0; w < kSoftmaxThreads / 32; ++w) value = is_max ? fmaxf(value, shared[w]) : value + shared[w];
  return value;
}

template <typename T>
__global__ __launch_bounds__(kSoftmaxThreads) void masked_softmax_kernel(const float* scores, T* probabilities,
                                                                       AttentionShape shape, float scale_log2,
                                                                       bool causal) {
  __shared__ float partial[kSoftmaxThreads / 32];
  const std::int64_t row = blockIdx.x;
  const std::int64_t query = row % shape.q_len;
  AttentionShape masking = shape;
  masking.causal = causal;
  const std::int64_t visible = masking.visible_keys(query);
  const float* s = scores + row * shape.kv_len;
  T* p = probabilities + row * shape.kv_len;
  float max_score = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < visible; j += kSoftmaxThreads) max_score = fmaxf(max_score, s[j]);
  max_score = block_reduce(max_score, true, partial) * scale_log2;
  float sum = 0;
  for (std::int64_t j = threadIdx.x; j < visible; j += kSoftmaxThreads) sum += exp2f(s[j] * scale_log2 - max_score);
  const float inverse = 1.0f / block_reduce(sum, false, partial);
  for (std::int64_t j = threadIdx.x; j < shape.kv_len; j += kSoftmaxThreads)
    p[j] = from_float<T>(j < visible ? exp2f(s[j] * scale_log2 - max_score) * inverse : 0.0f);
}

}  // namespace

void launch_masked_softmax(AttentionType type, const AttentionShape& shape, const float* scores, void* probabilities,
                           float scale, cudaStream_t stream, AttentionFault fault) {
  const std::int64_t rows = shape.batch * shape.heads * shape.q_len;
  const bool causal = shape.causal && fault != AttentionFault::drop_causal_mask;
  dispatch_type(type, [&]<typename T>() {
    masked_softmax_kernel<T><<<unsigned(rows), kSoftmaxThreads, 0, stream>>>(scores, static_cast<T*>(probabilities),
                                                                          shape, scale * kLog2e, causal);
  });
  ROOFBENCH_CUDA(cudaGetLastError());
}

}  // namespace roofbench::kernels
