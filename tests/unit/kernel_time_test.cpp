// --kernel-time's bookkeeping without a GPU: CUPTI's kernel intervals to kernel_time per run (the union of
// the intervals, over the runs of a traced sample, the median over the samples), the difference to the
// event time, the console's line and its launch-cost note, and the paths without CUPTI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "console.hpp"
#include "kernel_time.hpp"
#include "kernel_time_observer.hpp"
#include "profile_observer.hpp"
#include "summaries.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(KernelTime, OverlappingKernelsCountOnce) {
  EXPECT_EQ(covered_nanoseconds({}), 0u);
  EXPECT_EQ(covered_nanoseconds({{100, 200}, {300, 350}}), 150u);           // apart: the sum
  EXPECT_EQ(covered_nanoseconds({{300, 350}, {100, 200}, {150, 260}}), 210u);  // overlapping, in any order
  EXPECT_EQ(covered_nanoseconds({{100, 400}, {150, 200}, {250, 300}}), 300u);  // nested
  EXPECT_EQ(covered_nanoseconds({{100, 200}, {200, 300}}), 200u);           // touching
  EXPECT_EQ(covered_nanoseconds({{100, 100}, {500, 400}}), 0u);            // empty or reversed
}

// Under programmatic dependent launch (the transformer plugin's gemv_v3) each kernel of a chain starts before
// the one before it has ended: the union counts every stretch once, so a run's kernel time is the chain's span
// over its runs, not the sum of the kernels' durations.
TEST(KernelTime, AChainOfOverlappingLaunchesCountsItsSpanOnce) {
  // 23 launches of 2800 ns in one traced sample, each starting 2000 ns after the one before.
  KernelTrace t;
  t.names = {"k"};
  t.passes = 1;
  for (std::uint64_t i = 0; i < 23; ++i) t.records.push_back({0, 0, 1000 + 2000 * i, 1000 + 2000 * i + 2800});
  const std::uint64_t span = 22 * 2000 + 2800;  // not 23 x 2800
  std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals;
  for (const KernelRecord& r : t.records) intervals.emplace_back(r.start, r.end);
  EXPECT_EQ(covered_nanoseconds(intervals), span);
  EXPECT_NEAR(kernel_time_of(t, 23).seconds, 1e-9 * span / 23, 1e-15);
}

// Three traced samples of two runs each: each sample's union over its two runs, the median of the three.
TEST(KernelTime, IsTheMedianOverTheSamplesOfTheUnionPerRun) {
  KernelTrace t;
  t.names = {"k"};
  t.passes = 3;
  // sample 0: two runs of 1000 ns apart -> 1000 ns a run
  t.records = {{0, 0, 0, 1000}, {0, 0, 5000, 6000}};
  // sample 1: two kernels overlapping by 400 ns in each of two runs -> 1600 ns a run
  t.records.insert(t.records.end(), {{0, 1, 10000, 11000}, {0, 1, 10600, 11600}, {0, 1, 20000, 21000}, {0, 1, 20600, 21600}});
  // sample 2: 3000 ns a run
  t.records.insert(t.records.end(), {{0, 2, 30000, 33000}, {0, 2, 40000, 43000}});
  t.records.push_back({0, 7, 0, 1000000});  // a pass the trace does not have: ignored
  const KernelTimeFigures k = kernel_time_of(t, 2);
  EXPECT_TRUE(k.error.empty()) << k.error;
  EXPECT_EQ(k.samples, 3);
  EXPECT_NEAR(k.seconds, 1600e-9, 1e-15);
}

TEST(KernelTime, ASampleWithoutKernelsCountsAsNone) {
  KernelTrace t;
  t.names = {"k"};
  t.passes = 2;
  t.records = {{0, 0, 0, 1000}};
  EXPECT_NEAR(kernel_time_of(t, 1).seconds, 500e-9, 1e-15);  // the median of 1000 and 0 ns
}

TEST(KernelTime, NoRecordsOrAnErrorGiveNoKernelTimeAndSayWhy) {
  KernelTrace refused;
  refused.error = "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL): CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
  const KernelTimeFigures a = kernel_time_of(refused, 4);
  EXPECT_FALSE(a.measured());
  EXPECT_EQ(a.error, refused.error);
  KernelTrace empty;
  empty.passes = 3;
  const KernelTimeFigures b = kernel_time_of(empty, 4);
  EXPECT_FALSE(b.measured());
  EXPECT_THAT(b.error, HasSubstr("no kernel"));
}

