// One-operation elementwise kernels (the eager path), and the bias + GELU fusion of the fused path.
#include "common.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda {
namespace {

// Exact GELU, z Phi(z), as model.hpp defines it (not the tanh approximation).
__device__ inline float gelu(float z) { return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f)); }
__device__ inline float gelu_derivative(float z) {
  const float cdf = 0.5f * (1.0f + erff(z * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * z * z);
  return cdf + z * pdf;
}

#define ROOFBENCH_GPT_GRID_STRIDE(i, n)                                                         \
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < (n); \
       i += std::size_t{gridDim.x} * blockDim.x)

__global__ void add_kernel(float* out, const float* a, const float* b, std::size_t n) {
  ROOFBENCH_GPT_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}
__global__ void gelu_forward_kernel(float* out, const float* z, std::size_t n) {
  ROOFBENCH_GPT_GRID_STRIDE(i, n) out[i] = gelu(z[i]);
}
__global__ void gelu_backward_kernel(float* dz, const float* dout, const float* z, std::size_t n) {
  ROOFBENCH_GPT_GRID_STRIDE(i, n) dz[i] = dout[i] * gelu_derivative(z[i]);
}
__global__ void bias_gelu_forward_kernel(float* out, float* z, const float* bias, std::size_t n, int cols) {
  ROOFBENCH_GPT_GRID_STRIDE(i, n) {
    const float pre = z[i] + bias[i % cols];
    z[i] = pre;
    out[i] = gelu(pre);
  }
}

#undef ROOFBENCH_GPT_GRID_STRIDE

}  // namespace

void add(float* out, const float* a, const float* b, std::size_t n, cudaStream_t stream) {
  add_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, a, b, n);
  ROOFBENCH_CUDA_LAUNCH();
}

void gelu_forward(float* out, const float* z, std::size_t n, cudaStream_t stream) {
  gelu_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, z, n);
  ROOFBENCH_CUDA_LAUNCH();
}

void gelu_backward(float* dz, const float* dout, const float* z, std::size_t n, cudaStream_t stream) {
  gelu_backward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dz, dout, z, n);
  ROOFBENCH_CUDA_LAUNCH();
}

void bias_gelu_forward(float* out, float* z, const float* bias, int rows, int cols, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  bias_gelu_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, z, bias, n, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
