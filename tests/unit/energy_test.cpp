// energy.hpp: the window over an energy counter that steps every 100 ms (the H200's NVML counter), and the
// poller that finds its steps, on made-up counters.
#include "energy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <vector>

#include "cpu_backed_device.hpp"
#include "device.hpp"
#include "measure.hpp"
#include "nvml_energy.hpp"

namespace roofbench {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A counter booking `watts` while `busy(t)`, `idle_watts` otherwise, read at its steps every `interval`
// from `from` to `to` (the value at a step: the energy up to it).
std::vector<CounterStep> counter_steps(double from, double to, double interval, double watts, double idle_watts,
                                       const std::function<bool(double)>& busy) {
  std::vector<CounterStep> steps;
  double joules = 1000, t = from;
  const double dt = 1e-4;
  double next = from + interval;
  while (t < to) {
    joules += (busy(t) ? watts : idle_watts) * dt;
    t += dt;
    if (t >= next) {
      steps.push_back({t, joules});
      next += interval;
    }
  }
  return steps;
}

// Samples of `seconds` (device time) and `runs`, from `from` on, `gap` apart.
std::vector<SampleSpan> back_to_back(double from, int count, double seconds, int runs, double gap) {
  std::vector<SampleSpan> spans;
  double t = from;
  for (int i = 0; i < count; ++i) {
    t += seconds;
    spans.push_back({t, seconds, runs});
    t += gap;
  }
  return spans;
}

TEST(EnergyPerRun, SteadySamplesGiveTheirPowerTimesTheTimeOfARun) {
  // 20 samples of 50 ms, 10 runs each (5 ms a run) at 700 W: 3.5 J a run.
  const auto spans = back_to_back(10.0, 20, 0.05, 10, 0.0);
  const auto steps = counter_steps(9.0, 12.0, 0.1, 700, 80, [](double t) { return t >= 10.0 && t < 11.0; });
  std::string why;
  const auto figure = energy_per_run(steps, spans, &why);
  ASSERT_TRUE(figure) << why;
  EXPECT_NEAR(figure->joules_per_run, 3.5, 0.01);
  EXPECT_NEAR(figure->mean_watts, 700, 1);
  EXPECT_NEAR(figure->busy_fraction, 1.0, 1e-6);
  // From the first step a lag's worth in (10.1 or just after) to the last before the end (11.0 or just before).
  EXPECT_GT(figure->window_seconds, 0.75);
  EXPECT_LT(figure->window_seconds, 0.91);
}

TEST(EnergyPerRun, ShortGapsBetweenSamplesAreBookedToTheRuns) {
  // 45 ms of runs then 5 ms idle at 100 W: each run carries its share of the gaps, as the device drew it.
  const auto spans = back_to_back(10.0, 20, 0.045, 9, 0.005);
  const auto steps = counter_steps(9.0, 12.0, 0.1, 700, 100, [&](double t) {
    for (const SampleSpan& s : spans)
      if (t >= s.end - s.seconds && t < s.end) return true;
    return false;
  });
  std::string why;
  const auto figure = energy_per_run(steps, spans, &why);
  ASSERT_TRUE(figure) << why;
  EXPECT_NEAR(figure->busy_fraction, 0.9, 0.02);
  // Per 50 ms: 0.045 * 700 + 0.005 * 100 = 32 J over 9 runs.
  EXPECT_NEAR(figure->joules_per_run, 32.0 / 9, 0.02 * 32.0 / 9);
}

TEST(EnergyPerRun, MostlyIdleWindowsGiveNoFigure) {
  const auto spans = back_to_back(10.0, 10, 0.05, 10, 0.05);  // busy half the time
  const auto steps = counter_steps(9.0, 12.0, 0.1, 700, 80, [](double) { return true; });
  std::string why;
  EXPECT_FALSE(energy_per_run(steps, spans, &why));
  EXPECT_THAT(why, HasSubstr("busy"));
}

TEST(EnergyPerRun, SamplesTooShortForTheCounterGiveNoFigure) {
  const auto spans = back_to_back(10.0, 5, 0.05, 10, 0.0);  // 250 ms: one or two steps inside
  const auto steps = counter_steps(9.0, 12.0, 0.1, 700, 80, [](double) { return true; });
  std::string why;
  EXPECT_FALSE(energy_per_run(steps, spans, &why));
  EXPECT_FALSE(why.empty());
}

TEST(EnergyPerRun, ACounterThatNeverStepsGivesNoFigure) {
  std::string why;
  EXPECT_FALSE(energy_per_run({}, back_to_back(10.0, 20, 0.05, 10, 0.0), &why));
  EXPECT_THAT(why, HasSubstr("stepped 0 times"));
  EXPECT_FALSE(energy_per_run({}, {}, &why));
  EXPECT_EQ(why, "no samples");
}

TEST(EnergyPerRun, StepsBeforeTheSamplesAreNotUsed) {
  // Idle at 80 W until 10.0, then 700 W: a window that began before the samples would dilute the power.
  const auto spans = back_to_back(10.0, 20, 0.05, 10, 0.0);
  const auto steps = counter_steps(9.0, 11.0, 0.1, 700, 80, [](double t) { return t >= 10.0; });
  std::string why;
  const auto figure = energy_per_run(steps, spans, &why);
  ASSERT_TRUE(figure) << why;
  EXPECT_NEAR(figure->mean_watts, 700, 1);
}

TEST(EnergyPerRun, TheWindowStartsALagsWorthIntoTheSamples) {
  // A counter that books energy 50 ms late, stepping at 10.02, 10.12, ...: a window from the first step after
  // the samples began (10.02) would reach back into the idle time before them; the lag's worth does not.
  const auto spans = back_to_back(10.0, 20, 0.05, 10, 0.0);
  const double lag = 0.05;
  auto booked = counter_steps(9.02 - lag, 12.0 - lag, 0.1, 700, 80, [](double t) { return t >= 10.0 && t < 11.0; });
  for (CounterStep& step : booked) step.t += lag;  // seen `lag` after the moment it books up to
  std::string why;
  const auto figure = energy_per_run(booked, spans, &why);
  ASSERT_TRUE(figure) << why;
  EXPECT_NEAR(figure->mean_watts, 700, 2);
}

// A CPU device with a made-up energy counter: `watts` all the time, stepping every `interval`.
class MeteredCpu : public CpuBackedDevice {
 public:
  MeteredCpu(double watts, double interval) : CpuBackedDevice("metered-cpu"), watts_(watts), interval_(interval) {}
  std::function<std::optional<double>()> energy_counter(std::string&) override {
    return [this]() -> std::optional<double> {
      return watts_ * interval_ * std::floor(steady_seconds() / interval_);
    };
  }

