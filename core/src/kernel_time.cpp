#include "kernel_time.hpp"

#include <algorithm>

#include "statistics.hpp"

namespace roofbench {

std::uint64_t covered_nanoseconds(std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::uint64_t covered = 0, reached = 0;  // `reached`: the latest end so far
  for (const auto& [start, end] : intervals) {
    if (end <= start) continue;
    const std::uint64_t from = std::max(start, reached);
    if (end > from) covered += end - from;
    reached = std::max(reached, end);
  }
  return covered;
}

KernelTimeFigures kernel_time_of(const KernelTrace& trace, int runs) {
  KernelTimeFigures k;
  if (!trace.error.empty()) {
    k.error = trace.error;
    return k;
  }
  if (trace.records.empty() || trace.passes < 1 || runs < 1) {
    k.error = "CUPTI recorded no kernel in the traced samples";
    return k;
  }
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> by_pass(trace.passes);
  for (const KernelRecord& r : trace.records)
    if (r.pass >= 0 && r.pass < trace.passes) by_pass[r.pass].emplace_back(r.start, r.end);
  std::vector<double> per_run;
  for (auto& intervals : by_pass) per_run.push_back(1e-9 * static_cast<double>(covered_nanoseconds(std::move(intervals))) / runs);
  k.seconds = quantile(per_run, 0.5);
  k.samples = trace.passes;
  return k;
}

double event_minus_kernel(double event_seconds, const KernelTimeFigures& k) { return event_seconds - k.seconds; }

double event_minus_kernel_fraction(double event_seconds, const KernelTimeFigures& k) {
  return k.seconds > 0 ? (event_seconds - k.seconds) / k.seconds : std::numeric_limits<double>::quiet_NaN();
}

bool launch_cost_noted(double event_seconds, const KernelTimeFigures& k) {
  if (k.measured()) return event_minus_kernel_fraction(event_seconds, k) > kLaunchCostNoteFraction;
  return event_seconds < kLaunchCostNoteSeconds;
}

bool tracing_cost_noted(double event_seconds, const KernelTimeFigures& k) {
  return k.measured() && event_minus_kernel_fraction(event_seconds, k) < -kLaunchCostNoteFraction;
}

}  // namespace roofbench
