// --profile as an observer of the samples: after the last one, a CUPTI pass (kernel_profile.hpp) over
// launches made through the same timer, so a graph-timed case is profiled inside its graph (back to back,
// as it was timed) rather than as separate launches.
#pragma once

#include "sample_observer.hpp"

namespace roofbench {

class KernelProfileObserver final : public SampleObserver {
 public:
  // `passes`: how many samples' worth of launches the profiled pass observes.
  explicit KernelProfileObserver(int passes) : passes_(passes) {}
  // r.profile per run, and the pass's seconds added to r.phases.profile (--kernel-time's trace, which
  // runs first, adds its own there).
  void end(Measurement& r, Timer& timer) override;

 private:
  int passes_;
};

}  // namespace roofbench
