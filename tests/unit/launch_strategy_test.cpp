#include "launch_strategy.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
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

// --- cold by rotation: the copies, the plan over them, and the fallback to a flush

constexpr double kL2 = 50.0 * 1024 * 1024;  // an H200's L2
constexpr double kFree = 100e9;

TEST(ColdRotation, TheFewestCopiesThatTogetherExceedTwiceTheCache) {
  const double gemv = 768.0 * 3072 * 2;  // the 1-token linear layer's bf16 weight: 4.72 MB
  const ColdRotation c = choose_rotation(gemv, kL2, kFree, true);
  EXPECT_EQ(c.copies, 23);  // 22 x 4.72 MB = 103.8 MB < 104.9 MB = 2 x L2 <= 23 x 4.72 MB
  EXPECT_GE(c.copies * gemv, 2 * kL2);
  EXPECT_LT((c.copies - 1) * gemv, 2 * kL2);
  EXPECT_EQ(choose_rotation(2 * kL2, kL2, kFree, true).copies, 1);   // exactly twice the cache in one
  EXPECT_EQ(choose_rotation(8 * kL2, kL2, kFree, true).copies, 1);   // larger: no copy is needed
  EXPECT_EQ(choose_rotation(8 * kL2, kL2, kFree, true).fact(kL2).rfind("rotate: 1 copy of ", 0), 0u);
  EXPECT_EQ(choose_rotation(2 * kL2 - 1, kL2, kFree, true).copies, 2);
  EXPECT_EQ(choose_rotation(kL2 / 4, kL2, kFree, true).copies, 8);
  EXPECT_EQ(choose_rotation(kL2 / 4 + 1, kL2, kFree, true).copies, 8);
  EXPECT_TRUE(choose_rotation(gemv, kL2, kFree, true).flush_reason.empty());
}

TEST(ColdRotation, FlushesWithTheReasonWhereItCannotRotate) {
  auto flushed = [](const ColdRotation& c, const std::string& words) {
    EXPECT_EQ(c.copies, 0);
    EXPECT_NE(c.flush_reason.find(words), std::string::npos) << c.flush_reason;
    EXPECT_EQ(c.fact(kL2), "flush: " + c.flush_reason);
  };
  flushed(choose_rotation(0, kL2, kFree, true), "no copies");
  flushed(choose_rotation(1e6, kL2, kFree, false), "cannot be one graph");
  flushed(choose_rotation(1e6, 0, kFree, true), "cache size is not known");
  flushed(choose_rotation(1e3, kL2, kFree, true), "over 4096");                 // 104858 copies of 1 kB
  flushed(choose_rotation(kL2, kL2, 1.5 * kL2, true), "half the device's free memory");
  EXPECT_EQ(choose_rotation(kL2, kL2, 2 * kL2, true).copies, 2);                  // one more copy fits in half
}

// Ranks that work together across processes: an H200 (50 MB of L2) beside a GPU of 40 MB rotate over the H200's
// copies; where one rank flushes or cannot fit that many, every rank flushes, naming the first such rank.
TEST(ColdRotation, RanksAgreeOnTheCopiesTheLargestCacheNeeds) {
  const double gemv = 768.0 * 3072 * 2;
  const ColdRotation h200 = choose_rotation(gemv, kL2, kFree, true), smaller = choose_rotation(gemv, 40e6, kFree, true);
  ASSERT_LT(smaller.copies, h200.copies);
  const ColdRotation agreed = agree_on_rotation({{smaller.copies, kFree, gemv, ""}, {h200.copies, kFree, gemv, ""}}, gemv);
  EXPECT_EQ(agreed.copies, h200.copies);
  EXPECT_EQ(agreed.fact(kL2), h200.fact(kL2));
  const ColdRotation tight = agree_on_rotation({{h200.copies, kFree, gemv, ""}, {smaller.copies, 150e6, gemv, ""}}, gemv);
  EXPECT_EQ(tight.copies, 0);  // 22 more copies of 4.72 MB are over half of rank 1's 150 MB
  EXPECT_EQ(tight.flush_reason, "rank 1: " + rotation_memory_refusal(h200.copies, gemv, 150e6));
  const ColdRotation flushed =
      agree_on_rotation({{h200.copies, kFree, gemv, ""}, {0, kFree, gemv, "why"}, {0, kFree, gemv, "not"}}, gemv);
  EXPECT_EQ(flushed.copies, 0);
  EXPECT_EQ(flushed.flush_reason, "rank 1: why");
}

// Sets of other sizes on other ranks (an uneven split): each rank's free memory is held against its own sets, so
// the agreement is the same whichever rank computes it; only the fact names the computing rank's sets.
TEST(ColdRotation, EveryRankAgreesAlikeWhereTheRanksSetsDiffer) {
  const std::vector<RankRotationChoice> choices{{7, 1e9, 0.3e6, ""}, {2, 4e6, 1.5e6, ""}};
  const ColdRotation on_0 = agree_on_rotation(choices, 0.3e6), on_1 = agree_on_rotation(choices, 1.5e6);
  EXPECT_EQ(on_0.copies, 0);  // 6 more of rank 1's 1.5 MB sets are over half its 4 MB
  EXPECT_EQ(on_0.flush_reason, "rank 1: " + rotation_memory_refusal(7, 1.5e6, 4e6));
  EXPECT_EQ(on_1.copies, on_0.copies);
  EXPECT_EQ(on_1.flush_reason, on_0.flush_reason);
}

