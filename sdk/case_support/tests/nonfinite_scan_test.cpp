// NonfiniteScan on a GPU: NaN and infinity are counted in every format it scans, through the test Context
// a plugin's own tests use.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "roofbench/case_support/cuda_test_context.hpp"
#include "roofbench/case_support/gate.hpp"

namespace roofbench::case_support {
namespace {

template <typename T>
std::uint64_t count_nonfinite_with(ElementType type, std::size_t n, const std::vector<std::size_t>& nan_at,
                                   const std::vector<std::size_t>& inf_at) {
  std::vector<T> host(n, T(0.5f));
  for (const auto i : nan_at) host[i] = T(std::nanf(""));
  for (const auto i : inf_at) host[i] = T(INFINITY);
  testing::CudaTestContext ctx(Params{});
  NonfiniteScan scan;
  scan.setup(ctx);
  void* data = ctx.alloc(n * sizeof(T), BufferRole::input, 0);
  ctx.copy_to_device(data, host.data(), n * sizeof(T), 0);
  return scan.count(ctx, {data, type}, n);
}

TEST(CaseSupportNonfiniteScan, CountsNanAndInfinityInEveryFormat) {
  if (!testing::gpu_present()) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or found none)";
  const std::size_t n = 3000017;
  const std::vector<std::size_t> nans{0, 12345, n - 1}, infs{777, 2000000};
  EXPECT_EQ(count_nonfinite_with<float>(ElementType::f32, n, nans, infs), 5u);
  EXPECT_EQ(count_nonfinite_with<__nv_bfloat16>(ElementType::bf16, n, nans, infs), 5u);
  EXPECT_EQ(count_nonfinite_with<__half>(ElementType::f16, n, nans, infs), 5u);
  EXPECT_EQ(count_nonfinite_with<float>(ElementType::f32, n, {}, {}), 0u);
}

}  // namespace
}  // namespace roofbench::case_support
