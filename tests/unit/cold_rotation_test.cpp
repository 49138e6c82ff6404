// Cold by rotation through the host's measurement path, on the CPU: a device that says it is a GPU with a
// 1 MB cache and carries its plans out on the host as a CUDA timer does (graphs run in place), and cases that
// record which copy each run read. Checks what the host does with a case's copies: how many it asks for,
// that the timed runs read them in turn from 0 and wrap, the fallback to a flush and its reason, and the
// fact and label that name the cold mode.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cpu_backed_device.hpp"
#include "launch_strategy.hpp"
#include "measure.hpp"
#include "summaries.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;

constexpr double kCache = 1e6;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A plan's steps on the host: the runs step as CudaTimer does it (each run pointed at its copy first).
class PlanOnHostTimer final : public Timer {
 public:
  PlanOnHostTimer(std::function<void()> run_once, const TimingOptions& options)
      : run_once_(std::move(run_once)), options_(options), strategy_(make_launch_strategy(options)) {}
  SampleTime time(int runs) override { return {carry_out(strategy_->plan(runs, true)), 0}; }
  void run_untimed(int runs) override { carry_out(strategy_->plan(runs, false)); }

 private:
  double carry_out(const SamplePlan& plan) {
    double start = 0, stop = 0;
    for (const auto* steps : {&plan.before_graph, &plan.in_graph, &plan.after_graph})
      for (SampleStep step : *steps) {
        if (step == SampleStep::start) start = steady_seconds();
        if (step == SampleStep::stop) stop = steady_seconds();
        if (step != SampleStep::runs) continue;
        for (int i = 0; i < plan.runs; ++i) {
          if (plan.copies > 0) options_.use_copy(copy_for_run(plan, i));
          run_once_();
        }
      }
    return stop - start;
  }
  std::function<void()> run_once_;
  TimingOptions options_;
  std::unique_ptr<LaunchStrategy> strategy_;
};

class FakeGpu final : public CpuBackedDevice {
 public:
  FakeGpu() : CpuBackedDevice("fake-gpu") { info_.kind = DeviceKind::cuda; }
  const DeviceInfo& info() const override { return info_; }
  double cache_bytes() const override { return kCache; }
  double free_bytes() override { return 1e9; }
  std::unique_ptr<Timer> make_timer(const std::vector<Device*>&, std::function<void()> run_once,
                                    const TimingOptions& options) override {
    return std::make_unique<PlanOnHostTimer>(std::move(run_once), options);
  }

 private:
  DeviceInfo info_;
};

// Copies of `bytes` each, allocated but never read; every run records the copy it read (-1: before any was chosen).
class RecordingRotation final : public Rotation {
 public:
  explicit RecordingRotation(std::size_t bytes) : bytes_(bytes) {}
  std::size_t bytes() const override { return bytes_; }
  void make_copies(Context& ctx, int copies) override {
    made = copies;
    for (int i = 1; i < copies; ++i) ctx.alloc(bytes_, BufferRole::input);
  }
  void use(int copy) override { current = copy; }
  int made = 0, current = -1;

 private:
  std::size_t bytes_;
};

class RotatingCase final : public Case {
 public:
  RotatingCase(std::size_t bytes, std::vector<int>& read) : rotation_(bytes), read_(read) {}
  void setup(Context&) override {}
  void run(Context&) override { read_.push_back(rotation_.current); }
  Work work() const override { return {.bytes = 1}; }
  Check check(Context&) override { return {}; }
  Rotation* rotation() override { return rotation_.bytes() > 0 ? &rotation_ : nullptr; }

 private:
  RecordingRotation rotation_;
  std::vector<int>& read_;
};

struct Timed {
  Measurement m;
  std::vector<int> read;  // the copy every run read, in order
};

// `world`: other processes this one works together with (a collective case under a launcher), or none.
Timed time_cold(std::size_t copy_bytes, GraphMode graph = GraphMode::automatic, bool cold = true,
                const RankWorld& world = {}, const Ceilings& ceilings = {}) {
  Timed t;
  CaseSpec spec{.name = "rotating", .device = world.spans_processes() ? DeviceNeed::gpus(1) : DeviceNeed::gpu(),
                .make = [&](const Params&) { return std::make_unique<RotatingCase>(copy_bytes, t.read); }};
  BenchmarkSpec b{"test/rotating", "test", &spec, Params{}};
  MeasureOptions o;
  o.cold = cold;
  o.graph = graph;
  o.max_time = 0.05;
  o.warmup_max = 0.05;
  FakeGpu gpu;
  t.m = take_measurement(b, {&gpu}, ceilings, o, world);
  return t;
}

