// Double-precision references of the kernel lab's pieces (the lab_* benchmarks and the layer tests):
// each piece of the fused step on its own, from the same fp32 inputs the GPU kernels get.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace roofbench::gpt::reference {

// Causal attention with RoPE, from the raw qkv [B*T, 3C] and its bias [3C], as reference.cpp defines it:
// the output [B*T, C] and, for the output gradient dout [B*T, C], the gradient of the raw qkv (also of
// its bias, summed over rows).
struct AttentionReference {
  std::vector<double> out, dqkv;
};
AttentionReference attention_reference(std::span<const float> qkv, std::span<const float> bias,
                                       std::span<const float> dout, int B, int H, int T, int hd, double base);

// The MLP's elementwise middle on [rows, cols]: pre = z + bias, out = GELU(pre) (exact erf form), and for
// the output gradient dout: dz = dout GELU'(pre), dbias = the column sums of dz.
struct BiasGeluReference {
  std::vector<double> pre, out, dz, dbias;
};
BiasGeluReference bias_gelu_reference(std::span<const float> z, std::span<const float> bias,
                                      std::span<const float> dout, int rows, int cols);

// The MLP's fc layer with its GELU on some rows of x: z = x w^T + bias and gelu = GELU(z) (exact erf form),
// x the rows [rows, in] (a sample of a larger batch's, gathered), w [out, in] row-major, bias [out]; z and
// gelu [rows, out]. GELU is taken of the double z (not of z rounded to a storage type).
struct FcGeluReference {
  std::vector<double> z, gelu;
};
FcGeluReference fc_gelu_reference(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
                                  int rows, int in, int out);

// Entry (o, i) of a weight gradient dw = dy^T x: sum over the N rows of dy[n, o] x[n, i], dy [N, out] and
// x [N, in] row-major.
double weight_gradient_entry(std::span<const float> dy, std::span<const float> x, int N, int in, int out, int o,
                             int i);

}  // namespace roofbench::gpt::reference
