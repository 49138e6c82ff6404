// The sampling rules (sampling.hpp), the observers' bookkeeping and the sample loop (sample_loop.hpp) on a
// scripted timer: what decides the samples, without a device or a clock.
#include "sampling.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <deque>

#include "clock_observers.hpp"
#include "cpu_backed_device.hpp"
#include "energy_observer.hpp"
#include "sample_loop.hpp"

namespace roofbench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

StoppingSettings settings(std::size_t min_samples, double min_time, double max_time, double noise) {
  return {.min_samples = min_samples, .min_time = min_time, .max_time = max_time, .noise_bound = noise};
}

TEST(StoppingRule, QuietSamplesStopOnceTheyAreEnoughAndMinTimeHasPassed) {
  StoppingRule stop(settings(3, 0.05, 5, 0.01));
  stop.add(1.0);
  stop.add(1.0);
  EXPECT_FALSE(stop.done(1.0));  // two of three
  stop.add(1.0);
  EXPECT_FALSE(stop.done(0.01));  // before min_time
  EXPECT_TRUE(stop.done(0.05));
}

TEST(StoppingRule, NoisySamplesGoOnUntilMaxTime) {
  StoppingRule stop(settings(2, 0, 1, 0.01));
  for (double t : {1.0, 1.5, 1.0, 1.5}) stop.add(t);
  EXPECT_FALSE(stop.done(0.99));
  EXPECT_TRUE(stop.done(1.0));
}

TEST(StoppingRule, TheNoiseIsTheSampleStdevOverTheMean) {
  // stdev of {1, 1.02} (n - 1) is 0.01414, over the mean 1.01: 1.4%.
  StoppingRule loose(settings(2, 0, 5, 0.015)), tight(settings(2, 0, 5, 0.013));
  for (StoppingRule* stop : {&loose, &tight}) stop->add(1.0), stop->add(1.02);
  EXPECT_TRUE(loose.done(0));
  EXPECT_FALSE(tight.done(0));
}

TEST(StoppingRule, ACaseTooSlowForItsMinSamplesStopsAtThreeAfterFourTimesMaxTime) {
  StoppingRule stop(settings(10, 0, 1, 0));
  for (int i = 0; i < 3; ++i) stop.add(i + 1.0);
  EXPECT_FALSE(stop.done(3.9));
  EXPECT_TRUE(stop.done(4.0));
  StoppingRule two(settings(10, 0, 1, 0));
  two.add(1), two.add(2);
  EXPECT_FALSE(two.done(100));
}

TEST(StoppingRule, DroppedSamplesEndSamplingOnlyWithThreeKeptAndGiveUpWithNone) {
  StoppingRule stop(settings(10, 0, 1, 0));
  EXPECT_FALSE(stop.done_after_dropped(2));
  EXPECT_FALSE(stop.hopeless(3.9));
  EXPECT_TRUE(stop.hopeless(4));
  for (int i = 0; i < 3; ++i) stop.add(1);
  EXPECT_FALSE(stop.done_after_dropped(0.9));
  EXPECT_TRUE(stop.done_after_dropped(1));
  EXPECT_FALSE(stop.hopeless(100));
}

TEST(StoppingSettings, EnergyLengthensTheSamplesAndTheCaseSetsAtLeastTwo) {
  MeasureOptions o;
  o.min_time = 0.05;
  o.max_time = 0.5;
  o.energy_seconds = 2;
  const StoppingSettings plain = stopping_settings(o, 1, false), metered = stopping_settings(o, 12, true);
  EXPECT_EQ(plain.min_samples, 2u);
  EXPECT_EQ(plain.min_time, 0.05);
  EXPECT_EQ(plain.max_time, 0.5);
  EXPECT_EQ(metered.min_samples, 12u);
  EXPECT_EQ(metered.min_time, 2);
  EXPECT_EQ(metered.max_time, 2);
}

TEST(WarmupBatching, DoublesUntilASampleLastsTheTargetNeverPastTheCap) {
  WarmupBatching batching(1e-3, 6, true);
  std::vector<int> batches{batching.batch()};
  while (batching.grow_after(1e-4)) batches.push_back(batching.batch());
  EXPECT_THAT(batches, ElementsAre(1, 2, 4, 6));
  WarmupBatching long_enough(1e-3, 64, true);
  EXPECT_FALSE(long_enough.grow_after(1e-3));
  EXPECT_EQ(long_enough.batch(), 1);
}

TEST(WarmupBatching, ColdKeepsOneRunASample) {
  WarmupBatching batching(1e-3, 64, false);
  EXPECT_FALSE(batching.grow_after(1e-6));
  EXPECT_EQ(batching.batch(), 1);
}

