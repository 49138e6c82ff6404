// The parts of the plugin API that are code rather than declarations: the gate's default tolerances,
// the error measure every gate uses, what a Figure is made from, and the ABI a Work of bytes_read is.
#include <gtest/gtest.h>
#include <roofbench/plugin.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace roofbench {
namespace {

// The table, written out so that a change to it is a visible change to this test.
TEST(DefaultTolerance, PerPrecision) {
  EXPECT_EQ(default_tolerance(Precision::fp64), 1e-12);
  EXPECT_EQ(default_tolerance(Precision::fp32), 1e-5);
  EXPECT_EQ(default_tolerance(Precision::tf32), 5e-3);
  EXPECT_EQ(default_tolerance(Precision::bf16), 2e-2);
  EXPECT_EQ(default_tolerance(Precision::fp16), 5e-3);
  EXPECT_EQ(default_tolerance(Precision::fp8), 1e-1);
}

// Rounding the output alone costs up to half an epsilon of relative error: a tolerance below that would
// fail a correctly rounded result.
TEST(DefaultTolerance, AdmitsACorrectlyRoundedOutput) {
  const struct {
    Precision precision;
    int mantissa_bits;  // explicit bits after the binary point
  } formats[] = {{Precision::fp64, 52}, {Precision::fp32, 23}, {Precision::tf32, 10},
                 {Precision::bf16, 7},  {Precision::fp16, 10}, {Precision::fp8, 3}};
  for (const auto& f : formats)
    EXPECT_GT(default_tolerance(f.precision), std::ldexp(1.0, -f.mantissa_bits - 1)) << to_string(f.precision);
}

TEST(RelativeL2Error, ExactOutputIsZero) {
  const std::vector<float> out{1, -2, 3};
  const std::vector<double> ref{1, -2, 3};
  EXPECT_EQ(relative_l2_error(out.data(), ref.data(), out.size()), 0.0);
}

TEST(RelativeL2Error, OnePlantedErrorGivesItsNormOverTheReferenceNorm) {
  std::vector<double> ref(100, 1.0), out(100, 1.0);
  out[37] = 1.1;  // ||out - ref|| = 0.1, ||ref|| = 10
  EXPECT_NEAR(relative_l2_error(out.data(), ref.data(), ref.size()), 0.01, 1e-12);
}

TEST(RelativeL2Error, AnyNonFiniteOutputIsNaN) {
  const std::vector<double> ref{1, 2, 3};
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const std::vector<double> out{1, bad, 3};
    EXPECT_TRUE(std::isnan(relative_l2_error(out.data(), ref.data(), out.size()))) << bad;
  }
}

// What the host's poison (every byte 0xFF) reads as.
TEST(RelativeL2Error, PoisonedOutputIsNaN) {
  std::vector<float> out(4);
  std::vector<unsigned char> poison(sizeof(float) * out.size(), 0xFF);
  std::memcpy(out.data(), poison.data(), poison.size());
  const std::vector<double> ref{1, 2, 3, 4};
  EXPECT_TRUE(std::isnan(relative_l2_error(out.data(), ref.data(), out.size())));
}

TEST(RelativeL2Error, AZeroReference) {
  const std::vector<double> zeros(3, 0.0), ones(3, 1.0);
  EXPECT_EQ(relative_l2_error(zeros.data(), zeros.data(), 3), 0.0);
  EXPECT_TRUE(std::isinf(relative_l2_error(ones.data(), zeros.data(), 3)));
}

// A number (whatever its arithmetic type) stays a number, and a string literal or std::string a text:
// numbers become result fields and texts facts, so the wrong kind would move a value in the results.
TEST(Figure, NumbersAndTextsKeepTheirKind) {
  const std::vector<Figure> figures{{"parameters", 124e6}, {"ranks", 8}, {"zero", 0}, {"algorithm", "GEMM"},
                                    {"math", std::string("TENSOR_OP")}, {"empty", ""}};
  ASSERT_EQ(figures.size(), 6u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_FALSE(figures[i].is_text) << figures[i].name;
  EXPECT_EQ(figures[0].number, 124e6);
  EXPECT_EQ(figures[1].number, 8);
  EXPECT_EQ(figures[2].number, 0);
  for (std::size_t i = 3; i < 6; ++i) EXPECT_TRUE(figures[i].is_text) << figures[i].name;
  EXPECT_EQ(figures[3].text, "GEMM");
  EXPECT_EQ(figures[4].text, "TENSOR_OP");
  EXPECT_EQ(figures[5].text, "");
}

// A case that reports nothing reports no figures.
TEST(Figure, ACaseReportsNoneByDefault) {
  struct Quiet final : Case {
    void setup(Context&) override {}
    void run(Context&) override {}
    Work work() const override { return {}; }
    Check check(Context&) override { return {}; }
  };
  EXPECT_TRUE(Quiet().figures().empty());
}

// Work::bytes_read came with ABI 7 (a plugin of 6 has a Work 8 bytes shorter, which the host must refuse);
// Context::counting_kernels() with 8.
TEST(PluginAbi, WorkWithBytesReadIsVersion7AndCountingKernels8) {
  static_assert(kAbiVersion == 8);
  constexpr AbiFingerprint fingerprint = detail::fingerprint(0);
  EXPECT_STREQ(detail::kFingerprintSizeNames[10], "Work");
  EXPECT_EQ(fingerprint.sizes[10], sizeof(Work));
  const Work said{.bytes = 3, .bytes_read = 2};
  EXPECT_EQ(said.bytes_read, 2);
  EXPECT_EQ(Work{}.bytes_read, 0);  // not said: the read_dominated rule chooses the roof
}

}  // namespace
}  // namespace roofbench
