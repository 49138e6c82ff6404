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

// The pass over `runs` runs, per run.
CounterProfile CounterObserver::count(Timer& timer, int runs) const {
  CounterProfile counted;
  {
    const CountingScope scope;
    counted = collect_counters([&] { timer.run_enqueued(runs); }, device_, replay_, runs, [&] { timer.clean_caches(); });
  }
  scale_per_run(counted, 1.0 / runs);
  return counted;
}

void CounterObserver::end(Measurement& r, Timer& timer) {
  if (ranks_ > 1) {
    r.counters.error = "counters are read on single-GPU cases only (kernel replay would replay one rank's collective alone)";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int runs = counted_runs(r.runs_per_sample);
  timer.clean_caches();  // once before the profiler starts: its buffer allocated, its kernel loaded
  r.counters = count(timer, runs);
  // Runs of many kernels (a GPT step has hundreds) can fill the pass's ranges: then one run is counted.
  if (runs > 1 && r.counters.error.rfind(kTooManyKernelsError, 0) == 0) r.counters = count(timer, 1);
  r.counters.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace roofbench
