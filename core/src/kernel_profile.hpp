// A profiled pass: where one run of a case spends its GPU time, kernel by kernel (CUPTI's activity
// records). It runs after the case's timing and is torn down completely (flush, disable, finalize)
// before the next case is timed, because CUPTI's instrumentation otherwise keeps taxing every launch.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace roofbench {

struct KernelTime {
  std::string name;
  double seconds_per_run = 0;  // summed over its launches in one run
  double launches_per_run = 0;
};

struct KernelProfile {
  std::vector<KernelTime> kernels;  // most time first
  double kernel_seconds_per_run = 0;
  std::string error;  // why there is no profile (no CUPTI, not a GPU case, ...)
};

// Runs `run_and_wait` (which must synchronise) `runs` times under CUPTI and returns the breakdown.
KernelProfile profile_kernels(const std::function<void()>& run_and_wait, int runs);

// Multiplies every per-run figure by `factor` (when one call of run_and_wait held several runs).
inline void scale_per_run(KernelProfile& profile, double factor) {
  for (auto& k : profile.kernels) k.seconds_per_run *= factor, k.launches_per_run *= factor;
  profile.kernel_seconds_per_run *= factor;
}

}  // namespace roofbench
