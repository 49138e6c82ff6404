// Every CPU kernel against its fp64 reference, on sizes that are not multiples of any tile or vector
// width, so remainders and partial tiles are exercised.
#include "cpu_kernels.hpp"

#include <gtest/gtest.h>
#include <roofbench/plugin.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace kc = roofbench::kernels::cpu;
using roofbench::Precision;
using roofbench::default_tolerance;
using roofbench::relative_l2_error;

template <typename T>
std::vector<T> random_values(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<T> values(static_cast<std::size_t>(count));
  for (auto& v : values) v = static_cast<T>(uniform(engine));
  return values;
}

// Outputs start as NaN, as the host's poisoning leaves them, so an element the kernel skips fails.
template <typename T>
std::vector<T> poisoned(std::int64_t count) {
  return std::vector<T>(static_cast<std::size_t>(count), std::numeric_limits<T>::quiet_NaN());
}

class StreamingKernel : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(StreamingKernel, CopyMatchesReference) {
  const auto n = GetParam();
  const auto a = random_values<double>(n, 1);
  auto b = poisoned<double>(n);
  std::vector<double> ref(a.size());
  kc::stream_copy(a.data(), b.data(), n);
  kc::stream_copy_reference(a.data(), ref.data(), n);
  EXPECT_EQ(relative_l2_error(b.data(), ref.data(), ref.size()), 0.0);
}

TEST_P(StreamingKernel, TriadMatchesReference) {
  const auto n = GetParam();
  const auto b = random_values<double>(n, 2), c = random_values<double>(n, 3);
  auto a = poisoned<double>(n);
  std::vector<double> ref(b.size());
  kc::stream_triad(a.data(), b.data(), c.data(), kc::kTriadScalar, n);
  kc::stream_triad_reference(b.data(), c.data(), kc::kTriadScalar, ref.data(), n);
  EXPECT_LE(relative_l2_error(a.data(), ref.data(), ref.size()), default_tolerance(Precision::fp64));
}

TEST_P(StreamingKernel, AddFp32MatchesReference) {
  const auto n = GetParam();
  const auto a = random_values<float>(n, 4), b = random_values<float>(n, 5);
  auto c = poisoned<float>(n);
  std::vector<double> ref(a.size());
  kc::add(a.data(), b.data(), c.data(), n);
  kc::add_reference(a.data(), b.data(), ref.data(), n);
  EXPECT_LE(relative_l2_error(c.data(), ref.data(), ref.size()), default_tolerance(Precision::fp32));
}

INSTANTIATE_TEST_SUITE_P(OddSizes, StreamingKernel, ::testing::Values(1, 7, 129, 333, 100003));

using MatmulKernel = void (*)(const float*, const float*, float*, std::int64_t, std::int64_t, std::int64_t);

struct NamedMatmul {
  std::string name;
  MatmulKernel kernel;
};

void PrintTo(const NamedMatmul& named, std::ostream* os) { *os << named.name; }

std::vector<NamedMatmul> matmul_kernels() {
  std::vector<NamedMatmul> kernels{{"naive", &kc::matmul_naive}, {"blocked", &kc::matmul_blocked}};
#ifdef ROOFBENCH_HAVE_CBLAS
  kernels.push_back({"blas", &kc::matmul_blas});
#endif
  return kernels;
}

struct Shape {
  std::int64_t m, n, k;
};

// Every dimension, on its own, stops short of or runs past a tile and a vector width.
const std::vector<Shape> kOddShapes{{1, 1, 1},   {7, 7, 7},   {129, 129, 129}, {333, 333, 333},
                                    {7, 129, 333}, {333, 7, 129}, {129, 333, 7}};

void PrintTo(const Shape& shape, std::ostream* os) { *os << shape.m << "x" << shape.n << "x" << shape.k; }

class Matmul : public ::testing::TestWithParam<std::tuple<NamedMatmul, Shape>> {};

TEST_P(Matmul, MatchesReference) {
  const auto& [named, shape] = GetParam();
  const auto [m, n, k] = shape;
  const auto A = random_values<float>(m * k, 6), B = random_values<float>(k * n, 7);
  auto C = poisoned<float>(m * n);
  std::vector<double> ref(C.size());
  named.kernel(A.data(), B.data(), C.data(), m, n, k);
  kc::matmul_reference(A.data(), B.data(), ref.data(), m, n, k);
  EXPECT_LE(relative_l2_error(C.data(), ref.data(), ref.size()), default_tolerance(Precision::fp32));
}

std::string matmul_test_name(const ::testing::TestParamInfo<Matmul::ParamType>& info) {
  const auto& [named, shape] = info.param;
  return named.name + "_" + std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, Matmul,
                         ::testing::Combine(::testing::ValuesIn(matmul_kernels()), ::testing::ValuesIn(kOddShapes)),
                         matmul_test_name);

// The gate's measure must notice one wrong element among many, and a NaN anywhere.
TEST(RelativeL2Error, CatchesPlantedError) {
  constexpr std::int64_t n = 4099;
  const auto a = random_values<float>(n, 8), b = random_values<float>(n, 9);
  auto c = poisoned<float>(n);
  std::vector<double> ref(a.size());
  kc::add(a.data(), b.data(), c.data(), n);
  kc::add_reference(a.data(), b.data(), ref.data(), n);
  const double tolerance = default_tolerance(Precision::fp32);
  ASSERT_LE(relative_l2_error(c.data(), ref.data(), ref.size()), tolerance);

  c[n / 2] += 0.01f;
  EXPECT_GT(relative_l2_error(c.data(), ref.data(), ref.size()), tolerance);

  c[n / 2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(relative_l2_error(c.data(), ref.data(), ref.size())));
}

}  // namespace
