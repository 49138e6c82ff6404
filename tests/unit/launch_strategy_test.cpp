#include "launch_strategy.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace roofbench {
namespace {

using enum SampleStep;
using Steps = std::vector<SampleStep>;

SamplePlan plan(const TimingOptions& options, int count, bool timed) {
  return make_launch_strategy(options)->plan(count, timed);
}

TEST(LaunchStrategy, HotStreamSamplesTimeTheRunsBetweenEventsOnTheStream) {
  const SamplePlan p = plan({.cold = false, .graph = false}, 3, true);
  EXPECT_EQ(p.runs, 3);
  EXPECT_EQ(p.before_graph, (Steps{start, runs, stop}));
  EXPECT_TRUE(p.in_graph.empty());
  EXPECT_TRUE(p.after_graph.empty());
}

TEST(LaunchStrategy, HotGraphSamplesKeepTheEventsOutsideTheGraph) {
  const SamplePlan p = plan({.cold = false, .graph = true}, 2, true);
  EXPECT_EQ(p.runs, 2);
  EXPECT_EQ(p.before_graph, (Steps{start}));
  EXPECT_EQ(p.in_graph, (Steps{runs}));
  EXPECT_EQ(p.after_graph, (Steps{stop}));
}

TEST(LaunchStrategy, ColdStreamSamplesFlushBeforeTheStartEvent) {
  const SamplePlan p = plan({.cold = true, .graph = false}, 1, true);
  EXPECT_EQ(p.before_graph, (Steps{flush, start, runs, stop}));
  EXPECT_TRUE(p.in_graph.empty());
}

// The graph's launch cost is spent before its flush, outside the timed span; the flush itself is outside it too.
TEST(LaunchStrategy, ColdGraphSamplesCaptureTheFlushAndTheEventsIntoTheGraph) {
  const SamplePlan p = plan({.cold = true, .graph = true}, 1, true);
  EXPECT_TRUE(p.before_graph.empty());
  EXPECT_EQ(p.in_graph, (Steps{flush, start, runs, stop}));
  EXPECT_TRUE(p.after_graph.empty());
}

TEST(LaunchStrategy, UntimedLaunchesAreTheRunsAloneOnTheSameLaunchPath) {
  for (const bool cold : {false, true}) {
    const SamplePlan stream = plan({.cold = cold, .graph = false}, 2, false);
    EXPECT_EQ(stream.runs, 2);
    EXPECT_EQ(stream.before_graph, (Steps{runs}));
    EXPECT_TRUE(stream.in_graph.empty());
    const SamplePlan graph = plan({.cold = cold, .graph = true}, 2, false);
    EXPECT_TRUE(graph.before_graph.empty());
    EXPECT_EQ(graph.in_graph, (Steps{runs}));
    EXPECT_TRUE(graph.after_graph.empty());
  }
}

// The names the results keep: "timing" graph or stream, the context's "mode" cold or hot.
TEST(LaunchStrategy, EachStrategySaysWhetherItIsAGraphAndWhetherItIsCold) {
  for (const bool cold : {false, true})
    for (const bool graph : {false, true}) {
      const auto strategy = make_launch_strategy({.cold = cold, .graph = graph});
      EXPECT_EQ(strategy->cold(), cold);
      EXPECT_EQ(strategy->graph(), graph);
    }
}

// --- the choice, once per benchmark

Timing graphable(bool yes) { return {.graphable = yes}; }

MeasureOptions options(GraphMode graph, bool cold = false) {
  MeasureOptions o;
  o.graph = graph;
  o.cold = cold;
  return o;
}

TEST(LaunchChoice, TheWarmupRunsOnTheStreamHeldOnAGpu) {
  const TimingOptions gpu = warmup_timing(options(GraphMode::on, true), DeviceKind::cuda);
  EXPECT_TRUE(gpu.cold);
  EXPECT_FALSE(gpu.graph);
  EXPECT_TRUE(gpu.hold);
  const TimingOptions cpu = warmup_timing(options(GraphMode::automatic), DeviceKind::cpu);
  EXPECT_FALSE(cpu.cold);
  EXPECT_FALSE(cpu.graph);
  EXPECT_FALSE(cpu.hold);
}

TEST(LaunchChoice, AGraphWhereOneCudaRankTimesAGraphableCaseAndItIsAskedForOrTheRunsAreShort) {
  const double short_run = 5e-6, long_run = 1e-3;
  EXPECT_TRUE(choose_timing(options(GraphMode::automatic), graphable(true), DeviceKind::cuda, 1, short_run).graph);
  EXPECT_FALSE(choose_timing(options(GraphMode::automatic), graphable(true), DeviceKind::cuda, 1, long_run).graph);
  EXPECT_TRUE(choose_timing(options(GraphMode::on), graphable(true), DeviceKind::cuda, 1, long_run).graph);
  EXPECT_FALSE(choose_timing(options(GraphMode::off), graphable(true), DeviceKind::cuda, 1, short_run).graph);
  EXPECT_FALSE(choose_timing(options(GraphMode::on), graphable(false), DeviceKind::cuda, 1, short_run).graph);
  EXPECT_FALSE(choose_timing(options(GraphMode::on), graphable(true), DeviceKind::cuda, 2, short_run).graph);
  EXPECT_FALSE(choose_timing(options(GraphMode::on), graphable(true), DeviceKind::cpu, 1, short_run).graph);
}

TEST(LaunchChoice, ColdWhereAskedForOnTheStreamOrInAGraph) {
  const TimingOptions stream = choose_timing(options(GraphMode::off, true), graphable(true), DeviceKind::cuda, 1, 1e-3);
  EXPECT_TRUE(stream.cold);
  EXPECT_FALSE(stream.graph);
  const TimingOptions graph = choose_timing(options(GraphMode::on, true), graphable(true), DeviceKind::cuda, 1, 1e-3);
  EXPECT_TRUE(graph.cold);
  EXPECT_TRUE(graph.graph);
  EXPECT_TRUE(graph.hold);
  EXPECT_FALSE(choose_timing(options(GraphMode::off), graphable(true), DeviceKind::cpu, 1, 1e-3).cold);
}

// --- the CPU's strategies: the plans carried out on the host

TEST(CpuLaunch, TheHostFlushesBeforeTheStartAndTimesOnlyTheRuns) {
  std::string order;
  const double seconds = time_on_host(plan({.cold = true}, 3, true), [&] { order += 'r'; }, [&] {
    order += 'f';
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  EXPECT_EQ(order, "frrr");
  EXPECT_GE(seconds, 0);
  EXPECT_LT(seconds, 0.025);  // the flush's 50 ms are outside the span
}

TEST(CpuLaunch, AHotSampleRunsWithoutAFlushAndTimesItsRuns) {
  int flushes = 0, runs_done = 0;
  const double seconds = time_on_host(plan({}, 4, true), [&] {
    ++runs_done;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }, [&] { ++flushes; });
  EXPECT_EQ(runs_done, 4);
  EXPECT_EQ(flushes, 0);
  EXPECT_GE(seconds, 0.008);
}

TEST(CpuLaunch, TheHostRefusesGraphs) {
  EXPECT_THROW(time_on_host(plan({.graph = true}, 1, true), [] {}, [] {}), Error);
  EXPECT_THROW(make_cpu_timer([] {}, {.graph = true}), Error);
}

TEST(CpuLaunch, TheCpuTimerRunsWhatEachSampleAsksFor) {
  for (const bool cold : {false, true}) {
    int runs_done = 0;
    const auto timer = make_cpu_timer([&] { ++runs_done; }, {.cold = cold, .hold = false});
    const SampleTime s = timer->time(5);
    EXPECT_EQ(runs_done, 5);
    EXPECT_GE(s.seconds, 0);
    timer->run_untimed(2);
    EXPECT_EQ(runs_done, 7);
  }
}

}  // namespace
}  // namespace roofbench
