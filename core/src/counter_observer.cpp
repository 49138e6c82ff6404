#include "counter_observer.hpp"

#include <chrono>

namespace roofbench {

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
    r.counters.error = "counters are read on single-GPU cases only (a pass would replay one rank's collectives alone)";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  timer.clean_caches();  // once before the profiler starts: its buffer allocated, its kernel loaded
  {
    // One run, after a clean (under run replay, once per pass): its first kernel starts from clean caches, as
    // under Nsight Compute's default (--cache-control all); the later ones find what earlier ones left.
    const CountingScope scope;
    r.counters = collect_counters([&] { timer.run_enqueued(1); }, device_, replay_, [&] { timer.clean_caches(); });
  }
  r.counters.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace roofbench
