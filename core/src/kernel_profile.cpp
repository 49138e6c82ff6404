#include "kernel_profile.hpp"

#include <algorithm>
#include <cstdlib>

#include "text.hpp"

namespace roofbench {
namespace {

struct SpanAndIdle {
  double span_ns = 0, idle_ns = 0;
};

// Summed over the passes: each pass's span, and the gaps in it that no record covers.
SpanAndIdle span_and_idle(const KernelTrace& trace) {
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> by_pass(trace.passes);
  for (const KernelRecord& k : trace.records)
    if (k.pass >= 0 && k.pass < trace.passes && k.end > k.start) by_pass[k.pass].emplace_back(k.start, k.end);
  SpanAndIdle total;
  for (auto& intervals : by_pass) {
    if (intervals.empty()) continue;
    std::sort(intervals.begin(), intervals.end());
    std::uint64_t covered_to = intervals.front().first;
    for (const auto& [start, end] : intervals) {
      if (start > covered_to) total.idle_ns += static_cast<double>(start - covered_to);
      covered_to = std::max(covered_to, end);
    }
    total.span_ns += static_cast<double>(covered_to - intervals.front().first);
  }
  return total;
}

}  // namespace

KernelProfile profile_of(const KernelTrace& trace) {
  KernelProfile profile;
  profile.error = trace.error;
  if (!trace.error.empty() || trace.passes < 1) return profile;
  std::vector<std::pair<double, long>> by_name(trace.names.size());  // (ns, launches)
  for (const KernelRecord& k : trace.records) {
    if (!k.kernel) continue;
    by_name[k.name].first += static_cast<double>(k.end - k.start);
    by_name[k.name].second += 1;
  }
  for (std::size_t i = 0; i < by_name.size(); ++i) {
    const auto [ns, launches] = by_name[i];
    if (launches == 0) continue;
    profile.kernels.push_back({demangled(trace.names[i].c_str()), ns * 1e-9 / trace.passes, static_cast<double>(launches) / trace.passes});
    profile.kernel_seconds_per_run += ns * 1e-9 / trace.passes;
  }
  std::sort(profile.kernels.begin(), profile.kernels.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.seconds_per_run > b.seconds_per_run; });
  const SpanAndIdle span = span_and_idle(trace);
  profile.span_seconds_per_run = span.span_ns * 1e-9 / trace.passes;
  profile.idle_seconds_per_run = span.idle_ns * 1e-9 / trace.passes;
  return profile;
}

KernelProfile profile_kernels(const std::function<void()>& run_and_wait, int runs, const PassAgreement& agree) {
  return profile_of(trace_kernels(run_and_wait, runs, agree));
}

}  // namespace roofbench
