#include "sampling.hpp"

#include <algorithm>
#include <cmath>

#include "statistics.hpp"

namespace roofbench {

double target_sample_seconds(DeviceKind kind, bool graph) {
  if (kind == DeviceKind::cpu) return 1e-3;
  return graph ? 1e-3 : 2e-3;
}

double min_warmup_seconds(DeviceKind kind) { return kind == DeviceKind::cpu ? 0.05 : 0.25; }

int launch_queue_cap(DeviceKind kind) { return kind == DeviceKind::cuda ? 64 : 100000; }

bool WarmupBatching::grow_after(double seconds) {
  if (!grow_ || seconds >= target_ || batch_ >= cap_) return false;
  batch_ = std::min(batch_ * 2, cap_);
  return true;
}

void WarmupBatching::halve() {
  cap_ = std::max(1, batch_ / 2);
  batch_ = cap_;
}

double settled_time_per_run(const std::vector<double>& warm) {
  return quantile(std::vector<double>(warm.end() - std::min<std::size_t>(warm.size(), 5), warm.end()), 0.5);
}

bool use_graph_timing(GraphMode mode, bool allowed, double per_run) {
  return allowed && (mode == GraphMode::on || (mode == GraphMode::automatic && per_run < 20e-6));
}

int runs_per_sample(int asked, bool cold, double target_seconds, double per_run, int cap) {
  if (asked > 0) return asked;
  if (cold) return 1;
  return std::clamp(static_cast<int>(std::ceil(target_seconds / std::max(per_run, 1e-9))), 1, cap);
}

HoldTimeoutAnswer answer_hold_timeout(bool graph, int runs, bool runs_given) {
  return graph || runs == 1 || runs_given ? HoldTimeoutAnswer::abandon_hold : HoldTimeoutAnswer::halve_runs;
}

StoppingSettings stopping_settings(const MeasureOptions& o, double case_min_samples, bool energy) {
  return {.min_samples = std::max<std::size_t>(static_cast<std::size_t>(case_min_samples), 2),
          .min_time = energy ? std::max(o.min_time, o.energy_seconds) : o.min_time,
          .max_time = energy ? longest_sampling_seconds(o) : o.max_time,
          .noise_bound = o.noise_bound};
}

void StoppingRule::add(double t) {
  ++count_;
  sum_ += t;
  sum_squares_ += t * t;
}

bool StoppingRule::done(double elapsed) const {
  const bool enough_samples = count_ >= s_.min_samples;
  if (elapsed >= s_.max_time && (enough_samples || (elapsed >= 4 * s_.max_time && count_ >= 3))) return true;
  if (!enough_samples || elapsed < s_.min_time) return false;
  const double n = static_cast<double>(count_);
  const double mean = sum_ / n;
  const double variance = std::max(0.0, (sum_squares_ - n * mean * mean) / (n - 1));
  return std::sqrt(variance) / mean <= s_.noise_bound;
}

bool StoppingRule::done_after_dropped(double elapsed) const { return elapsed >= s_.max_time && count_ >= 3; }

bool StoppingRule::hopeless(double elapsed) const { return elapsed >= 4 * s_.max_time && count_ == 0; }

}  // namespace roofbench
