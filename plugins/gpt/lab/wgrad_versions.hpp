// A linear layer's weight gradient dw = dy^T x, the ways of handing it to cuBLAS that the kernel lab keeps
// (layers.hpp's WgradLayout says why the operands' layout matters on Hopper), as rows of one table: the
// rungs' layouts (v1, R0's and R5's; v3, R1's) and the lab's own v2, dy always transposed
// (weight_gradient_dy_transposed: cuBLAS "nn", the dx GEMMs' layout). All compute the same dw to TF32
// precision. plugins/gpt/README.md keeps the figures.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <span>
#include <string>

#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {

struct WgradVersion {
  const char* name;    // the lab's axis value, "v1"
  const char* layout;  // the benchmark's "layout" fact
  bool keeper;         // run by a rung
  // Floats of scratch the version needs for a layer of these sizes (0: none).
  std::size_t (*scratch_floats)(int N, int in, int out);
  // dw = dy^T x (+ beta_dw dw) on the handle's stream; scratch holds scratch_floats(N, in, out).
  void (*weight_gradient)(cublasHandle_t handle, float* dw, const float* dy, const float* x, int N, int in, int out,
                          float* scratch, float beta_dw);
};

// lab_wgrad's rows, in the axis's order.
std::span<const WgradVersion> wgrad_versions();
// The row named `name`; throws roofbench::Error naming the table's versions when there is none.
const WgradVersion& wgrad_version(const std::string& name);

}  // namespace roofbench::gpt::cuda::lab
