// --profile as an observer of the samples: after the last one, a CUPTI pass (kernel_profile.hpp) over
// launches made through the same timer, so a graph-timed case is profiled inside its graph (back to back,
// as it was timed) rather than as separate launches.
#pragma once

#include "kernel_profile.hpp"
#include "sample_observer.hpp"

namespace roofbench {

// The agreement on traced passes (PassAgreement) of ranks that work together across processes: every rank's
// trouble exchanged, and the first that has one ends the passes on all, as "rank N: <its trouble>" on the
// others. None without them (`together` null).
PassAgreement agree_across(const RankWorld* together);

class KernelProfileObserver final : public SampleObserver {
 public:
  // `passes`: how many samples' worth of launches the profiled pass observes; `together`: the ranks in other
  // processes that run the pass too (sample_loop.hpp's Launcher), or none.
  explicit KernelProfileObserver(int passes, const RankWorld* together = nullptr) : passes_(passes), together_(together) {}
  // r.profile per run, and the pass's seconds added to r.phases.profile (--kernel-time's trace, which
  // runs first, adds its own there).
  void end(Measurement& r, Timer& timer) override;

 private:
  int passes_;
  const RankWorld* together_;
};

}  // namespace roofbench
