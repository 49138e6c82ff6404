// One-operation elementwise kernels (the eager path), the GELU passes of the fused paths (R1's 16-byte fp32
// ones, R2-R4's bf16 table passes with fc's bias added inside) and the fp32 -> bf16 cast. The GELU kernels are
// in gelu.cuh, which the kernel lab's versions share.
#include <string>

#include "column_reduce.cuh"
#include "common.cuh"
#include "gelu.cuh"
#include "layers.hpp"
#include "roofbench/plugin.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda {
namespace {

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
#undef ROOFBENCH_GPT_GRID_STRIDE

__global__ void cast_to_bf16_kernel(__nv_bfloat16* out, const float* in, std::size_t n) {
  const std::size_t quads = n / 4;
  for (std::size_t q = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; q < quads;
       q += std::size_t{gridDim.x} * blockDim.x)
    store4(out + 4 * q, load4(in + 4 * q));
  // The tail past the last whole quad, by the first threads.
  const std::size_t tail = 4 * quads + blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (tail < n) out[tail] = __float2bfloat16_rn(in[tail]);
}

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

void gelu_backward_bias_grad(float* dz, float* dbias, const float* dout, const float* z, int rows, int cols,
                             float* partials, cudaStream_t stream) {
  if (cols % 4 != 0 || !aligned16(dz) || !aligned16(dout) || !aligned16(z)) {
    gelu_backward(dz, dout, z, static_cast<std::size_t>(rows) * cols, stream);
    column_sum(dbias, dz, rows, cols, partials, stream);
    return;
  }
  column_sums_vec<4, 8>(ColumnOutputs{{dbias}, cols}, rows, cols, GeluBackwardTerm<float>{dz, dout, z, cols}, partials,
                        stream);
}

void cast_to_bf16(bf16* out, const float* in, std::size_t n, cudaStream_t stream) {
  if (!aligned4(out) || !aligned4(in)) throw Error("gpt: cast_to_bf16 needs 16-byte aligned buffers");
  cast_to_bf16_kernel<<<elementwise_blocks(n / 4 + 1), kElementwiseThreads, 0, stream>>>(out, in, n);
  ROOFBENCH_CUDA_LAUNCH();
}

namespace {

// cols > 0 as well as a multiple of 8: the forward's launch divides by cols / 8 (host and device).
void check_gelu_bias_shape(const char* what, const bf16* a, const bf16* b, const bf16* c, const bf16* bias, int rows,
                           int cols) {
  if (rows < 0 || cols <= 0 || cols % 8 != 0 || !bias || !aligned16(a) || !aligned16(b) || !aligned16(c))
    throw Error(std::string("gpt: ") + what + " needs rows >= 0, cols > 0 and a multiple of 8, a bias and 16-byte "
                "aligned tensors");
}

}  // namespace

void gelu_forward_add_bias(bf16* out, const bf16* xw, const bf16* bias, int rows, int cols, cudaStream_t stream) {
  check_gelu_bias_shape("gelu_forward_add_bias", out, xw, out, bias, rows, cols);
  launch_gelu_forward_table<true>(out, xw, static_cast<std::size_t>(rows) * cols, bias, cols, stream);
}

void gelu_backward_add_bias(bf16* dz, float* dbias, const bf16* dout, const bf16* xw, const bf16* bias, int rows,
                            int cols, float* partials, cudaStream_t stream) {
  check_gelu_bias_shape("gelu_backward_add_bias", dz, dout, xw, bias, rows, cols);
  launch_gelu_backward_bias_grad_table<true>(dz, dbias, dout, xw, bias, rows, cols, partials, stream);
}

void gelu_forward_vectorized(float* out, const float* z, std::size_t n, cudaStream_t stream) {
  launch_gelu_forward_vec(out, z, n, stream);
}

}  // namespace roofbench::gpt::cuda