// What a rank sends is read back whole, its reason's spaces kept; a blob that is not one, cut short, or with a
// count out of range (or too large for an int) is no choice.
TEST(ColdRotation, AChoiceIsReadBackWholeAndAMalformedOneIsRefused) {
  const RankRotationChoice sent{0, 8.5e10, 4718592, "its runs cannot be one graph (several ranks)"};
  const std::optional<RankRotationChoice> read = read_rotation_choice(rotation_choice_blob(sent));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->copies, sent.copies);
  EXPECT_EQ(read->free_bytes, sent.free_bytes);
  EXPECT_EQ(read->copy_bytes, sent.copy_bytes);
  EXPECT_EQ(read->flush_reason, sent.flush_reason);
  EXPECT_EQ(rotation_choice_blob({23, 1e9, 4718592, ""}), "copies 23 1000000000 4718592 ");
  for (const char* bad : {"", "made", "copies", "copies ", "copies 7", "copies 7 1e9", "copies 7 1e9 3e5",
                          "copies x 1e9 3e5 ", "copies 7 1e9  3e5 ", "copies -1 1e9 3e5 ", "copies 4097 1e9 3e5 ",
                          "copies 99999999999999999999 1e9 3e5 "})
    EXPECT_FALSE(read_rotation_choice(bad)) << bad;
}

TEST(ColdRotation, TheFactNamesTheCopiesAndTheirBytes) {
  EXPECT_EQ(choose_rotation(768.0 * 3072 * 2, kL2, kFree, true).fact(kL2),
            "rotate: 23 copies of 4.72 MB (2 x cache = 105 MB)");
}

TEST(ColdRotation, ASampleIsWholeRoundsOverTheCopies) {
  EXPECT_EQ(rotation_runs_per_sample(23, 1), 23);
  EXPECT_EQ(rotation_runs_per_sample(23, 23), 23);
  EXPECT_EQ(rotation_runs_per_sample(23, 24), 46);
  EXPECT_EQ(rotation_runs_per_sample(2, 401), 402);
  EXPECT_EQ(rotation_runs_per_sample(9, 0), 9);
}

// The captured runs read copies 0..N-1 in order and wrap: between two reads of one copy every other copy
// went through the cache. The events stay outside the graph, and nothing flushes.
TEST(ColdRotation, TheGraphsRunsReadTheCopiesInTurnBetweenEventsOnTheStream) {
  const TimingOptions rotate{.cold = true, .graph = true, .copies = 3};
  const auto strategy = make_launch_strategy(rotate);
  EXPECT_TRUE(strategy->cold());
  EXPECT_TRUE(strategy->graph());
  EXPECT_FALSE(strategy->flushes());
  for (const bool timed : {true, false}) {
    const SamplePlan p = strategy->plan(6, timed);
    EXPECT_EQ(p.copies, 3);
    EXPECT_EQ(p.in_graph, (Steps{runs}));
    EXPECT_EQ(p.before_graph, timed ? Steps{start} : Steps{});
    EXPECT_EQ(p.after_graph, timed ? Steps{stop} : Steps{});
    std::vector<int> order;
    for (int i = 0; i < p.runs; ++i) order.push_back(copy_for_run(p, i));
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  }
  EXPECT_EQ(copy_for_run(plan({.cold = true, .graph = true}, 2, true), 1), -1);  // flushed: no copies
  EXPECT_TRUE(make_launch_strategy({.cold = true, .graph = true})->flushes());
  EXPECT_FALSE(make_launch_strategy({.cold = false, .graph = true, .copies = 3})->cold());  // hot: no rotation
}

TEST(ColdRotation, TheChoiceIsAGraphOverTheCopiesOnlyWhenCold) {
  const TimingOptions cold = choose_timing(options(GraphMode::automatic, true), graphable(true), DeviceKind::cuda, 1,
                                           1e-3, 23);
  EXPECT_TRUE(cold.cold);
  EXPECT_TRUE(cold.graph);  // a graph whatever the runs' length
  EXPECT_EQ(cold.copies, 23);
  EXPECT_EQ(choose_timing(options(GraphMode::automatic), graphable(true), DeviceKind::cuda, 1, 1e-3, 23).copies, 0);
  EXPECT_FALSE(graph_allowed(options(GraphMode::off, true), graphable(true), DeviceKind::cuda, 1));
  EXPECT_FALSE(graph_allowed(options(GraphMode::on, true), graphable(false), DeviceKind::cuda, 1));
  EXPECT_FALSE(graph_allowed(options(GraphMode::on, true), graphable(true), DeviceKind::cuda, 2));
  EXPECT_TRUE(graph_allowed(options(GraphMode::automatic, true), graphable(true), DeviceKind::cuda, 1));
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