TEST(WarmupBatching, AHoldTimeoutHalvesTheBatchAndCapsItThere) {
  WarmupBatching batching(1e-3, 64, true);
  for (int i = 0; i < 4; ++i) batching.grow_after(0);
  ASSERT_EQ(batching.batch(), 16);
  batching.halve();
  EXPECT_EQ(batching.batch(), 8);
  EXPECT_EQ(batching.cap(), 8);
  EXPECT_FALSE(batching.grow_after(0));
  WarmupBatching one(1e-3, 64, true);
  one.halve();
  EXPECT_EQ(one.batch(), 1);
}

TEST(Batching, RunsPerSampleFillTheTargetWithinOneAndTheCap) {
  EXPECT_EQ(runs_per_sample(0, false, 2e-3, 1e-4, 64), 20);
  EXPECT_EQ(runs_per_sample(0, false, 2e-3, 1e-5, 64), 64);
  EXPECT_EQ(runs_per_sample(0, false, 2e-3, 1.0, 64), 1);
  EXPECT_EQ(runs_per_sample(0, false, 1e-3, 0, kGraphRunsCap), kGraphRunsCap);  // a run too fast to time
  EXPECT_EQ(runs_per_sample(0, true, 2e-3, 1e-6, 64), 1);
  EXPECT_EQ(runs_per_sample(7, true, 2e-3, 1e-6, 64), 7);
}

TEST(Batching, TheWarmupSettlesOnTheMedianOfItsLastFiveTimes) {
  EXPECT_EQ(settled_time_per_run({9, 9, 1, 2, 3, 4, 5}), 3);
  EXPECT_EQ(settled_time_per_run({4, 2}), 3);
  EXPECT_EQ(settled_time_per_run({}), 0);
}

TEST(Batching, GraphTimingWhereAllowedWhenAskedOrForShortRuns) {
  EXPECT_TRUE(use_graph_timing(GraphMode::automatic, true, 19e-6));
  EXPECT_FALSE(use_graph_timing(GraphMode::automatic, true, 20e-6));
  EXPECT_TRUE(use_graph_timing(GraphMode::on, true, 1));
  EXPECT_FALSE(use_graph_timing(GraphMode::on, false, 1e-6));
  EXPECT_FALSE(use_graph_timing(GraphMode::off, true, 1e-6));
}

TEST(Batching, AHoldTimeoutWithOneLaunchBehindItDropsTheHold) {
  EXPECT_EQ(answer_hold_timeout(true, 8, false), HoldTimeoutAnswer::abandon_hold);
  EXPECT_EQ(answer_hold_timeout(false, 1, false), HoldTimeoutAnswer::abandon_hold);
  EXPECT_EQ(answer_hold_timeout(false, 8, true), HoldTimeoutAnswer::abandon_hold);
  EXPECT_EQ(answer_hold_timeout(false, 8, false), HoldTimeoutAnswer::halve_runs);
}

class NoTimer final : public Timer {
 public:
  SampleTime time(int) override { return {}; }
  void run_untimed(int) override {}
};

TEST(ClockObservers, TheMeanClockIsOverEverySampleWithOneAndTheFloorDropsTheSlowOnes) {
  ClockProbeObserver probe;
  ClockFloorObserver floor(0.75);
  const std::vector<SampleTime> samples{{.seconds = 1, .clock_mhz = 1000, .clock_spans_sample = true},
                                        {.seconds = 2, .clock_mhz = 500},
                                        {.seconds = 1, .clock_mhz = 900, .clock_spans_sample = true}};
  for (const SampleTime& s : samples) probe.sample(s, 1), floor.sample(s, 1);
  Measurement r;
  r.samples = {1, 2, 1};
  NoTimer timer;
  probe.end(r, timer);
  floor.end(r, timer);
  EXPECT_DOUBLE_EQ(r.mean_clock_mhz, 800);
  EXPECT_EQ(r.samples_with_mean_clock, 2);
  EXPECT_EQ(r.throttled_samples, 1);
  EXPECT_THAT(r.samples, ElementsAre(1, 1));
  EXPECT_THAT(r.sample_clocks_mhz, ElementsAre(1000, 900));
}

TEST(ClockObservers, WithoutAClockNothingIsDroppedOrAveraged) {
  ClockProbeObserver probe;
  ClockFloorObserver floor(0.75);
  for (double t : {1.0, 5.0}) probe.sample({.seconds = t}, 1), floor.sample({.seconds = t}, 1);
  Measurement r;
  r.samples = {1, 5};
  NoTimer timer;
  probe.end(r, timer);
  floor.end(r, timer);
  EXPECT_EQ(r.mean_clock_mhz, 0);
  EXPECT_EQ(r.throttled_samples, 0);
  EXPECT_THAT(r.samples, ElementsAre(1, 5));
}

