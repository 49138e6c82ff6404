// --energy as an observer of the samples (energy.hpp has the window and its figure): each rank's energy
// counter polled on a thread from before the warm-up to the last sample, and the energy per run over a
// window of the samples, summed over the ranks.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "energy.hpp"
#include "sample_observer.hpp"

namespace roofbench {

class EnergyObserver final : public SampleObserver {
 public:
  using Counter = std::function<std::optional<double>()>;
  // One counter per rank, in rank order; `period`: how often each is polled.
  EnergyObserver(std::vector<Counter> counters, std::chrono::microseconds period);
  // Starts the pollers before the warm-up, so that finding the counter (loading NVML, the first time in a
  // process) never leaves the device idle between the warm-up and the samples.
  void begin() override;
  void sample(const SampleTime& time, int runs) override;
  void dropped(const SampleTime&) override { ++dropped_; }
  // Stops every poller before any is judged; the figures, or r.energy_note saying why there are none.
  void end(Measurement& r, Timer&) override;
  const std::vector<SampleSpan>& spans() const { return spans_; }

 private:
  std::vector<Counter> counters_;
  std::chrono::microseconds period_;
  std::vector<std::unique_ptr<EnergyPoller>> pollers_;
  std::vector<SampleSpan> spans_;
  int dropped_ = 0;
};

// The observer where --energy asks for one (o.energy_seconds > 0) and every rank has a counter; nullptr
// otherwise, with the reason in r.energy_note when it was asked for (never with --cold, whose flush would
// be booked to the runs). Without it the samples are not lengthened for energy either.
std::unique_ptr<EnergyObserver> make_energy_observer(Measurement& r, const std::vector<Device*>& ranks,
                                                     const MeasureOptions& o);

}  // namespace roofbench
