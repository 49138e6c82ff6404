// --kernel-time as an observer of the samples: after the last one, a CUPTI trace (kernel_time.hpp) of
// samples made through the same timer, so a graph-timed case is traced inside its graph.
#pragma once

#include "sample_observer.hpp"

namespace roofbench {

class KernelTimeObserver final : public SampleObserver {
 public:
  // `samples`: how many samples of the timed samples' runs the trace holds; `kind`: the case's device;
  // `together`: the ranks in other processes that run the traced samples too (sample_loop.hpp), or none.
  KernelTimeObserver(int samples, DeviceKind kind, const RankWorld* together = nullptr)
      : samples_(samples), kind_(kind), together_(together) {}
  // r.kernel_time (or why there is none), and the trace's seconds added to r.phases.profile.
  void end(Measurement& r, Timer& timer) override;

 private:
  int samples_;
  DeviceKind kind_;
  const RankWorld* together_;
};

}  // namespace roofbench
