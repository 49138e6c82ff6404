#include "statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace roofbench {
namespace {

// Expected values are numpy.quantile(values, q) (its default method is type 7).
TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  const std::vector<double> values{4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(quantile(values, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(values, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(quantile(values, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile(values, 0.75), 3.25);
  EXPECT_DOUBLE_EQ(quantile(values, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile({10, 20, 30, 40, 50}, 0.9), 46.0);
}

TEST(Quantile, OfOneValueIsThatValueAndOfNoneIsZero) {
  EXPECT_DOUBLE_EQ(quantile({7}, 0.3), 7.0);
  EXPECT_DOUBLE_EQ(quantile({}, 0.5), 0.0);
}

TEST(Summarize, MomentsQuartilesAndExtremes) {
  const SampleSummary s = summarize({2, 4, 1, 3});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(5.0 / 3.0));  // sample (n - 1) standard deviation
  EXPECT_DOUBLE_EQ(s.noise, std::sqrt(5.0 / 3.0) / 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.q1, 1.75);
  EXPECT_DOUBLE_EQ(s.q3, 3.25);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
}

TEST(Summarize, OneSampleHasNoSpreadAndNoSamplesGiveZeros) {
  const SampleSummary one = summarize({5});
  EXPECT_EQ(one.count, 1u);
  EXPECT_DOUBLE_EQ(one.median, 5.0);
  EXPECT_DOUBLE_EQ(one.stdev, 0.0);
  EXPECT_DOUBLE_EQ(one.noise, 0.0);
  const SampleSummary none = summarize({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_DOUBLE_EQ(none.median, 0.0);
}

TEST(WarmupSettled, NeedsTwoFullWindows) {
  EXPECT_FALSE(warmup_settled({1, 1, 1, 1, 1, 1, 1, 1, 1}, 5));
  EXPECT_TRUE(warmup_settled({1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 5));
  EXPECT_FALSE(warmup_settled({1, 1}, 0));
}

TEST(WarmupSettled, WithinTheToleranceOfTheWindowBefore) {
  EXPECT_TRUE(warmup_settled({1, 1, 1, 1, 1, 1.01, 1.01, 1.01, 1.01, 1.01}, 5, 0.02));
  EXPECT_FALSE(warmup_settled({1, 1, 1, 1, 1, 1.05, 1.05, 1.05, 1.05, 1.05}, 5, 0.02));
}

TEST(WarmupSettled, TimesStillFallingAreNotSettled) {
  EXPECT_FALSE(warmup_settled({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 5));
}

TEST(WarmupSettled, OnlyTheLastTwoWindowsCount) {
  EXPECT_TRUE(warmup_settled({100, 50, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 5));
}

TEST(WarmupSettled, MediansIgnoreOneOutlierPerWindow) {
  EXPECT_TRUE(warmup_settled({1, 1, 9, 1, 1, 1, 1, 1, 1, 7}, 5));
}

TEST(Thin, EvenlySpacedKeepingTheFirstAndTheLast) {
  EXPECT_EQ(thin({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4), (std::vector<double>{0, 3, 6, 9}));
  EXPECT_EQ(thin({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 2), (std::vector<double>{0, 9}));
}

TEST(Thin, FewerValuesThanTheLimitAreKeptAsTheyAre) {
  EXPECT_EQ(thin({3, 1, 2}, 3), (std::vector<double>{3, 1, 2}));
  EXPECT_EQ(thin({3, 1, 2}, 2000), (std::vector<double>{3, 1, 2}));
}

// A compute-bound kernel under a power limit: time = cycles / clock, plus 0.1% of noise of its own.
TEST(NoiseAtFixedClock, IsSmallWhenTheClockExplainsTheSpread) {
  std::vector<double> times, clocks;
  for (int i = 0; i < 200; ++i) {
    const double clock = 1500 + 100 * std::sin(0.3 * i);  // +-7%: the spread is the clock's
    const double own = 1 + 0.001 * ((i % 2) ? 1 : -1);
    clocks.push_back(clock);
    times.push_back(3e6 / (clock * 1e6) * own);
  }
  EXPECT_GT(summarize(times).noise, 0.03);
  EXPECT_NEAR(noise_at_fixed_clock(times, clocks), 0.001, 0.0002);
}

TEST(NoiseAtFixedClock, IsThePlainNoiseWhenTheClockStood) {
  const std::vector<double> times{1, 2, 3, 4}, clocks{1980, 1980, 1980, 1980};
  EXPECT_DOUBLE_EQ(noise_at_fixed_clock(times, clocks), summarize(times).noise);
}

TEST(NoiseAtFixedClock, IsNaNWithoutEnoughClockedSamples) {
  EXPECT_TRUE(std::isnan(noise_at_fixed_clock({1, 2}, {1500, 1600})));
  EXPECT_TRUE(std::isnan(noise_at_fixed_clock({1, 2, 3}, {1500, 0, 1600})));
}

// A GEMM held at its power limit (1450-1550 MHz of a 1980 MHz device) keeps every sample; a sample under
// 75% of the highest clock the samples reached is dropped.
TEST(DropThrottled, IsRelativeToTheHighestSampleClock) {
  const std::vector<double> times{1.00, 1.02, 0.98, 1.60, 1.01};
  const std::vector<double> clocks{1500, 1470, 1550, 1000, 1490};
  const ThrottleSplit split = drop_throttled(times, clocks, 0.75);
  EXPECT_EQ(split.dropped, 1);
  EXPECT_EQ(split.times, (std::vector<double>{1.00, 1.02, 0.98, 1.01}));
  EXPECT_EQ(split.clocks_mhz, (std::vector<double>{1500, 1470, 1550, 1490}));
}

TEST(DropThrottled, KeepsEverythingWithoutClocks) {
  const ThrottleSplit split = drop_throttled({1, 2, 3}, {}, 0.75);
  EXPECT_EQ(split.dropped, 0);
  EXPECT_EQ(split.times.size(), 3u);
  EXPECT_TRUE(split.clocks_mhz.empty());
}

}  // namespace
}  // namespace roofbench
