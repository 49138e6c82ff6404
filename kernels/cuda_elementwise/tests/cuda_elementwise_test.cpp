// The add and copy kernels against a CPU reference on sizes and pointer offsets that exercise the vector
// body, the scalar head (misaligned start) and the scalar tail.
#include "roofbench/kernels/cuda_elementwise.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "roofbench/cuda.hpp"

namespace {

namespace k = roofbench::kernels;

bool gpu_present() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

template <typename T>
struct DeviceArray {
  explicit DeviceArray(std::size_t count) {
    ROOFBENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(T)));
  }
  ~DeviceArray() { (void)cudaFree(data); }
  T* data = nullptr;
};

float to_float(float x) { return x; }
float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
T from_float(float x);
template <>
float from_float<float>(float x) {
  return x;
}
template <>
__nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Relative rounding of one result: the kernel's sum is the exact sum rounded once (twice for bf16
// through fp32), so twice the format's unit roundoff bounds it.
template <typename T>
double allowed_relative_error() {
  return std::is_same_v<T, float> ? std::ldexp(1.0, -23) : std::ldexp(1.0, -7);
}

enum class Variant { scalar, vec16, copy_vec16 };

const char* name_of(Variant variant) {
  switch (variant) {
    case Variant::scalar: return "scalar";
    case Variant::vec16: return "vec16";
    case Variant::copy_vec16: return "copy_vec16";
  }
  return "?";
}

// c = a + b (c = a for the copy, which must be exact) over n elements starting `offset_*` elements into
// three allocations; counts elements that are wrong or that the kernel left poisoned, plus any write
// outside [offset, offset + n).
template <typename T>
std::size_t wrong_elements(Variant variant, std::size_t n, std::size_t offset_a, std::size_t offset_b,
                           std::size_t offset_c) {
  constexpr std::size_t kSlack = 16;  // elements around the range, watched for stray writes
  const std::size_t total = n + 2 * kSlack;
  std::mt19937 rng(static_cast<unsigned>(n + 97 * offset_a + 13 * offset_b + offset_c));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<T> a(total), b(total), c(total);
  for (auto& x : a) x = from_float<T>(uniform(rng));
  for (auto& x : b) x = from_float<T>(uniform(rng));

  DeviceArray<T> da(total), db(total), dc(total);
  ROOFBENCH_CUDA(cudaMemcpy(da.data, a.data(), total * sizeof(T), cudaMemcpyHostToDevice));
  ROOFBENCH_CUDA(cudaMemcpy(db.data, b.data(), total * sizeof(T), cudaMemcpyHostToDevice));
  ROOFBENCH_CUDA(cudaMemset(dc.data, 0xFF, total * sizeof(T)));
  const T* pa = da.data + offset_a;
  const T* pb = db.data + offset_b;
  T* pc = dc.data + kSlack + offset_c;
  if (variant == Variant::scalar)
    k::launch_add_scalar(pa, pb, pc, n, nullptr);
  else if (variant == Variant::vec16)
    k::launch_add_vec16(pa, pb, pc, n, nullptr);
  else
    k::launch_copy_vec16(pa, pc, n, nullptr);
  ROOFBENCH_CUDA(cudaDeviceSynchronize());
  ROOFBENCH_CUDA(cudaMemcpy(c.data(), dc.data, total * sizeof(T), cudaMemcpyDeviceToHost));

  std::size_t wrong = 0;
  for (std::size_t i = 0; i < total; ++i) {
    const double got = to_float(c[i]);
    const bool inside = i >= kSlack + offset_c && i < kSlack + offset_c + n;
    if (!inside) {
      wrong += std::isnan(got) ? 0 : 1;  // still the poison
      continue;
    }
    const std::size_t e = i - kSlack - offset_c;
    const double expected = variant == Variant::copy_vec16
                                ? double(to_float(a[offset_a + e]))
                                : double(to_float(a[offset_a + e])) + double(to_float(b[offset_b + e]));
    const double allowed = variant == Variant::copy_vec16 ? 0.0 : allowed_relative_error<T>();
    wrong += std::abs(got - expected) <= allowed * std::abs(expected) ? 0 : 1;
  }
  return wrong;
}

template <typename T>
class CudaAddTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_present()) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or found none)";
  }
};
using ElementTypes = ::testing::Types<float, __nv_bfloat16>;
TYPED_TEST_SUITE(CudaAddTest, ElementTypes);

TYPED_TEST(CudaAddTest, AlignedSizes) {
  for (const Variant variant : {Variant::scalar, Variant::vec16, Variant::copy_vec16})
    for (const std::size_t n :
         {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{4096}, std::size_t{1000003}})
      EXPECT_EQ(wrong_elements<TypeParam>(variant, n, 0, 0, 0), 0u) << name_of(variant) << " n=" << n;
}

TYPED_TEST(CudaAddTest, MisalignedButCommonOffsetUsesHeadAndTail) {
  for (const Variant variant : {Variant::vec16, Variant::copy_vec16})
    for (const std::size_t offset : {std::size_t{1}, std::size_t{3}})
      for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100}, std::size_t{1000003}})
        EXPECT_EQ(wrong_elements<TypeParam>(variant, n, offset, offset, offset), 0u)
            << name_of(variant) << " offset " << offset << " n=" << n;
}

TYPED_TEST(CudaAddTest, DifferentOffsetsFallBackToScalar) {
  for (const Variant variant : {Variant::vec16, Variant::copy_vec16})
    for (const std::size_t n : {std::size_t{7}, std::size_t{1000003}})
      EXPECT_EQ(wrong_elements<TypeParam>(variant, n, 1, 0, 2), 0u) << name_of(variant) << " n=" << n;
}

TYPED_TEST(CudaAddTest, ZeroElementsLaunchNothing) {
  EXPECT_NO_THROW(k::launch_add_scalar<TypeParam>(nullptr, nullptr, nullptr, 0, nullptr));
  EXPECT_NO_THROW(k::launch_add_vec16<TypeParam>(nullptr, nullptr, nullptr, 0, nullptr));
  EXPECT_NO_THROW(k::launch_copy_vec16<TypeParam>(nullptr, nullptr, 0, nullptr));
}

}  // namespace