TEST(KernelTime, TheDifferenceIsEventMinusKernelAbsoluteAndOverKernel) {
  KernelTimeFigures k;
  k.seconds = 2.0e-6;
  EXPECT_NEAR(event_minus_kernel(2.5e-6, k), 0.5e-6, 1e-15);
  EXPECT_NEAR(event_minus_kernel_fraction(2.5e-6, k), 0.25, 1e-12);
  EXPECT_NEAR(event_minus_kernel_fraction(1.9e-6, k), -0.05, 1e-12);
  EXPECT_TRUE(std::isnan(event_minus_kernel_fraction(1e-6, KernelTimeFigures{})));
}

TEST(KernelTime, LaunchCostIsNotedOverThreePercentOrUnderFiveMicroseconds) {
  KernelTimeFigures k;
  k.seconds = 100e-6;
  EXPECT_FALSE(launch_cost_noted(102.9e-6, k));
  EXPECT_TRUE(launch_cost_noted(103.1e-6, k));
  EXPECT_FALSE(launch_cost_noted(4e-6, KernelTimeFigures{.seconds = 3.95e-6}));  // small, but events agree
  EXPECT_TRUE(launch_cost_noted(4.9e-6, KernelTimeFigures{}));                   // no kernel_time: by size
  EXPECT_FALSE(launch_cost_noted(5.1e-6, KernelTimeFigures{}));
}

Result gpu_result(double median, KernelTimeFigures k) {
  Measurement m;
  m.name = "micro/add";
  m.device = "cuda:0";
  m.stats.median = median;
  m.stats.count = 10;
  m.kernel_time = std::move(k);
  return result_of(m);
}

TEST(KernelTime, FiguresAreMadeOnlyWithAKernelTime) {
  const Result with = gpu_result(2.36e-6, {.seconds = 2.0e-6, .samples = 10});
  EXPECT_NEAR(with.figure(fig::kernel_time), 2.0e-6, 1e-15);
  EXPECT_NEAR(with.figure(fig::event_minus_kernel), 0.36e-6, 1e-15);
  EXPECT_NEAR(with.figure(fig::event_minus_kernel_pct), 18.0, 1e-9);
  const Result without = gpu_result(2.36e-6, {.error = "this roofbench was built without CUPTI"});
  EXPECT_TRUE(std::isnan(without.figure(fig::kernel_time)));
  EXPECT_TRUE(std::isnan(without.figure(fig::event_minus_kernel_pct)));
}

TEST(KernelTime, TheConsoleLineGivesBothTimesAndNotesLaunchCost) {
  const std::string noted = kernel_time_text("micro/add", gpu_result(2.36e-6, {.seconds = 2.0e-6, .samples = 10}));
  EXPECT_EQ(noted, "  kernel_time 2.000 us (CUPTI, 10 samples); events 2.360 us, 360.0 ns (18.0%) more: launch cost "
                   "included (over 3.0%)\n");
  const std::string agreed = kernel_time_text("micro/add", gpu_result(101e-6, {.seconds = 100e-6, .samples = 10}));
  EXPECT_THAT(agreed, HasSubstr("events 101.0 us, 1.000 us (1.00%) more"));
  EXPECT_THAT(kernel_time_text("micro/add", gpu_result(99e-6, {.seconds = 100e-6, .samples = 10})), HasSubstr("events 99.00 us, 1.000 us (1.0%) less"));
  EXPECT_THAT(agreed, Not(HasSubstr("launch cost")));
  EXPECT_EQ(agreed.back(), '\n');
}

// Events below kernel_time by over 3%: the tracing's cost, since the events enclose an untraced run's kernels.
TEST(KernelTime, TracingCostIsNotedWhereTheEventsReadOverThreePercentLess) {
  KernelTimeFigures k;
  k.seconds = 100e-6;
  EXPECT_FALSE(tracing_cost_noted(97.1e-6, k));
  EXPECT_TRUE(tracing_cost_noted(96.9e-6, k));
  EXPECT_FALSE(tracing_cost_noted(96.9e-6, KernelTimeFigures{}));
  EXPECT_FALSE(launch_cost_noted(96.9e-6, k));
  EXPECT_EQ(kernel_time_text("micro/add", gpu_result(3.43e-6, {.seconds = 3.61e-6, .samples = 10})),
            "  kernel_time 3.610 us (CUPTI, 10 samples); events 3.430 us, 180.0 ns (5.0%) less: CUPTI's tracing lengthens "
            "the kernels\n    it records (the events, which enclose them, read over 3.0% less)\n");
}

TEST(KernelTime, WithoutKernelTimeASmallGpuRunIsNotedAndACpuRunIsNot) {
  EXPECT_THAT(kernel_time_text("micro/add", gpu_result(3e-6, {})),
              HasSubstr("note: at 3.000 us a run the event time includes launch cost (under 5.000 us): --kernel-time "
                        "times the kernels\n"));
  EXPECT_EQ(kernel_time_text("micro/add", gpu_result(30e-6, {})), "");
  Result cpu = gpu_result(3e-6, {});
  cpu.device = "cpu";
  EXPECT_EQ(kernel_time_text("cpu/add", cpu), "");
  Result failed = gpu_result(3e-6, {});
  failed.status = Status::error;
  EXPECT_EQ(kernel_time_text("micro/add", failed), "");
}