// Rank 1 of a two-process world, as rank 0 sees it through the exchange: it answers every round as rank 0
// does, except the rounds about the copies: the copies it needs, its free memory and the bytes of its set
// ("copies N FREE BYTES reason"),
// then whether its copies were made ("made", or "failed" and why), where it says `said` in turn.
RankWorld with_rank_1_saying(std::vector<std::string> said) {
  auto answers = std::make_shared<std::vector<std::string>>(std::move(said));
  auto asked = std::make_shared<std::size_t>(0);
  return {2, 0, [answers, asked](const std::string& blob) {
            const bool about_copies = blob.rfind("copies ", 0) == 0 || blob == "made" || blob.rfind("failed ", 0) == 0;
            if (!about_copies) return std::vector<std::string>{blob, blob};
            return std::vector<std::string>{blob, answers->at((*asked)++)};
          }};
}

std::string fact(const Measurement& m, const std::string& name) {
  for (const Fact& f : m.case_facts)
    if (f.name == name) return f.value;
  return "(none)";
}

TEST(ColdRotationInMeasure, TheTimedRunsReadTheCopiesInTurnFromZero) {
  const Timed t = time_cold(300'000);  // 7 x 300 kB = 2.1 MB >= 2 x 1 MB
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 7);
  EXPECT_TRUE(t.m.cold);
  EXPECT_TRUE(t.m.graph);
  EXPECT_EQ(fact(t.m, "cold_mode"), "rotate: 7 copies of 0.3 MB (2 x cache = 2 MB)");
  EXPECT_EQ(t.m.runs_per_sample % 7, 0) << t.m.runs_per_sample;
  // The last sample: whole rounds over the copies, in order.
  ASSERT_GE(t.read.size(), std::size_t(t.m.runs_per_sample));
  for (int i = 0; i < t.m.runs_per_sample; ++i)
    EXPECT_EQ(t.read[t.read.size() - t.m.runs_per_sample + i], i % 7) << "run " << i;
  EXPECT_THAT(result_of(t.m).label(true), HasSubstr("mode=cold cold=rotate"));
}

TEST(ColdRotationInMeasure, ACaseWithoutCopiesIsFlushedAndSaysWhy) {
  const Timed t = time_cold(0);
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 0);
  EXPECT_TRUE(t.m.cold);
  EXPECT_EQ(t.m.runs_per_sample, 1);
  EXPECT_EQ(fact(t.m, "cold_mode"), "flush: the case has no copies of its inputs to rotate");
  const std::string label = result_of(t.m).label(true);
  EXPECT_THAT(label, HasSubstr("mode=cold"));
  EXPECT_THAT(label, ::testing::Not(HasSubstr("rotate")));
}

TEST(ColdRotationInMeasure, WithoutGraphsARotatingCaseIsFlushedAndSaysWhy) {
  const Timed t = time_cold(300'000, GraphMode::off);
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 0);
  EXPECT_THAT(fact(t.m, "cold_mode"), HasSubstr("flush: its runs cannot be one graph"));
  for (int copy : t.read) EXPECT_EQ(copy, -1);  // no copy was ever chosen
}