TEST(EnergyObserver, KeepsASpanPerSampleAndADroppedSampleLeavesANoteInsteadOfAFigure) {
  EnergyObserver energy({[] { return std::optional<double>(0.0); }}, std::chrono::microseconds(500));
  energy.begin();
  energy.sample({.seconds = 0.002}, 4);
  energy.sample({.seconds = 0.003}, 4);
  ASSERT_EQ(energy.spans().size(), 2u);
  EXPECT_EQ(energy.spans()[1].seconds, 0.003);
  EXPECT_EQ(energy.spans()[1].runs, 4);
  energy.dropped({});
  Measurement r;
  NoTimer timer;
  energy.end(r, timer);
  EXPECT_THAT(r.energy_note, HasSubstr("stream hold timed out"));
  EXPECT_TRUE(std::isnan(r.energy_per_run_j));
}

TEST(EnergyObserver, NoneWithColdOrWithoutACounter) {
  std::unique_ptr<Device> cpu = make_cpu_device();
  MeasureOptions o;
  Measurement r;
  EXPECT_EQ(make_energy_observer(r, {cpu.get()}, o), nullptr);  // not asked for
  EXPECT_TRUE(r.energy_note.empty());
  o.energy_seconds = 1;
  EXPECT_EQ(make_energy_observer(r, {cpu.get()}, o), nullptr);
  EXPECT_THAT(r.energy_note, HasSubstr("no energy counter"));
  o.cold = true;
  EXPECT_EQ(make_energy_observer(r, {cpu.get()}, o), nullptr);
  EXPECT_THAT(r.energy_note, HasSubstr("not with --cold"));
}

// A timer that plays back a script of samples (seconds per run, and whether the hold timed out), saying
// which runs each sample was asked for; the device that makes it counts its timers and their options.
struct Script {
  std::deque<std::pair<double, bool>> samples;
  double per_run_after = 1e-3;  // once the script is played
  std::vector<int> runs_asked;
  std::vector<TimingOptions> timers;
};

class ScriptedTimer final : public Timer {
 public:
  explicit ScriptedTimer(Script& script) : script_(script) {}
  SampleTime time(int runs) override {
    script_.runs_asked.push_back(runs);
    auto [per_run, timed_out] = script_.samples.empty() ? std::pair(script_.per_run_after, false) : script_.samples.front();
    if (!script_.samples.empty()) script_.samples.pop_front();
    return {.seconds = per_run * runs, .hold_timed_out = timed_out};
  }
  void run_untimed(int) override {}

 private:
  Script& script_;
};

class ScriptedDevice final : public CpuBackedDevice {
 public:
  explicit ScriptedDevice(Script& script) : CpuBackedDevice("scripted"), script_(script) {}
  std::unique_ptr<Timer> make_timer(const std::vector<Device*>&, std::function<void()>, const TimingOptions& o) override {
    script_.timers.push_back(o);
    return std::make_unique<ScriptedTimer>(script_);
  }

 private:
  Script& script_;
};

// The sample loop from 8 runs a sample until 3 samples are kept, on `device`'s timer.
Measurement eight_runs_a_sample_until_three_are_kept(ScriptedDevice& device, const RankWorld* world = nullptr) {
  Launcher launch({&device}, [] {}, TimingOptions{}, world);
  Measurement r;
  r.runs_per_sample = 8;
  StoppingRule stop(settings(3, 0, 10, 1));
  sample_until_stopped(launch, r, stop, {}, false);
  return r;
}

// Ranks in several processes that work together take rank 0's sample for every decision: here "rank 0"
// (the exchange's first blob) timed out its hold at the second sample and took twice as long at the others,
// while this rank's own samples were clean. The runs follow rank 0's decisions; the kept times are this rank's.
TEST(SampleLoop, RanksThatWorkTogetherTakeRankZerosDecisions) {
  Script script;
  script.samples = {{1e-4, false}, {1e-4, false}, {1e-4, false}, {1e-4, false}};
  ScriptedDevice device(script);
  int exchanges = 0;
  RankWorld world{2, 1, [&](const std::string& mine) {
                    double sample[3];
                    std::memcpy(sample, mine.data(), sizeof sample);
                    sample[0] *= 2;
                    sample[2] = ++exchanges == 2 ? 1.0 : 0.0;  // the hold timed out on rank 0
                    return std::vector<std::string>{std::string(reinterpret_cast<const char*>(sample), sizeof sample), mine};
                  }};
  const Measurement r = eight_runs_a_sample_until_three_are_kept(device, &world);
  EXPECT_THAT(script.runs_asked, ElementsAre(8, 8, 4, 4));
  EXPECT_EQ(r.hold_timeouts, 1);
  EXPECT_EQ(exchanges, 4);
  EXPECT_THAT(r.samples, ElementsAre(1e-4, 1e-4, 1e-4));
}