TEST(KernelTime, WithoutCuptiTheCaseKeepsItsTimingAndSaysWhyInOneLine) {
  const Result r = gpu_result(3e-6, {.error = "this roofbench was built without CUPTI"});
  EXPECT_TRUE(r.passed());
  EXPECT_NEAR(r.figure(fig::time_median), 3e-6, 1e-15);
  EXPECT_EQ(kernel_time_text("micro/add", r), "  no kernel_time for micro/add: this roofbench was built without CUPTI\n");
}

// A timer that must not be asked for launches: on the CPU the observer says why without tracing.
class NoLaunches final : public Timer {
 public:
  SampleTime time(int) override { throw Error("timed"); }
  void run_untimed(int) override { throw Error("launched"); }
};

TEST(KernelTime, OnTheCpuTheObserverSaysCuptiTimesGpuKernelsOnly) {
  Measurement m;
  NoLaunches timer;
  KernelTimeObserver(10, DeviceKind::cpu).end(m, timer);
  EXPECT_FALSE(m.kernel_time.measured());
  EXPECT_THAT(m.kernel_time.error, HasSubstr("GPU kernels only"));
}

// --profile's breakdown reads the same records: per kernel name, per call of the traced function.
TEST(KernelTime, TheProfileSumsEachKernelsRecordsPerPass) {
  KernelTrace t;
  t.names = {"_Z3addPfS_", "copy"};
  t.passes = 2;
  t.records = {{0, 0, 0, 3000}, {1, 0, 3000, 4000}, {0, 1, 10000, 13000}, {1, 1, 13000, 14000}, {1, 1, 14000, 15000}};
  const KernelProfile p = profile_of(t);
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].name, "add(float*, float*)");
  EXPECT_NEAR(p.kernels[0].seconds_per_run, 3e-6, 1e-15);
  EXPECT_NEAR(p.kernels[1].launches_per_run, 1.5, 1e-12);
  EXPECT_NEAR(p.kernel_seconds_per_run, 4.5e-6, 1e-15);
}

// The span of a pass runs from its first record's start to its last's end; idle is what no record covers,
// concurrent records and memcpys included, so two overlapping kernels leave no gap.
TEST(KernelTime, TheProfileCountsTheIdleGapsInEachPass) {
  KernelTrace t;
  t.names = {"a", "b"};
  t.passes = 2;
  KernelRecord copy{1, 1, 12000, 13000};
  copy.kernel = false;
  t.records = {{0, 0, 1000, 3000}, {1, 0, 2000, 4000}, {0, 0, 4500, 5000},  // pass 0: span 4000, idle 500
               {1, 1, 10000, 11000}, copy, {0, 1, 13500, 14000}};         // pass 1: span 4000, idle 1500
  const KernelProfile p = profile_of(t);
  EXPECT_NEAR(p.span_seconds_per_run, 4e-6, 1e-15);
  EXPECT_NEAR(p.idle_seconds_per_run, 1e-6, 1e-15);
  EXPECT_NEAR(p.kernel_seconds_per_run, 3e-6, 1e-15) << "the memcpy is busy time, not kernel time";
  KernelProfile halved = p;
  scale_per_run(halved, 0.5);
  EXPECT_NEAR(halved.idle_seconds_per_run, 0.5e-6, 1e-15);
}

// Ranks that trace a collective together: whose trouble ends the passes on every rank, and how it is said.
TEST(TracedPasses, RanksThatWorkTogetherStopOnTheFirstTroubleAnyOfThemHas) {
  std::vector<std::string> others;  // what the other rank of a two-process world says in each round
  const RankWorld world{2, 0, [&](const std::string& blob) { return std::vector<std::string>{blob, others.at(0)}; }};
  const PassAgreement agree = agree_across(&world);
  ASSERT_TRUE(agree);
  others = {""};
  EXPECT_EQ(agree(""), "");
  others = {"cuptiActivityEnable(kind): CUPTI_ERROR_NOT_INITIALIZED"};
  EXPECT_EQ(agree(""), "rank 1: cuptiActivityEnable(kind): CUPTI_ERROR_NOT_INITIALIZED");
  EXPECT_EQ(agree("the traced runs failed: boom"), "the traced runs failed: boom") << "its own trouble first";
  EXPECT_FALSE(agree_across(nullptr)) << "a process on its own decides alone";
}

}  // namespace
}  // namespace roofbench
