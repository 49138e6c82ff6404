// The SM clock each sample reports (SampleTime::clock_mhz, from the CUDA timer's clock probe), watched two
// ways: its mean over the samples, and the clock floor that drops the samples taken while the GPU throttled.
// A device that reports no clock (the CPU: 0) leaves both with nothing to do.
#pragma once

#include <vector>

#include "sample_observer.hpp"

namespace roofbench {

// r.mean_clock_mhz over every kept sample with a clock (throttled ones too), and
// r.samples_with_mean_clock: how many samples' clocks are means over the whole sample.
class ClockProbeObserver final : public SampleObserver {
 public:
  void sample(const SampleTime& time, int runs) override;
  void end(Measurement& r, Timer&) override;

 private:
  double sum_mhz_ = 0;
  int clocked_ = 0;
  int spanning_ = 0;
};

// Drops from r.samples those whose clock is under `floor_fraction` of the highest any sample reached
// (drop_throttled, statistics.hpp): r.throttled_samples says how many, r.sample_clocks_mhz the kept clocks.
class ClockFloorObserver final : public SampleObserver {
 public:
  explicit ClockFloorObserver(double floor_fraction) : floor_(floor_fraction) {}
  void sample(const SampleTime& time, int runs) override;
  void end(Measurement& r, Timer&) override;

 private:
  double floor_;
  std::vector<double> clocks_mhz_;  // the samples' clocks, those without one left out
};

}  // namespace roofbench
