#include "energy.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace roofbench {

std::optional<EnergyFigure> energy_per_run(const std::vector<CounterStep>& steps,
                                           const std::vector<SampleSpan>& samples, std::string* why) {
  auto refuse = [why](const std::string& reason) -> std::optional<EnergyFigure> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (samples.empty()) return refuse("no samples");
  const double began = samples.front().end - samples.front().seconds, ended = samples.back().end;
  // The first step: the counter's update interval into the samples. The last: the last one before they ended.
  const auto first = std::find_if(steps.begin(), steps.end(),
                                  [&](const CounterStep& s) { return s.t >= began + kEnergyCounterLagSeconds; });
  const auto last = std::find_if(steps.rbegin(), steps.rend(), [&](const CounterStep& s) { return s.t <= ended; });
  std::ostringstream out;
  if (first == steps.end() || last == steps.rend() || last->t <= first->t) {
    out << "the energy counter stepped " << steps.size() << " times in " << ended - began
        << " s of samples: too few for a window";
    return refuse(out.str());
  }
  const double t0 = first->t, t1 = last->t, window = t1 - t0;
  if (window < kEnergyMinWindowSeconds) {
    out << "the energy window (" << window << " s) is shorter than " << kEnergyMinWindowSeconds << " s";
    return refuse(out.str());
  }
  double runs = 0, busy = 0;
  for (const SampleSpan& s : samples) {
    if (s.seconds <= 0 || s.runs <= 0) continue;
    const double inside = std::max(0.0, std::min(s.end, t1) - std::max(s.end - s.seconds, t0));
    busy += inside;
    runs += s.runs * inside / s.seconds;
  }
  const double joules = last->joules - first->joules;
  if (busy / window < kEnergyMinBusyFraction || runs <= 0) {
    out << "the samples kept the device busy for " << 100 * busy / window << "% of the energy window (under "
        << 100 * kEnergyMinBusyFraction << "%)";
    return refuse(out.str());
  }
  if (!(joules > 0)) return refuse("the energy counter did not advance over the window");
  return EnergyFigure{joules / runs, joules / window, window, busy / window};
}

EnergyPoller::EnergyPoller(std::function<std::optional<double>()> read, std::chrono::microseconds period)
    : read_(std::move(read)), period_(period), thread_([this] { poll(); }) {}

EnergyPoller::~EnergyPoller() { stop(); }

std::vector<CounterStep> EnergyPoller::stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  return steps_;
}

void EnergyPoller::poll() {
  std::optional<double> previous;
  while (running_) {
    const double before = steady_seconds();
    const std::optional<double> now = read_();
    if (now && previous && *now != *previous) {
      // The middle of the read: the call itself takes tens of microseconds.
      std::lock_guard lock(mutex_);
      steps_.push_back({0.5 * (before + steady_seconds()), *now});
    }
    if (now) previous = now;
    std::this_thread::sleep_for(period_);
  }
}

}  // namespace roofbench