 private:
  double watts_, interval_;
};

// The CPU's timer, but the first sample to end after `at` (steady seconds) says its stream hold timed out
// (what a GPU's does when the launch queue fills behind the hold); `fired` is shared by the timers that
// replace one another (a timeout with one run a sample makes the host build a timer without the hold).
class OneHoldTimeoutTimer final : public Timer {
 public:
  OneHoldTimeoutTimer(std::unique_ptr<Timer> cpu, double at, bool& fired) : cpu_(std::move(cpu)), at_(at), fired_(fired) {}
  SampleTime time(int runs) override {
    SampleTime s = cpu_->time(runs);
    if (!fired_ && steady_seconds() >= at_) fired_ = s.hold_timed_out = true;
    return s;
  }
  void run_untimed(int runs) override { cpu_->run_untimed(runs); }

 private:
  std::unique_ptr<Timer> cpu_;
  double at_;
  bool& fired_;
};

// A metered CPU whose samples see one stream-hold timeout half a second after its first timer: past the
// warm-up (at most 0.1 s in measure_spin), inside the second of samples that --energy=1 asks for.
class MeteredCpuWithAHoldTimeout final : public MeteredCpu {
 public:
  MeteredCpuWithAHoldTimeout() : MeteredCpu(250, 0.02) {}
  std::unique_ptr<Timer> make_timer(const std::vector<Device*>&, std::function<void()> run_once,
                                    const TimingOptions& options) override {
    if (at_ == 0) at_ = steady_seconds() + 0.5;
    return std::make_unique<OneHoldTimeoutTimer>(make_cpu_timer(std::move(run_once), options), at_, fired_);
  }

