// One-operation elementwise kernels (the eager path), and the bias + GELU fusion of the fused path.
#include <cstdint>

#include "column_reduce.cuh"
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

// bias_gelu_forward, four elements per thread (16-byte loads and stores; cols a multiple of 4, n / 4 below
// 2^31): the same arithmetic per element as the scalar kernel above, 32-bit index math.
// The bias is read one float at a time (cached; its offset in the flat parameters need not be 16-byte aligned).
__global__ void bias_gelu_forward4_kernel(float4* out, float4* z, const float* bias, int quads, int col_quads) {
  for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
    const float* b = bias + 4 * (q % col_quads);
    const float4 x = z[q];
    const float4 pre = make_float4(x.x + b[0], x.y + b[1], x.z + b[2], x.w + b[3]);
    z[q] = pre;
    out[q] = make_float4(gelu(pre.x), gelu(pre.y), gelu(pre.z), gelu(pre.w));
  }
}

// dz = dout * GELU'(z), written four columns at a time, and returned for the bias gradient's column sums.
struct GeluBackwardTerm4 {
  float* dz;
  const float* dout;
  const float* z;
  int cols;
  __device__ float4 operator()(int row, int col) const {
    const std::size_t i = static_cast<std::size_t>(row) * cols + col;
    const float4 g = *reinterpret_cast<const float4*>(dout + i);
    const float4 x = *reinterpret_cast<const float4*>(z + i);
    const float4 d = make_float4(g.x * gelu_derivative(x.x), g.y * gelu_derivative(x.y), g.z * gelu_derivative(x.z),
                                 g.w * gelu_derivative(x.w));
    *reinterpret_cast<float4*>(dz + i) = d;
    return d;
  }
};

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

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

void bias_gelu_forward(float* out, float* z, const float* bias, int rows, int cols, cudaStream_t stream,
                       bool vectorized) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  if (vectorized && cols % 4 == 0 && n / 4 < (std::size_t{1} << 31) && aligned16(out) && aligned16(z)) {
    const std::size_t quads = n / 4;
    bias_gelu_forward4_kernel<<<elementwise_blocks(quads), kElementwiseThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), reinterpret_cast<float4*>(z), bias,
        static_cast<int>(quads), cols / 4);
    ROOFBENCH_CUDA_LAUNCH();
    return;
  }
  bias_gelu_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, z, bias, n, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

void gelu_backward_bias_grad(float* dz, float* dbias, const float* dout, const float* z, int rows, int cols,
                             float* partials, cudaStream_t stream) {
  if (cols % 4 != 0 || !aligned16(dz) || !aligned16(dout) || !aligned16(z)) {
    gelu_backward(dz, dout, z, static_cast<std::size_t>(rows) * cols, stream);
    column_sum(dbias, dz, rows, cols, partials, stream);
    return;
  }
  column_sums4<8>(dbias, nullptr, cols, rows, cols, GeluBackwardTerm4{dz, dout, z, cols}, partials, stream);
}

}  // namespace roofbench::gpt::cuda
