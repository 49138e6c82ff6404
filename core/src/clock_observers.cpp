#include "clock_observers.hpp"

#include "statistics.hpp"

namespace roofbench {

void ClockProbeObserver::sample(const SampleTime& time, int) {
  if (time.clock_mhz > 0) {
    sum_mhz_ += time.clock_mhz;
    ++clocked_;
  }
  if (time.clock_spans_sample) ++spanning_;
}

void ClockProbeObserver::end(Measurement& r, Timer&) {
  r.samples_with_mean_clock = spanning_;
  if (clocked_ > 0) r.mean_clock_mhz = sum_mhz_ / static_cast<double>(clocked_);
}

void ClockFloorObserver::sample(const SampleTime& time, int) {
  if (time.clock_mhz > 0) clocks_mhz_.push_back(time.clock_mhz);
}

void ClockFloorObserver::end(Measurement& r, Timer&) {
  ThrottleSplit kept = drop_throttled(r.samples, clocks_mhz_, floor_);
  r.throttled_samples = kept.dropped;
  r.samples = std::move(kept.times);
  r.sample_clocks_mhz = std::move(kept.clocks_mhz);
}

}  // namespace roofbench
