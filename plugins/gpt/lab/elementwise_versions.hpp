// The MLP's bias + GELU forward, GELU's backward and fc's bias gradient, the versions the kernel lab keeps,
// as rows of one table per precision: the lab's own (elementwise_versions.cu) and the keepers the trainers
// run (layers.hpp's GELU passes). fp32 (lab_elementwise, R1's tensors):
//   v1: the scalar kernels, three launches (bias + GELU, GELU's backward, the bias gradient's column sum);
//   v2: 16-byte accesses, GELU's backward fused with the bias gradient;
//   v3 (R1's): v2 with the bias moved into the fc GEMM's epilogue (linear_forward_bias, not timed here), so
//       the forward reads a pre-activation that already holds it and writes only GELU.
// bf16 (lab_elementwise_bf16, R2's tensors: z, GELU, dout and dz bf16; bias and dbias fp32):
//   v1: one pass adds the bias into z and applies GELU (z rewritten; R2's until the bias moved into the fc
//       GEMM's epilogue), GELU's backward with the bias gradient, erff and expf per element;
//   v2: the bias in the fc GEMM's epilogue, so the forward reads z and writes GELU only;
//   v3: v2 with GELU and GELU' looked up in a per-block table of every bf16 value's (the same bits);
//   v4 (R2-R4's without sm_90a; on sm_90a both passes are folded into the GEMMs, lab_fc_gelu_bf16 v14 and
//       lab_fc_gelu_backward_bf16 v2): v3's tables with z the fc GEMM's x w^T alone, the bias (bf16, as the trainers hold it) added
//       by both passes, in fp32 and rounded to bf16, and never stored: the GEMM without cuBLASLt's BIAS
//       epilogue is the faster (lab_fc_gelu_bf16 v1 against v4).
// plugins/gpt/README.md keeps the figures.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <string>

#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {

// Where a version adds fc's bias: its forward adds it into z (z rewritten, the backward reads z + bias), the
// fc GEMM's epilogue added it already (neither pass sees it), or both passes add it to z, which keeps x w^T.
enum class BiasAdded { forward_pass, gemm_epilogue, both_passes };

// One run's tensors, [rows, cols] each but the bias and dbias [cols]; partials: column_partials_floats.
template <typename Elem>
struct GeluTensors {
  Elem* z = nullptr;
  Elem* out = nullptr;
  const Elem* dout = nullptr;
  Elem* dz = nullptr;
  float* dbias = nullptr;
  float* partials = nullptr;
  const float* bias = nullptr;  // BiasAdded::forward_pass: fp32, as R1 held it
  const bf16* bias16 = nullptr;  // BiasAdded::both_passes: bf16, as R2-R4 hold it
  int rows = 0, cols = 0;
  std::size_t count() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols); }
};

template <typename Elem>
struct ElementwiseVersion {
  const char* name;  // the lab's axis value, "v1"
  bool keeper;       // run by a rung
  BiasAdded bias;
  void (*forward)(const GeluTensors<Elem>& t, cudaStream_t stream);   // out = GELU(z [+ bias])
  void (*backward)(const GeluTensors<Elem>& t, cudaStream_t stream);  // dz = dout GELU'(z [+ bias]), dbias
};

// lab_elementwise's rows (v1-v3) and lab_elementwise_bf16's (v1-v4), in the axis's order.
std::span<const ElementwiseVersion<float>> fp32_elementwise_versions();
std::span<const ElementwiseVersion<bf16>> bf16_elementwise_versions();
// The row named `name`; throws roofbench::Error naming the table's versions when there is none.
const ElementwiseVersion<float>& fp32_elementwise_version(const std::string& name);
const ElementwiseVersion<bf16>& bf16_elementwise_version(const std::string& name);

// The lab's own launchers.
// z += bias (kept: the backward reads the pre-activation), out = GELU(z), scalar (fp32 v1).
void bias_gelu_forward_scalar(float* out, float* z, const float* bias, int rows, int cols, cudaStream_t stream);
// The same with 16-byte accesses when cols % 4 == 0 and out and z are 16-byte aligned, else the scalar kernel
// (fp32 v2). The bias is read a float at a time: its offset need not be aligned.
void bias_gelu_forward_vec4(float* out, float* z, const float* bias, int rows, int cols, cudaStream_t stream);
// bf16 v1: z += bias rounded to bf16, out = GELU(z) in bf16 (cols % 4 == 0, 8-byte aligned, else throws).
void bias_gelu_forward(bf16* out, bf16* z, const float* bias, int rows, int cols, cudaStream_t stream);
// out = GELU(z) in bf16, 16-byte accesses (z and out 16-byte aligned, else throws): erff per element (v2) or
// from the per-block table of every bf16 value's (v3, and lab_fc_gelu_bf16 v1's pass). The same bits.
void gelu_forward_in_place(bf16* out, const bf16* z, std::size_t n, cudaStream_t stream);
void gelu_forward_table(bf16* out, const bf16* z, std::size_t n, cudaStream_t stream);
// dz = dout GELU'(z) in bf16 and dbias (fp32) its column sums, one pass with 16-byte accesses; cols % 8 == 0
// and 16-byte aligned pointers (throws otherwise): expf and erff per element (v1, v2) or the table (v3).
void gelu_backward_bias_grad_in_place(bf16* dz, float* dbias, const bf16* dout, const bf16* z, int rows, int cols,
                                      float* partials, cudaStream_t stream);
void gelu_backward_bias_grad_table(bf16* dz, float* dbias, const bf16* dout, const bf16* z, int rows, int cols,
                                   float* partials, cudaStream_t stream);

}  // namespace roofbench::gpt::cuda::lab