 private:
  double at_ = 0;
  bool fired_ = false;
};

// A run that keeps the CPU busy for about a millisecond.
class SpinCase final : public Case {
 public:
  void setup(Context&) override {}
  void run(Context&) override {
    const double until = steady_seconds() + 1e-3;
    while (steady_seconds() < until) {
    }
  }
  Work work() const override { return {.flops = 1}; }
  Check check(Context&) override { return {.rel_l2_error = 0}; }
};

// The spin case's short timing, gated or not, with energy over `energy_seconds`.
MeasureOptions spin_options(double energy_seconds, bool gate) {
  MeasureOptions o;
  o.gate = gate;
  o.max_time = 0.1;
  o.warmup_max = 0.1;
  o.energy_seconds = energy_seconds;
  return o;
}

Measurement measure_spin(const std::vector<Device*>& ranks, double energy_seconds, bool cold = false) {
  static CaseSpec spec{.name = "spin", .make = [](const Params&) { return std::make_unique<SpinCase>(); }};
  BenchmarkSpec b{"test/spin", "test", &spec, Params{}};
  MeasureOptions o = spin_options(energy_seconds, false);
  o.cold = cold;
  return take_measurement(b, ranks, Ceilings{}, o);
}
Measurement measure_spin(Device& device, double energy_seconds, bool cold = false) {
  return measure_spin(std::vector<Device*>{&device}, energy_seconds, cold);
}

TEST(EnergyInMeasure, SamplesLastTheEnergySecondsAndGiveTheCountersPower) {
  MeteredCpu device(250, 0.02);
  const Measurement r = measure_spin(device, 1.0);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  ASSERT_TRUE(std::isfinite(r.energy_per_run_j)) << r.energy_note;
  EXPECT_GE(r.phases.sampling, 1.0);
  EXPECT_NEAR(r.mean_power_w, 250, 15);
  EXPECT_GT(r.energy_busy_fraction, 0.8);
  // The window's runs take the samples' mean time (a loaded CI machine stretches some runs well past the median).
  EXPECT_NEAR(r.energy_per_run_j, 250 * r.stats.mean / r.energy_busy_fraction, 0.1 * 250 * r.stats.mean);
  EXPECT_GT(r.energy_window_s, 0.7);
}

TEST(EnergyInMeasure, WithoutACounterOrWithColdItSaysWhyAndSamplesAsUsual) {
  std::unique_ptr<Device> cpu = make_cpu_device();
  Measurement r = measure_spin(*cpu, 1.0);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_FALSE(std::isfinite(r.energy_per_run_j));
  EXPECT_THAT(r.energy_note, HasSubstr("no energy counter"));
  EXPECT_LT(r.phases.sampling, 0.9);  // --max-time 0.1 holds: nothing to lengthen the samples for
  MeteredCpu metered(250, 0.02);
  r = measure_spin(metered, 1.0, true);
  EXPECT_FALSE(std::isfinite(r.energy_per_run_j));
  EXPECT_THAT(r.energy_note, HasSubstr("--cold"));
}

// A sample whose hold timed out is not among the samples, but its runs and the hold's spin are in the
// window: no figure, and the note says why.
TEST(EnergyInMeasure, AHoldTimeoutDuringTheSamplesGivesNoFigureAndSaysWhy) {
  MeteredCpuWithAHoldTimeout device;
  const Measurement r = measure_spin(device, 1.0);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_EQ(r.hold_timeouts, 1);
  EXPECT_FALSE(std::isfinite(r.energy_per_run_j));
  EXPECT_THAT(r.energy_note, HasSubstr("a stream hold timed out during the samples"));
}

// A case on several devices (R5's data parallel): the power of every rank, over its own window, summed. The
// counters step on different grids (20 and 50 ms), so the windows differ; constant powers keep the sum
// exact however a loaded machine stretches the runs.
TEST(EnergyInMeasure, TheRanksPowersAreSummed) {
  MeteredCpu first(250, 0.02), second(100, 0.05);
  const Measurement r = measure_spin({&first, &second}, 1.0);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  ASSERT_TRUE(std::isfinite(r.energy_per_run_j)) << r.energy_note;
  EXPECT_NEAR(r.mean_power_w, 350, 20);
  EXPECT_GT(r.energy_per_run_j, 0);
  EXPECT_GT(r.energy_window_s, 0.7);
}

// One rank without a counter leaves the whole case without a figure, and the note names that rank.
TEST(EnergyInMeasure, ARankWithoutACounterIsNamed) {
  MeteredCpu metered(250, 0.02);
  std::unique_ptr<Device> plain = make_cpu_device();
  const Measurement r = measure_spin({&metered, plain.get()}, 1.0);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_FALSE(std::isfinite(r.energy_per_run_j));
  EXPECT_THAT(r.energy_note, StartsWith("rank 1: "));
  EXPECT_THAT(r.energy_note, HasSubstr("no energy counter"));
}

// A case whose ranks work together with another process's (DeviceNeed::cpu_ranks, one rank in each of two
// processes), this process being rank 1: `rank0` gives what rank 0 sends in each exchange, from this rank's blob.
Measurement measure_spin_beside_rank_0(Device& device, double energy_seconds, bool gate,
                                       std::function<std::string(const std::string&)> rank0) {
  static CaseSpec spec = [] {
    CaseSpec s{.name = "spin", .make = [](const Params&) { return std::make_unique<SpinCase>(); }};
    s.device = DeviceNeed::cpu_ranks(2);
    return s;
  }();
  BenchmarkSpec b{"test/spin", "test", &spec, Params{}};
  const MeasureOptions o = spin_options(energy_seconds, gate);
  const RankWorld world{2, 1, [rank0](const std::string& mine) { return std::vector<std::string>{rank0(mine), mine}; }};
  return take_measurement(b, {&device}, Ceilings{}, o, world);
}

// --energy samples longer; where rank 0 has no counter, this rank measures no energy either, so that both
// stop alike and run a collective equally often.
TEST(EnergyInMeasure, RanksThatWorkTogetherMeasureItOnlyWhereEveryOneCan) {
  MeteredCpu metered(250, 0.02);
  const Measurement r = measure_spin_beside_rank_0(metered, 1.0, false, [](const std::string& mine) {
    return mine == "energy" ? std::string("none") : mine;
  });
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_FALSE(std::isfinite(r.energy_per_run_j));
  EXPECT_THAT(r.energy_note, StartsWith("rank 0: no energy counter"));
  EXPECT_LT(r.phases.sampling, 0.9);  // --max-time 0.1 holds, as on rank 0
}

// Rank 0's gate failed: this rank, whose gate passed, is not timed either (rank 0 would not run the
// collective with it) and names rank 0, whose failure the combined result then shows.
TEST(GateAcrossProcesses, ARankWhoseGatePassedIsNotTimedWhenAnotherFailed) {
  std::unique_ptr<Device> cpu = make_cpu_device();
  const Measurement r = measure_spin_beside_rank_0(*cpu, 0, true, [](const std::string& mine) {
    return mine == "pass" ? std::string("fail") : mine;
  });
  EXPECT_EQ(r.status, Status::error);
  EXPECT_THAT(r.message, StartsWith(std::string(kEndedByRank) + "0 (its gate failed"));
  EXPECT_TRUE(r.samples.empty());
  EXPECT_EQ(r.warmup_iterations, 0);
}

// Rank 0's setup failed after the communicators were made: this rank learns it before its gate's collective,
// which rank 0 would never join, and names rank 0.
TEST(GateAcrossProcesses, ARankLearnsBeforeItsGateThatAnotherFailedItsSetup) {
  std::unique_ptr<Device> cpu = make_cpu_device();
  const Measurement r = measure_spin_beside_rank_0(*cpu, 0, true, [](const std::string& mine) -> std::string {
    if (mine == "set up") throw Error(std::string(kEndedByRank) + "0 (error: its setup failed)");
    return mine;
  });
  EXPECT_EQ(r.status, Status::error);
  EXPECT_THAT(r.message, StartsWith(std::string(kEndedByRank) + "0 (error: its setup failed)"));
  EXPECT_FALSE(r.gate_checked);
}

// Without the driver's library (CI) the load fails; with it (a GPU machine), there is no GPU at that address.
TEST(NvmlEnergyCounter, NoLibraryOrNoSuchGpuGivesNoCounterAndSaysWhy) {
  std::string why;
  EXPECT_FALSE(nvml_energy_counter("0000:FF:1F.7", why));
  EXPECT_THAT(why, AnyOf(HasSubstr("cannot load libnvidia-ml.so.1"), HasSubstr("NVML has no device at PCI 0000:FF:1F.7"),
                         HasSubstr("nvmlInit")));
}

TEST(EnergyPoller, KeepsTheFirstReadOfEachNewValueInOrder) {
  std::atomic<int> reads{0};
  // Steps every 5 reads; a failed read now and then is skipped.
  EnergyPoller poller(
      [&]() -> std::optional<double> {
        const int n = reads++;
        if (n % 7 == 3) return std::nullopt;
        return static_cast<double>(n / 5);
      },
      std::chrono::microseconds(50));
  while (reads < 60) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::vector<CounterStep> steps = poller.stop();
  const int after = reads;
  ASSERT_GE(steps.size(), 8u);
  for (std::size_t i = 1; i < steps.size(); ++i) {
    EXPECT_GT(steps[i].joules, steps[i - 1].joules);
    EXPECT_GE(steps[i].t, steps[i - 1].t);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(reads, after) << "stop() ends the polling";
}

}  // namespace
}  // namespace roofbench
