// lab_fc_gelu_bf16's cuDNN graph (fc_gelu_cudnn.hpp: fc's GEMM + bias + exact GELU, z and gelu both written)
// against the double reference and against v1, cuBLASLt's GEMM with its bias epilogue followed by the GELU
// table pass (R2-R4's until the bias moved into the GELU passes, lab v4), at the model's widths (C 512,
// H 2048) on 300 rows and on an odd 301 (no tile divides either). Skipped, with cuDNN's reason, where cuDNN
// offers no plan for the graph. Built only where cuDNN is found.
#include <gtest/gtest.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bf16.hpp"
#include "fc_gelu_cudnn.hpp"
#include "gpu_test_util.hpp"
#include "lab_reference.hpp"
#include "layers.hpp"

namespace roofbench::gpt::cuda {
namespace {

using testing::Device;
using testing::random_floats;
using testing::from_bf16;
using testing::gelu_double;
using testing::rel_l2;
using testing::to_bf16;


class GptFcGelu : public ::testing::TestWithParam<int> {};

TEST_P(GptFcGelu, CudnnGraphMatchesDoubleAndV1) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int N = GetParam(), C = 512, H = 2048;
  const std::size_t n = static_cast<std::size_t>(N) * H;
  // The inputs as the GPU holds them (bf16-exact), so the reference sees the same values; the lab's ranges.
  std::vector<float> x = random_floats(static_cast<std::size_t>(N) * C, 61);
  std::vector<float> w = random_floats(static_cast<std::size_t>(H) * C, 62, -0.1f, 0.1f);
  std::vector<float> bias = random_floats(H, 63, -0.5f, 0.5f);
  for (auto* v : {&x, &w, &bias})
    for (float& e : *v) e = round_to_bf16(e);

  Device dev;
  cudaStream_t raw_stream = nullptr;  // non-blocking: fastest_plan captures its timings into CUDA graphs
  ROOFBENCH_CUDA(cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking));
  const std::unique_ptr<std::remove_pointer_t<cudaStream_t>, decltype(&cudaStreamDestroy)> stream(raw_stream,
                                                                                                  cudaStreamDestroy);
  const bf16 *d_x = dev.upload(to_bf16(x)), *d_w = dev.upload(to_bf16(w)), *d_bias = dev.upload(to_bf16(bias));
  bf16 *z2 = dev.alloc<bf16>(n), *g2 = dev.alloc<bf16>(n), *z1 = dev.alloc<bf16>(n), *g1 = dev.alloc<bf16>(n);

  std::unique_ptr<CudnnFcGelu> graph;
  try {
    graph = std::make_unique<CudnnFcGelu>(
        FcGeluShape{N, C, H}, stream.get(), d_x, d_w, d_bias, z2, g2,
        [&](std::size_t bytes) { return static_cast<void*>(dev.alloc<char>(bytes)); });
  } catch (const NotApplicable& e) {
    GTEST_SKIP() << "cuDNN offers no plan for " << kFcGeluGraphName << ": " << e.what();
  }
  std::string facts;
  for (const Figure& f : graph->facts()) facts += f.name + "=" + f.text + "\n      ";
  std::printf("    %s\n", facts.c_str());
  RecordProperty("facts", facts);

  // The plan search wrote the outputs: poison them again (NaN), so an element one run leaves unwritten shows.
  for (bf16* out : {z2, g2, z1, g1}) ROOFBENCH_CUDA(cudaMemsetAsync(out, 0xff, n * sizeof(bf16), stream.get()));
  graph->run(stream.get());

  // v1: the GEMM with its bias epilogue, then the GELU pass.
  cublasLtHandle_t raw_lt = nullptr;
  ROOFBENCH_CUBLASLT(cublasLtCreate(&raw_lt));
  const std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, decltype(&cublasLtDestroy)> lt(raw_lt,
                                                                                                cublasLtDestroy);
  const LtWorkspace workspace{dev.alloc<char>(32u << 20), 32u << 20};
  linear_forward_bias(LtContext{lt.get(), workspace, stream.get()}, CUDA_R_16BF, z1, d_x, d_w, d_bias, N, C, H);
  gelu_forward(g1, z1, n, stream.get());
  ROOFBENCH_CUDA(cudaStreamSynchronize(stream.get()));

  const std::vector<float> z_v2 = from_bf16(Device::download(z2, n)), g_v2 = from_bf16(Device::download(g2, n));
  const std::vector<float> z_v1 = from_bf16(Device::download(z1, n)), g_v1 = from_bf16(Device::download(g1, n));
  const reference::FcGeluReference ref = reference::fc_gelu_reference(x, w, bias, N, C, H);

  // Against double: bf16 outputs round to half a step of 2^-8 (about 1e-3 relative in L2), the GEMM sums in fp32.
  EXPECT_LT(rel_l2(z_v2, ref.z), 1e-2);
  EXPECT_LT(rel_l2(g_v2, ref.gelu), 1e-2);
  EXPECT_LT(rel_l2(z_v1, ref.z), 1e-2);
  EXPECT_LT(rel_l2(g_v1, ref.gelu), 1e-2);
  // Against v1: the GEMMs sum in different orders, so z may differ by a bf16 step here and there.
  EXPECT_LT(rel_l2(z_v2, z_v1), 1e-2);
  EXPECT_LT(rel_l2(g_v2, g_v1), 1e-2);

  // How v2's GELU relates to its own z: GELU of the stored (rounded) z, rounded, is what v1 computes, but for
  // rare neighbours (layers_test counted 1 in 27200; cuDNN 9.14 on the H200, 3 in 614400). A kernel that fed
  // GELU the fp32 sum instead (the retired v3's graph asked for that) moved a quarter of the values by a
  // step or more. Reported, and held loosely: either reading is a correct GELU of this layer.
  std::size_t same = 0, neighbour = 0, further = 0, z_same = 0;
  std::vector<double> from_own_z(n);
  for (std::size_t i = 0; i < n; ++i) {
    from_own_z[i] = gelu_double(z_v2[i]);
    const float expected = round_to_bf16(static_cast<float>(from_own_z[i]));
    const int apart = std::abs(int(bf16_bits_from_float(g_v2[i])) - int(bf16_bits_from_float(expected)));
    (apart == 0 ? same : apart == 1 ? neighbour : further) += 1;
    if (z_v2[i] == z_v1[i]) ++z_same;
  }
  EXPECT_LT(rel_l2(g_v2, from_own_z), 5e-3);
  const bool reads_rounded_z = further == 0 && neighbour <= n / 1000;
  std::printf("    GELU against the host's GELU of the stored z: %zu equal, %zu a bf16 step apart, %zu further "
              "(of %zu): %s; z bit-equal to v1's in %zu\n",
              same, neighbour, further, n,
              reads_rounded_z ? "matches GELU of the rounded z, as v1's does"
                              : "differs from GELU of the rounded z (the fp32 sum read, or another erf)",
              z_same);
  RecordProperty("gelu_reads_rounded_z", reads_rounded_z ? "yes" : "no");
  if (!reads_rounded_z)
    std::printf("    note: the chain graph asked for GELU of the stored z; cuDNN's kernel seems to take the fp32 sum "
                "or to compute erf otherwise\n");

  graph->destroy();
}

INSTANTIATE_TEST_SUITE_P(Shapes, GptFcGelu, ::testing::Values(300, 301),
                         [](const ::testing::TestParamInfo<int>& info) { return "N" + std::to_string(info.param); });

}  // namespace
}  // namespace roofbench::gpt::cuda
