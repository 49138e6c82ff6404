#include "counter_observer.hpp"

#include <algorithm>
#include <chrono>

namespace roofbench {

int counted_runs(int runs_per_sample) { return std::clamp(runs_per_sample, 1, kMostCountedRuns); }

namespace {
bool counting = false;  // the pass runs on the measuring thread, which runs the case

struct CountingScope {
  CountingScope() { counting = true; }
  ~CountingScope() { counting = false; }
};
}  // namespace

bool counting_kernels() { return counting; }

void CounterObserver::end(Measurement& r, Timer& timer) {
  if (ranks_ > 1) {
    r.counters.error = "counters are read on single-GPU cases only (kernel replay would replay one rank's collective alone)";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int launches = counted_runs(r.runs_per_sample);
  {
    const CountingScope scope;
    r.counters = collect_counters([&] { timer.run_enqueued(launches); }, device_, replay_, launches,
                                  [&] { timer.clean_caches(); });
  }
  scale_per_run(r.counters, 1.0 / launches);
  r.counters.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace roofbench