// The reverse: this rank's hold timed out at the second sample while rank 0's did not. Its time there holds
// the launches' own gaps, so every rank drops that sample and halves its runs, as rank 0 does then too.
TEST(SampleLoop, RanksThatWorkTogetherDropASampleWhoseHoldTimedOutOnAnyRank) {
  Script script;
  script.samples = {{1e-4, false}, {5e-4, true}, {1e-4, false}, {1e-4, false}};
  ScriptedDevice device(script);
  RankWorld world{2, 1, [&](const std::string& mine) {
                    double sample[3];
                    std::memcpy(sample, mine.data(), sizeof sample);
                    sample[2] = 0.0;  // rank 0's hold never timed out
                    return std::vector<std::string>{std::string(reinterpret_cast<const char*>(sample), sizeof sample), mine};
                  }};
  const Measurement r = eight_runs_a_sample_until_three_are_kept(device, &world);
  EXPECT_THAT(script.runs_asked, ElementsAre(8, 8, 4, 4));
  EXPECT_EQ(r.hold_timeouts, 1);
  EXPECT_THAT(r.samples, ElementsAre(1e-4, 1e-4, 1e-4));
}

TEST(SampleLoop, AHoldTimeoutHalvesTheRunsAndTheDroppedSampleIsNotKept) {
  Script script;
  script.samples = {{1e-4, false}, {1e-4, true}, {1e-4, false}, {1e-4, false}};
  ScriptedDevice device(script);
  const Measurement r = eight_runs_a_sample_until_three_are_kept(device);
  EXPECT_THAT(script.runs_asked, ElementsAre(8, 8, 4, 4));
  EXPECT_EQ(r.hold_timeouts, 1);
  EXPECT_FALSE(r.hold_abandoned);
  EXPECT_EQ(r.samples.size(), 3u);
  EXPECT_EQ(script.timers.size(), 1u);
}

TEST(SampleLoop, AHoldTimeoutWithOneRunASampleTimesWithoutTheHoldFromThenOn) {
  Script script;
  script.samples = {{1e-4, true}};
  ScriptedDevice device(script);
  Launcher launch({&device}, [] {}, TimingOptions{.hold = true});
  Measurement r;
  r.runs_per_sample = 1;
  StoppingRule stop(settings(2, 0, 10, 1));
  sample_until_stopped(launch, r, stop, {}, false);
  EXPECT_TRUE(r.hold_abandoned);
  ASSERT_EQ(script.timers.size(), 2u);
  EXPECT_FALSE(script.timers.back().hold);
  EXPECT_EQ(r.samples.size(), 2u);
}

TEST(SampleLoop, TheWarmupGrowsItsBatchThenSettles) {
  Script script;
  script.per_run_after = 1e-4;  // 16 runs fill the CPU's 1 ms target
  ScriptedDevice device(script);
  Launcher launch({&device}, [] {}, TimingOptions{});
  Measurement r;
  const WarmupOutcome warm = warm_up(launch, r, DeviceKind::cpu, MeasureOptions{});
  ASSERT_GE(script.runs_asked.size(), 15u);  // two windows of five batches of 16 to settle
  EXPECT_THAT(std::vector<int>(script.runs_asked.begin(), script.runs_asked.begin() + 6), ElementsAre(1, 2, 4, 8, 16, 16));
  EXPECT_DOUBLE_EQ(warm.per_run, 1e-4);
  EXPECT_EQ(warm.cap, launch_queue_cap(DeviceKind::cpu));
  int runs = 0;
  for (int asked : script.runs_asked) runs += asked;
  EXPECT_EQ(r.warmup_iterations, runs);
  EXPECT_GE(r.phases.warmup, min_warmup_seconds(DeviceKind::cpu));
}

TEST(SampleLoop, AWarmupHoldTimeoutHalvesTheBatchAndCapsTheSamplesThere) {
  Script script;
  script.samples = {{1e-5, false}, {1e-5, false}, {1e-5, false}, {1e-5, false}, {1e-5, true}};
  script.per_run_after = 1e-5;
  ScriptedDevice device(script);
  Launcher launch({&device}, [] {}, TimingOptions{});
  Measurement r;
  const WarmupOutcome warm = warm_up(launch, r, DeviceKind::cuda, MeasureOptions{});
  EXPECT_THAT(std::vector<int>(script.runs_asked.begin(), script.runs_asked.begin() + 6), ElementsAre(1, 2, 4, 8, 16, 8));
  EXPECT_EQ(warm.cap, 8);
  EXPECT_EQ(r.hold_timeouts, 1);
  EXPECT_FALSE(r.hold_abandoned);
}

}  // namespace
}  // namespace roofbench
