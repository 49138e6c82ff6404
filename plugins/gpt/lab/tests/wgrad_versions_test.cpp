// The kernel lab's weight-gradient versions (wgrad_versions.hpp), every row against double: dw = dy^T x, then
// with beta_dw 1 accumulated onto it. in < out (v3 transposes x), in > out (v2 and v3 transpose dy), in == out,
// on 200 rows: not a multiple of the transpose's 32-row tile.
#include <gtest/gtest.h>

#include <cublas_v2.h>

#include <memory>
#include <type_traits>
#include <vector>

#include "gpu_test_util.hpp"
#include "layers.hpp"
#include "wgrad_versions.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

using testing::Device;
using testing::random_floats;
using testing::rel_l2;

// The products round their inputs to TF32, as the trainer tests' TF32 GEMMs do.
constexpr double kTf32Tolerance = 5e-3;

struct LinearShape {
  int N, in, out;
};

class GptLabWeightGradient : public ::testing::TestWithParam<LinearShape> {};

TEST_P(GptLabWeightGradient, EveryVersionMatchesDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const auto [N, in, out] = GetParam();
  const auto dy = random_floats(N * out, 31), x = random_floats(N * in, 32);
  std::vector<double> dw_ref(out * in, 0);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) dw_ref[o * in + i] += double{dy[n * out + o]} * x[n * in + i];
  std::vector<double> twice(dw_ref);
  for (double& value : twice) value *= 2;
  Device dev;
  cublasHandle_t raw = nullptr;
  ROOFBENCH_CUBLAS(cublasCreate(&raw));
  const std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, decltype(&cublasDestroy)> handle(raw, cublasDestroy);
  const float *d_dy = dev.upload(dy), *d_x = dev.upload(x);
  for (const WgradVersion& version : wgrad_versions()) {
    SCOPED_TRACE(version.name);
    const std::size_t scratch_floats = version.scratch_floats(N, in, out);
    float* scratch = scratch_floats > 0 ? dev.alloc<float>(scratch_floats) : nullptr;
    float* dw = dev.alloc<float>(out * in);
    ROOFBENCH_CUDA(cudaMemset(dw, 0xff, out * in * sizeof(float)));  // NaN: every element must be written
    version.weight_gradient(handle.get(), dw, d_dy, d_x, N, in, out, scratch, 0);
    EXPECT_LT(rel_l2(Device::download(dw, out * in), dw_ref), kTf32Tolerance);
    version.weight_gradient(handle.get(), dw, d_dy, d_x, N, in, out, scratch, 1);
    EXPECT_LT(rel_l2(Device::download(dw, out * in), twice), kTf32Tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GptLabWeightGradient,
                         ::testing::Values(LinearShape{256, 64, 96}, LinearShape{256, 96, 64},
                                           LinearShape{200, 64, 64}),
                         [](const ::testing::TestParamInfo<LinearShape>& info) {
                           return "N" + std::to_string(info.param.N) + "_in" + std::to_string(info.param.in) +
                                  "_out" + std::to_string(info.param.out);
                         });

// v2 transposes dy whatever the shape; v1 needs no scratch; v3 the narrower operand (dy on a tie).
TEST(GptLab, WgradScratch) {
  const auto v1 = wgrad_version("v1");
  const auto v2 = wgrad_version("v2");
  const auto v3 = wgrad_version("v3");
  EXPECT_EQ(v1.scratch_floats(256, 64, 96), 0u);
  EXPECT_EQ(v2.scratch_floats(256, 64, 96), 256u * 96);
  EXPECT_EQ(v2.scratch_floats(256, 96, 64), 256u * 64);
  EXPECT_EQ(v3.scratch_floats(256, 64, 96), 256u * 64);
  EXPECT_THROW(wgrad_version("v4"), Error);
}

}  // namespace
}  // namespace roofbench::gpt::cuda::lab
