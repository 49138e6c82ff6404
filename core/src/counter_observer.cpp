#include "counter_observer.hpp"

#include <algorithm>
#include <chrono>

namespace roofbench {

int counted_runs(int runs_per_sample) { return std::clamp(runs_per_sample, 1, kMostCountedRuns); }

void CounterObserver::end(Measurement& r, Timer& timer) {
  if (ranks_ > 1) {
    r.counters.error = "counters are read on single-GPU cases only (kernel replay would replay one rank's collective alone)";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int launches = counted_runs(r.runs_per_sample);
  r.counters = collect_counters([&] { timer.run_untimed(launches); }, device_, replay_, launches);
  scale_per_run(r.counters, 1.0 / launches);
  r.counters.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace roofbench
