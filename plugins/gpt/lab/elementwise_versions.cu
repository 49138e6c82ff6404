// The kernel lab's GELU passes (elementwise_versions.hpp): the kernels the rungs no longer run, on the
// training library's shared GELU kernels (gelu.cuh), and the tables of every version.
#include <string>
#include <type_traits>

#include "column_reduce.cuh"
#include "common.cuh"
#include "elementwise_versions.hpp"
#include "gelu.cuh"
#include "roofbench/plugin.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda::lab {
namespace {

__global__ void bias_gelu_forward_kernel(float* out, float* z, const float* bias, std::size_t n, int cols) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < (n);
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float pre = z[i] + bias[i % cols];
    z[i] = pre;
    out[i] = gelu(pre);
  }
}

// bias_gelu_forward, four elements per thread (16-byte loads and stores; cols a multiple of 4, n / 4 below
// 2^31): the same arithmetic per element as the scalar kernel above, 32-bit index math.
// The bias is read one float at a time (cached; its offset in the flat parameters need not be 16-byte aligned).
// T bf16 (R2): z and out are bf16; GELU reads the pre-activation as stored (rounded), as autocast's does.
template <typename T>
__global__ void bias_gelu_forward4_kernel(T* out, T* z, const float* bias, int quads, int col_quads) {
  for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
    const float* b = bias + 4 * (q % col_quads);
    const float4 x = load4(z + 4 * static_cast<std::size_t>(q));
    float4 pre = make_float4(x.x + b[0], x.y + b[1], x.z + b[2], x.w + b[3]);
    store4(z + 4 * static_cast<std::size_t>(q), pre);
    if constexpr (!std::is_same_v<T, float>) pre = load4(z + 4 * static_cast<std::size_t>(q));
    store4(out + 4 * static_cast<std::size_t>(q), make_float4(gelu(pre.x), gelu(pre.y), gelu(pre.z), gelu(pre.w)));
  }
}

}  // namespace

void bias_gelu_forward_scalar(float* out, float* z, const float* bias, int rows, int cols, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  bias_gelu_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, z, bias, n, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

void bias_gelu_forward_vec4(float* out, float* z, const float* bias, int rows, int cols, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  if (cols % 4 != 0 || n / 4 >= (std::size_t{1} << 31) || !aligned16(out) || !aligned16(z)) {
    bias_gelu_forward_scalar(out, z, bias, rows, cols, stream);
    return;
  }
  const std::size_t quads = n / 4;
  bias_gelu_forward4_kernel<float><<<elementwise_blocks(quads), kElementwiseThreads, 0, stream>>>(
      out, z, bias, static_cast<int>(quads), cols / 4);
  ROOFBENCH_CUDA_LAUNCH();
}

void bias_gelu_forward(bf16* out, bf16* z, const float* bias, int rows, int cols, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  if (cols % 4 != 0 || n / 4 >= (std::size_t{1} << 31) || !aligned4(out) || !aligned4(z))
    throw Error("gpt: bias_gelu_forward on bf16 needs cols % 4 == 0 and 8-byte aligned buffers");
  const std::size_t quads = n / 4;
  bias_gelu_forward4_kernel<bf16><<<elementwise_blocks(quads), kElementwiseThreads, 0, stream>>>(
      out, z, bias, static_cast<int>(quads), cols / 4);
  ROOFBENCH_CUDA_LAUNCH();
}

void gelu_forward_in_place(bf16* out, const bf16* z, std::size_t n, cudaStream_t stream) {
  launch_gelu_forward_vec(out, z, n, stream);
}

void gelu_forward_table(bf16* out, const bf16* z, std::size_t n, cudaStream_t stream) {
  if (!aligned16(out) || !aligned16(z)) throw Error("gpt: the bf16 GELU forward needs 16-byte aligned buffers");
  launch_gelu_forward_table<false>(out, z, n, nullptr, 8, stream);
}

namespace {
void check_bf16_backward(const bf16* dz, const bf16* dout, const bf16* z, int cols) {
  if (cols % 8 != 0 || !aligned16(dz) || !aligned16(dout) || !aligned16(z))
    throw Error("gpt: gelu_backward_bias_grad on bf16 needs cols % 8 == 0 and 16-byte aligned buffers");
}
}  // namespace

void gelu_backward_bias_grad_in_place(bf16* dz, float* dbias, const bf16* dout, const bf16* z, int rows, int cols,
                                      float* partials, cudaStream_t stream) {
  check_bf16_backward(dz, dout, z, cols);
  column_sums_vec<8, 8>(ColumnOutputs{{dbias}, cols}, rows, cols, GeluBackwardTerm<bf16>{dz, dout, z, cols}, partials,
                        stream);
}

void gelu_backward_bias_grad_table(bf16* dz, float* dbias, const bf16* dout, const bf16* z, int rows, int cols,
                                   float* partials, cudaStream_t stream) {
  check_bf16_backward(dz, dout, z, cols);
  launch_gelu_backward_bias_grad_table<false>(dz, dbias, dout, z, nullptr, rows, cols, partials, stream);
}

}  // namespace roofbench::gpt::cuda::lab
