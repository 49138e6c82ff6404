#include "kernel_profile.hpp"

#include <algorithm>
#include <cstdlib>

#include "text.hpp"

namespace roofbench {

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
  return profile;
}

KernelProfile profile_kernels(const std::function<void()>& run_and_wait, int runs, const PassAgreement& agree) {
  return profile_of(trace_kernels(run_and_wait, runs, agree));
}

}  // namespace roofbench