// Rank 1's larger cache needs 12 copies where this rank's needs 7: both rotate over 12, so neither reads warm data.
TEST(ColdRotationInMeasure, RanksThatWorkTogetherRotateOverTheMostCopiesAnyOfThemNeeds) {
  const Timed t = time_cold(300'000, GraphMode::automatic, true, with_rank_1_saying({"copies 12 1e9 300000 ", "made"}));
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 12);
  EXPECT_THAT(fact(t.m, "cold_mode"), HasSubstr("rotate: 12 copies"));
  EXPECT_EQ(t.m.runs_per_sample % 12, 0) << t.m.runs_per_sample;
  int highest = -1;
  for (int copy : t.read) highest = std::max(highest, copy);
  EXPECT_EQ(highest, 11);
  EXPECT_EQ(t.m.memory.allocated, 11 * 300'000.0);  // the 11 copies beside the case's own set
}

// Rank 1 needs 7 copies too but has 1 MB free: 6 more of 0.3 MB do not fit there, so every rank flushes, naming it.
TEST(ColdRotationInMeasure, WhereOneRankCannotFitTheCopiesEveryRankFlushesNamingIt) {
  const Timed t = time_cold(300'000, GraphMode::automatic, true, with_rank_1_saying({"copies 7 1e6 300000 "}));
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 0);
  EXPECT_THAT(fact(t.m, "cold_mode"), HasSubstr("flush: rank 1: 6 more copies of 0.3 MB would take over half"));
  EXPECT_EQ(t.m.memory.allocated, 0);  // no copy was made
}

// Rank 1's sets are 1.5 MB (its share of an uneven split): 6 more of them do not fit in its 4 MB, though 6 more of
// this rank's 0.3 MB would. Every rank judges rank 1's memory by rank 1's sets, so this rank flushes as rank 1
// does, rather than rotate while rank 1 flushes and run the case more often than it.
TEST(ColdRotationInMeasure, EachRanksMemoryIsJudgedByItsOwnSetsSoEveryRankDecidesAlike) {
  const Timed t = time_cold(300'000, GraphMode::automatic, true, with_rank_1_saying({"copies 2 4e6 1.5e6 "}));
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 0);
  EXPECT_THAT(fact(t.m, "cold_mode"), HasSubstr("flush: rank 1: 6 more copies of 1.5 MB would take over half"));
  EXPECT_EQ(t.m.memory.allocated, 0);
}

// A blob that is no choice of copies (cut short: no bytes of a set) fails the case; every rank reads the same
// blobs, so every rank fails it alike.
TEST(ColdRotationInMeasure, ABlobThatIsNoChoiceOfCopiesFailsTheCaseNamingItsRank) {
  const Timed t = time_cold(300'000, GraphMode::automatic, true, with_rank_1_saying({"copies 7 1e9"}));
  EXPECT_EQ(t.m.status, Status::error);
  EXPECT_EQ(t.m.message, "rank 1 sent no count of copies");
}

TEST(ColdRotationInMeasure, WhereOneRankFlushesEveryRankFlushesNamingIt) {
  const Timed t = time_cold(300'000, GraphMode::automatic, true,
                            with_rank_1_saying({"copies 0 1e9 300000 the device's cache size is not known"}));
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 0);
  EXPECT_EQ(fact(t.m, "cold_mode"), "flush: rank 1: the device's cache size is not known");
}

// The copies this rank made are given back once the ranks agree to flush, not kept until the case ends.
TEST(ColdRotationInMeasure, WhereOneRanksCopiesDidNotFitEveryRankFlushesNamingItAndGivesItsCopiesBack) {
  const Timed t = time_cold(300'000, GraphMode::automatic, true,
                            with_rank_1_saying({"copies 7 1e9 300000 ", "failed its copies did not fit: out of memory"}));
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 0);
  EXPECT_EQ(fact(t.m, "cold_mode"), "flush: rank 1: its copies did not fit: out of memory");
  EXPECT_EQ(t.m.memory.allocated, 0);
  EXPECT_EQ(t.m.memory.peak, 6 * 300'000.0);  // they were made
  for (int copy : t.read) EXPECT_EQ(copy, -1);  // no copy was ever chosen
}

TEST(ColdRotationInMeasure, HotRunsNeitherRotateNorSayAColdMode) {
  const Timed t = time_cold(300'000, GraphMode::automatic, false);
  ASSERT_EQ(t.m.status, Status::ok) << t.m.message;
  EXPECT_EQ(t.m.cold_copies, 0);
  EXPECT_FALSE(t.m.cold);
  EXPECT_EQ(fact(t.m, "cold_mode"), "(none)");
}

// The case's one byte fits in the fake GPU's cache: hot, it is placed under the cache roof; cold, under DRAM's.
TEST(ColdRotationInMeasure, AHotRunWhoseBytesFitInCacheIsPlacedUnderTheCacheRoof) {
  const Ceilings ceilings{.bandwidth = 1e9, .read_bandwidth = 2e9, .cache_bandwidth = 5e10};
  const Timed hot = time_cold(300'000, GraphMode::automatic, false, {}, ceilings);
  ASSERT_EQ(hot.m.status, Status::ok) << hot.m.message;
  EXPECT_TRUE(hot.m.cache_resident);
  EXPECT_EQ(hot.m.point.memory_roof.name, "cache");
  EXPECT_EQ(hot.m.point.memory_roof.bytes_per_s, 5e10);
  EXPECT_EQ(result_of(hot.m).memory_roof.name, "cache");
  const Timed cold = time_cold(300'000, GraphMode::automatic, true, {}, ceilings);
  ASSERT_EQ(cold.m.status, Status::ok) << cold.m.message;
  EXPECT_FALSE(cold.m.cache_resident);
  EXPECT_EQ(cold.m.point.memory_roof.name, "dram copy");
  EXPECT_EQ(cold.m.point.memory_roof.bytes_per_s, 1e9);
}

}  // namespace
}  // namespace roofbench
