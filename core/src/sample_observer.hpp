// What watches the samples of a benchmark without deciding them: energy, the clock, throttling, the kernel
// profile. The sample loop (sample_loop.hpp) calls each observer before the warm-up, after every timed
// sample and once after the last; a new figure beside the times is one more observer in its own file.
#pragma once

#include "device.hpp"
#include "measure.hpp"

namespace roofbench {

class SampleObserver {
 public:
  virtual ~SampleObserver() = default;
  // Before the warm-up: what must already run while the device warms (an energy counter's poller).
  virtual void begin() {}
  // A kept sample of `runs` runs.
  virtual void sample(const SampleTime& /*time*/, int /*runs*/) {}
  // A sample dropped because its stream hold timed out (its launches were not all queued in time).
  virtual void dropped(const SampleTime& /*time*/) {}
  // After the last sample, in the order the observers were given: r.samples holds every kept sample's time
  // per run and r.runs_per_sample the final count. `timer` launches the runs as the samples did.
  virtual void end(Measurement& /*r*/, Timer& /*timer*/) {}
};

}  // namespace roofbench
