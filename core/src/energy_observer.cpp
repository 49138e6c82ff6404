#include "energy_observer.hpp"

#include <algorithm>

namespace roofbench {
namespace {

std::string rank_prefix(std::size_t ranks, std::size_t rank) {
  return ranks > 1 ? "rank " + std::to_string(rank) + ": " : std::string();
}

}  // namespace

EnergyObserver::EnergyObserver(std::vector<Counter> counters, std::chrono::microseconds period)
    : counters_(std::move(counters)), period_(period) {}

void EnergyObserver::begin() {
  for (auto& read : counters_) pollers_.push_back(std::make_unique<EnergyPoller>(std::move(read), period_));
}

void EnergyObserver::sample(const SampleTime& time, int runs) { spans_.push_back({steady_seconds(), time.seconds, runs}); }

// Each rank's energy per run over its own window of the samples, summed (as its power is). A sample whose
// stream hold timed out is not among the spans, but its hold's spin and its runs are in the window.
void EnergyObserver::end(Measurement& r, Timer&) {
  std::vector<std::vector<CounterStep>> steps;
  for (auto& poller : pollers_) steps.push_back(poller->stop());  // all stopped before any is judged
  if (dropped_ > 0) {
    r.energy_note = "a stream hold timed out during the samples: its device time is in the window, not in the runs";
    return;
  }
  double joules = 0, watts = 0, window = 0, busy = 1;
  for (std::size_t rank = 0; rank < steps.size(); ++rank) {
    std::string why;
    const std::optional<EnergyFigure> figure = energy_per_run(steps[rank], spans_, &why);
    if (!figure) {
      r.energy_note = rank_prefix(steps.size(), rank) + why;
      return;
    }
    joules += figure->joules_per_run;
    watts += figure->mean_watts;
    window = std::max(window, figure->window_seconds);
    busy = std::min(busy, figure->busy_fraction);
  }
  r.energy_per_run_j = joules;
  r.mean_power_w = watts;
  r.energy_window_s = window;
  r.energy_busy_fraction = busy;
}

std::unique_ptr<EnergyObserver> make_energy_observer(Measurement& r, const std::vector<Device*>& ranks,
                                                     const MeasureOptions& o) {
  if (o.energy_seconds <= 0) return nullptr;
  if (o.cold) {
    r.energy_note = "not with --cold: each sample's cache flush would be booked to its run";
    return nullptr;
  }
  std::vector<EnergyObserver::Counter> counters;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    std::string why;
    auto read = ranks[rank]->energy_counter(why);
    if (!read) {
      r.energy_note = rank_prefix(ranks.size(), rank) + why;
      return nullptr;
    }
    counters.push_back(std::move(read));
  }
  // Every 0.5 ms: a step's moment is then known to well under 1% of the H200's 100 ms update interval.
  return std::make_unique<EnergyObserver>(std::move(counters), std::chrono::microseconds(500));
}

}  // namespace roofbench
