// Energy per run, from a device's energy counter (NVML's total energy consumption on a GPU).
//
// At the power limit a GPU's clock is whatever keeps it under the limit, so a run's time follows its energy:
// two implementations compare by joules per run as much as by seconds. The counter cannot be read like an
// event: the H200's steps only about every 100 ms (a probe's median: 100.2 ms between steps over
// 0.5 s at idle), so a read is as old as the last step. The host therefore polls the counter on a thread
// beside the samples and keeps the moments it stepped (EnergyPoller). The window runs from a step well after
// the samples began to the last step before they ended, and its energy is shared among the runs whose device
// time falls inside it, each sample's runs spread evenly over its time (energy_per_run).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace roofbench {

// A poll that first saw the counter's new value: host time (seconds, steady clock) and joules.
struct CounterStep {
  double t = 0;
  double joules = 0;
};

// One timed sample: the host time its wait returned, its device time and its runs.
struct SampleSpan {
  double end = 0;
  double seconds = 0;
  int runs = 0;
};

struct EnergyFigure {
  double joules_per_run = 0;
  double mean_watts = 0;      // the window's energy over its length
  double window_seconds = 0;  // from the first to the last step used
  double busy_fraction = 0;   // the samples' device time inside the window over its length
};

// The counter's update interval is about this long on the H200; the first step used is at least this far
// into the samples, so that the energy it books comes from them and not from before.
inline constexpr double kEnergyCounterLagSeconds = 0.1;
// A window shorter than this, or one the samples kept busy for less than this fraction of it, gives no figure.
inline constexpr double kEnergyMinWindowSeconds = 0.2;
inline constexpr double kEnergyMinBusyFraction = 0.8;
// The least --energy (or a suite's energy) asks for: the window starts a lag's worth into the samples and
// needs a few steps of a counter that steps every 100 ms; under a second it came and went with their jitter.
inline constexpr double kEnergyLeastSeconds = 1.0;

// The energy of the window over the runs inside it; nullopt, with the reason in *why, where the samples
// do not cover a window long and busy enough.
std::optional<EnergyFigure> energy_per_run(const std::vector<CounterStep>& steps,
                                           const std::vector<SampleSpan>& samples, std::string* why);

// Seconds on the steady clock, the time base of CounterStep and SampleSpan.
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Polls `read` (joules, or nullopt on a failed read) every `period` on its own thread from construction to
// stop(), keeping the first poll of each new value.
class EnergyPoller {
 public:
  EnergyPoller(std::function<std::optional<double>()> read, std::chrono::microseconds period);
  ~EnergyPoller();
  EnergyPoller(const EnergyPoller&) = delete;
  EnergyPoller& operator=(const EnergyPoller&) = delete;
  // Ends the polling; the steps seen, in order.
  std::vector<CounterStep> stop();

 private:
  void poll();

  std::function<std::optional<double>()> read_;
  std::chrono::microseconds period_;
  std::atomic<bool> running_{true};
  std::mutex mutex_;
  std::vector<CounterStep> steps_;
  std::thread thread_;
};

}  // namespace roofbench
