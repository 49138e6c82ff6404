// The lab's GELU tables (elementwise_versions.hpp): each row's forward and backward passes.
#include "elementwise_versions.hpp"

#include <string>

#include "version_table.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

// fp32.
void forward_v1(const GeluTensors<float>& t, cudaStream_t s) {
  bias_gelu_forward_scalar(t.out, t.z, t.bias, t.rows, t.cols, s);
}
void forward_v2(const GeluTensors<float>& t, cudaStream_t s) {
  bias_gelu_forward_vec4(t.out, t.z, t.bias, t.rows, t.cols, s);
}
void forward_v3(const GeluTensors<float>& t, cudaStream_t s) { gelu_forward_vectorized(t.out, t.z, t.count(), s); }
void backward_three_launches(const GeluTensors<float>& t, cudaStream_t s) {
  gelu_backward(t.dz, t.dout, t.z, t.count(), s);
  column_sum(t.dbias, t.dz, t.rows, t.cols, t.partials, s);
}
void backward_fused(const GeluTensors<float>& t, cudaStream_t s) {
  gelu_backward_bias_grad(t.dz, t.dbias, t.dout, t.z, t.rows, t.cols, t.partials, s);
}

// bf16.
void forward_bf16_v1(const GeluTensors<bf16>& t, cudaStream_t s) {
  bias_gelu_forward(t.out, t.z, t.bias, t.rows, t.cols, s);
}
void forward_in_place(const GeluTensors<bf16>& t, cudaStream_t s) { gelu_forward_in_place(t.out, t.z, t.count(), s); }
void forward_table(const GeluTensors<bf16>& t, cudaStream_t s) { gelu_forward_table(t.out, t.z, t.count(), s); }
void forward_add_bias(const GeluTensors<bf16>& t, cudaStream_t s) {
  gelu_forward_add_bias(t.out, t.z, t.bias16, t.rows, t.cols, s);
}
void backward_in_place(const GeluTensors<bf16>& t, cudaStream_t s) {
  gelu_backward_bias_grad_in_place(t.dz, t.dbias, t.dout, t.z, t.rows, t.cols, t.partials, s);
}
void backward_table(const GeluTensors<bf16>& t, cudaStream_t s) {
  gelu_backward_bias_grad_table(t.dz, t.dbias, t.dout, t.z, t.rows, t.cols, t.partials, s);
}
void backward_add_bias(const GeluTensors<bf16>& t, cudaStream_t s) {
  gelu_backward_add_bias(t.dz, t.dbias, t.dout, t.z, t.bias16, t.rows, t.cols, t.partials, s);
}

const ElementwiseVersion<float> kFp32Versions[] = {
    {"v1", false, BiasAdded::forward_pass, forward_v1, backward_three_launches},
    {"v2", false, BiasAdded::forward_pass, forward_v2, backward_fused},
    {"v3", true, BiasAdded::gemm_epilogue, forward_v3, backward_fused},
};

const ElementwiseVersion<bf16> kBf16Versions[] = {
    {"v1", false, BiasAdded::forward_pass, forward_bf16_v1, backward_in_place},
    {"v2", false, BiasAdded::gemm_epilogue, forward_in_place, backward_in_place},
    {"v3", false, BiasAdded::gemm_epilogue, forward_table, backward_table},
    {"v4", true, BiasAdded::both_passes, forward_add_bias, backward_add_bias},
};

}  // namespace

std::span<const ElementwiseVersion<float>> fp32_elementwise_versions() { return kFp32Versions; }
std::span<const ElementwiseVersion<bf16>> bf16_elementwise_versions() { return kBf16Versions; }

const ElementwiseVersion<float>& fp32_elementwise_version(const std::string& name) {
  return find_version(fp32_elementwise_versions(), name, "lab_elementwise");
}
const ElementwiseVersion<bf16>& bf16_elementwise_version(const std::string& name) {
  return find_version(bf16_elementwise_versions(), name, "lab_elementwise_bf16");
}

}  // namespace roofbench::gpt::cuda::lab
