// The hand-written matmuls against an fp64 CPU reference, on sizes that leave partial tiles on every edge.
#include "roofbench/kernels/cuda_matmul.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "roofbench/cuda.hpp"

namespace {

using roofbench::kernels::launch_matmul_naive_fp32;
using roofbench::kernels::launch_matmul_tiled_fp32;
using Launcher = decltype(&launch_matmul_naive_fp32);

bool gpu_present() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

struct Shape {
  std::int64_t m, n, k;
};

// Device buffer freed on scope exit, so a failed assertion does not leak it into the next test.
struct DeviceFloats {
  explicit DeviceFloats(std::size_t count) {
    ROOFBENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&data), std::max<std::size_t>(count, 1) * sizeof(float)));
  }
  ~DeviceFloats() { (void)cudaFree(data); }
  float* data = nullptr;
};

// Runs `launch` on random inputs with a NaN-poisoned output; returns the relative L2 error against fp64.
double matmul_error(Launcher launch, Shape s) {
  std::mt19937 rng(static_cast<unsigned>(s.m * 131 + s.n * 7 + s.k));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
  for (auto& x : a) x = uniform(rng);
  for (auto& x : b) x = uniform(rng);

  DeviceFloats da(a.size()), db(b.size()), dc(c.size());
  ROOFBENCH_CUDA(cudaMemcpy(da.data, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  ROOFBENCH_CUDA(cudaMemcpy(db.data, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  ROOFBENCH_CUDA(cudaMemset(dc.data, 0xFF, c.size() * sizeof(float)));  // NaN wherever nothing is written
  launch(da.data, db.data, dc.data, s.m, s.n, s.k, nullptr);
  ROOFBENCH_CUDA(cudaDeviceSynchronize());
  ROOFBENCH_CUDA(cudaMemcpy(c.data(), dc.data, c.size() * sizeof(float), cudaMemcpyDeviceToHost));

  double num = 0, den = 0;
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < s.n; ++j) {
      double ref = 0;
      for (std::int64_t p = 0; p < s.k; ++p) ref += double(a[i * s.k + p]) * double(b[p * s.n + j]);
      const double out = c[i * s.n + j];
      if (!std::isfinite(out)) return NAN;
      num += (out - ref) * (out - ref);
      den += ref * ref;
    }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

struct KernelUnderTest {
  const char* name;
  Launcher launch;
};

// Names the kernel in test output instead of dumping the struct's bytes.
void PrintTo(const KernelUnderTest& kernel, std::ostream* out) { *out << kernel.name; }

class CudaMatmulTest : public ::testing::TestWithParam<KernelUnderTest> {
 protected:
  void SetUp() override {
    if (!gpu_present()) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or found none)";
  }
};

TEST_P(CudaMatmulTest, MatchesFp64ReferenceOnOddShapes) {
  // 1x1x1, sizes below one tile, exactly one tile, one past a tile, and primes on every axis.
  for (const Shape shape : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{64, 64, 16}, Shape{65, 63, 17}, Shape{129, 257, 100},
                            Shape{301, 199, 513}, Shape{1, 300, 77}, Shape{300, 1, 77}}) {
    const double error = matmul_error(GetParam().launch, shape);
    EXPECT_LT(error, 1e-5) << GetParam().name << " at " << shape.m << "x" << shape.n << "x" << shape.k;
  }
}

TEST_P(CudaMatmulTest, EmptyInnerDimensionGivesZeros) {
  EXPECT_EQ(matmul_error(GetParam().launch, Shape{33, 70, 0}), 0.0);
}

TEST_P(CudaMatmulTest, EmptyOutputLaunchesNothing) {
  EXPECT_NO_THROW(GetParam().launch(nullptr, nullptr, nullptr, 0, 5, 5, nullptr));
  EXPECT_NO_THROW(GetParam().launch(nullptr, nullptr, nullptr, 5, 0, 5, nullptr));
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaMatmulTest,
                         ::testing::Values(KernelUnderTest{"naive", launch_matmul_naive_fp32},
                                           KernelUnderTest{"tiled", launch_matmul_tiled_fp32}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
