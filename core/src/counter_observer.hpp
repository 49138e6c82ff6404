// --counters as an observer of the samples: after the last one (and after --profile's pass), the hardware
// counters of one run from clean caches, made through the same timer as the samples (kernel_counters.hpp).
#pragma once

#include "sample_observer.hpp"

namespace roofbench {

// Whether a counters pass is running (Context::counting_kernels): its runs are enqueued, never a graph, and
// each pass starts from clean caches (Timer::run_enqueued, Timer::clean_caches).
bool counting_kernels();

class CounterObserver final : public SampleObserver {
 public:
  // `ranks`: the case's devices; a case on several is not counted (a pass would replay one rank's
  // collectives alone, and they would wait for the others forever).
  // `device`: the GPU a single-GPU case runs on (cuda:N), whose context the profiler is enabled on.
  // `replay`: how the pass reads every counter (kernel_counters.hpp).
  CounterObserver(std::size_t ranks, int device, CounterReplay replay) : ranks_(ranks), device_(device), replay_(replay) {}
  // r.counters of one run, counted from clean caches, with the pass's seconds.
  void end(Measurement& r, Timer& timer) override;

 private:
  std::size_t ranks_;
  int device_;
  CounterReplay replay_;
};

}  // namespace roofbench
