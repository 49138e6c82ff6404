#include "sample_quality.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace roofbench {
namespace {

// Log-normal samples around `median` with a relative spread `sigma`, reproducible.
std::vector<double> around(double median, double sigma, std::size_t count, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<double> samples;
  for (std::size_t i = 0; i < count; ++i) samples.push_back(median * std::exp(normal(random)));
  return samples;
}

std::vector<double> joined(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SampleQuality, TightSamplesAreClean) {
  const SampleQuality q = assess_samples(around(1e-6, 0.003, 200, 1), 0.01);
  EXPECT_FALSE(q.noisy);
  EXPECT_EQ(q.reason, "");
}

TEST(SampleQuality, TheIssuesCpuAddIsBimodal) {
  // cpu/add/n:4096 on a 2-core machine: 0.96 us when the OpenMP workers were awake, a scheduler tick
  // (4.7-6.7 ms) when they slept; mixed within one run.
  const auto samples = joined(around(0.96e-6, 0.02, 30, 2), around(5e-3, 0.1, 10, 3));
  const SampleQuality q = assess_samples(samples, 0.01);
  EXPECT_TRUE(q.noisy);
  EXPECT_EQ(q.slow_samples, 10u);
  EXPECT_EQ(q.fast_samples, 30u);
  EXPECT_EQ(q.reason.rfind("bimodal: 10 of 40 samples near ", 0), 0u) << q.reason;
  EXPECT_NE(q.reason.find("ms, the rest near "), std::string::npos) << q.reason;
  EXPECT_NE(q.reason.find(" ns"), std::string::npos) << q.reason;  // 959 ns
}

TEST(SampleQuality, TwoModesCloseTogetherAreFoundByTheirGapNotTheirNoise) {
  // 1.0 and 1.6 ms, each 0.5% wide: noise about 25%, and two clusters whichever noise bound is set.
  const auto samples = joined(around(1e-3, 0.005, 50, 4), around(1.6e-3, 0.005, 50, 5));
  const SampleQuality q = assess_samples(samples, 1.0);  // a bound no noise reaches
  EXPECT_TRUE(q.noisy);
  EXPECT_EQ(q.reason.rfind("bimodal: 50 of 100", 0), 0u) << q.reason;
}

TEST(SampleQuality, AFewOutliersAreATailNotASecondMode) {
  auto samples = around(1e-3, 0.003, 100, 6);
  samples[10] = 3e-3;  // an interrupt
  samples[50] = 2.5e-3;
  const SampleQuality q = assess_samples(samples, 1.0);  // the noise rule out of the way
  EXPECT_FALSE(q.noisy) << q.reason;
}

TEST(SampleQuality, ASkewedButUnimodalSpreadIsNotBimodal) {
  // A GPU GEMM under its power limit: a few percent of smooth spread.
  const SampleQuality q = assess_samples(around(1.6e-3, 0.03, 300, 7), 0.01);
  EXPECT_FALSE(q.noisy) << q.reason;
}

TEST(SampleQuality, NoiseFarAboveTheBoundIsNoisy) {
  const auto samples = around(1e-3, 0.3, 200, 8);
  const SampleQuality q = assess_samples(samples, 0.01);
  EXPECT_TRUE(q.noisy);
  EXPECT_EQ(q.reason.rfind("noise ", 0), 0u) << q.reason;
  EXPECT_NE(q.reason.find("is over 5x the --noise bound (1%)"), std::string::npos) << q.reason;
}

TEST(SampleQuality, NoiseAFewTimesTheBoundIsNotFarAboveIt) {
  // 3% against a 1% bound: what large GEMMs show under the power limit; reported, not flagged.
  EXPECT_FALSE(assess_samples(around(1e-3, 0.03, 200, 9), 0.01).noisy);
}

TEST(SampleQuality, TheCallersNoiseIsTheOneJudged) {
  const auto samples = around(1e-3, 0.3, 200, 10);
  // Noise at a fixed clock far smaller than the plain noise: the clock explains the spread.
  EXPECT_FALSE(assess_samples(samples, 0.01, 0.004).noisy);
  EXPECT_TRUE(assess_samples(around(1e-3, 0.001, 200, 11), 0.01, 0.2).noisy);
}

TEST(SampleQuality, TooFewSamplesAreJudgedByNoiseOnly) {
  const std::vector<double> samples{1e-6, 1e-6, 5e-3, 5e-3};
  const SampleQuality q = assess_samples(samples, 0.01);
  EXPECT_TRUE(q.noisy);  // noise over 100%
  EXPECT_EQ(q.reason.rfind("noise ", 0), 0u) << q.reason;
  EXPECT_FALSE(assess_samples({1e-6, 1.001e-6}, 0.01).noisy);
  EXPECT_FALSE(assess_samples({}, 0.01).noisy);
}

TEST(SampleQuality, NoBoundMeansNoNoiseRule) {
  // 5% spread: its fastest samples are 8% under the median, not yet unsettled.
  EXPECT_FALSE(assess_samples(around(1e-3, 0.05, 200, 12), 0.0).noisy);
}

TEST(SampleQuality, FastSamplesFarUnderTheMedianAreUnsettled) {
  // A memory-bound run slowed by contention for most of its samples: a fast tenth near 3.5 ms, the
  // rest spread from 6 to 8 ms (stream_triad on a busy 2-core machine). Not two clean clusters.
  std::vector<double> samples = around(7e-3, 0.08, 90, 13);
  const auto fast = around(3.5e-3, 0.15, 10, 14);
  samples.insert(samples.end(), fast.begin(), fast.end());
  const SampleQuality q = assess_samples(samples, 1.0);  // the noise rule out of the way
  EXPECT_TRUE(q.noisy);
  EXPECT_EQ(q.reason.rfind("unsettled: the fastest 5% of samples are ", 0), 0u) << q.reason;
  // Preempted but steady: slow outliers only, the fast edge at the median.
  std::vector<double> preempted = around(1.33e-3, 0.002, 90, 15);
  for (int i = 0; i < 4; ++i) preempted.push_back(5.3e-3);
  EXPECT_FALSE(assess_samples(preempted, 1.0).noisy) << assess_samples(preempted, 1.0).reason;
}

}  // namespace
}  // namespace roofbench
