#include "plausibility.hpp"
#include "summaries.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace roofbench {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Ceilings cpu_ceilings() {
  Ceilings c;
  c.bandwidth = 10e9;
  c.read_bandwidth = 12e9;
  c.cache_bandwidth = 200e9;
  c.flops_of(Precision::fp32) = 100e9;
  return c;
}

// A passed fp32 result on `device` that took 1 ms per run with `flops` and `bytes`, with `noise`.
Result passed_result(double flops, double bytes, const std::string& device = "cpu", double noise = 0) {
  Measurement r;
  r.name = "p/c";
  r.device = device;
  r.precision = Precision::fp32;
  r.work.flops = flops;
  r.work.bytes = bytes;
  r.stats.median = 1e-3;
  r.stats.noise = noise;
  return roofbench::result_of(r);
}

TEST(Plausibility, AtOrSomewhatAboveTheRoofIsPlausible) {
  EXPECT_FALSE(implausibility(passed_result(100e6, 0), cpu_ceilings(), std::nullopt));  // 100% of fp32
  EXPECT_FALSE(implausibility(passed_result(135e6, 0), cpu_ceilings(), std::nullopt));  // 135%: within the headroom
}

TEST(Plausibility, FarAboveTheComputeRoofFailsNamingTheRoofAndTheCause) {
  // run() does nothing, work() claims 1e9 FLOP: 1e12 FLOP/s against a 1e11 roof.
  const auto why = implausibility(passed_result(1e9, 0), cpu_ceilings(), std::nullopt);
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, AllOf(HasSubstr("FLOP/s 1e+12 is 10x the fp32 roof 1e+11"),
                          HasSubstr("likely cause: work() counts that do not match what run() does")));
}

TEST(Plausibility, OnAGpuTheLikelyCauseIsWorkOffTheGivenStream) {
  const auto why = implausibility(passed_result(1e9, 0, "cuda:0"), cpu_ceilings(), std::nullopt);
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("work not on the stream the host gives"));
}

TEST(Plausibility, HotTrafficIsJudgedAgainstTheCacheColdAgainstMainMemory) {
  // 100 GB/s: ten times main memory, half the cache's bandwidth.
  const Result hot = passed_result(0, 100e6);
  EXPECT_FALSE(implausibility(hot, cpu_ceilings(), std::nullopt));
  Result cold = hot;
  cold.cold = true;
  const auto why = implausibility(cold, cpu_ceilings(), std::nullopt);
  ASSERT_TRUE(why);
  EXPECT_THAT(*why, HasSubstr("main-memory roof"));
  const auto beyond_cache = implausibility(passed_result(0, 1e9), cpu_ceilings(), std::nullopt);
  ASSERT_TRUE(beyond_cache);
  EXPECT_THAT(*beyond_cache, HasSubstr("B/s 1e+12 is 5x the cache bandwidth"));
}

TEST(Plausibility, NoiseWidensTheLimit) {
  Result noisy = passed_result(180e6, 0);
  EXPECT_TRUE(implausibility(noisy, cpu_ceilings(), std::nullopt));
  noisy = passed_result(180e6, 0, "cpu", 0.2);  // 1.4 + 3 x 0.2 = 2.0x
  EXPECT_FALSE(implausibility(noisy, cpu_ceilings(), std::nullopt));
}

TEST(Plausibility, SeveralGpusMayReachTheSumOfTheirCeilings) {
  EXPECT_TRUE(implausibility(passed_result(200e6, 0, "cuda:0"), cpu_ceilings(), std::nullopt));
  EXPECT_FALSE(implausibility(passed_result(200e6, 0, "cuda:0,1"), cpu_ceilings(), std::nullopt));
}

TEST(Plausibility, TheDatasheetCountsWhenHigherAndAPrecisionWithoutARoofIsNotJudged) {
  Datasheet sheet{"sheet", cpu_ceilings()};
  sheet.ceilings.flops_of(Precision::fp32) = 1e12;
  EXPECT_FALSE(implausibility(passed_result(1e9, 0), cpu_ceilings(), sheet));
  Result bf16 = passed_result(1e9, 0);
  bf16.precision = Precision::bf16;
  EXPECT_FALSE(implausibility(bf16, cpu_ceilings(), std::nullopt));
}

TEST(Plausibility, OnlyPassedResultsAreJudged) {
  Result failed = passed_result(1e9, 0);
  failed.status = Status::gate_failed;
  EXPECT_FALSE(implausibility(failed, cpu_ceilings(), std::nullopt));
}

}  // namespace
}  // namespace roofbench
