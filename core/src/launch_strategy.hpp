// How one sample is launched: a LaunchStrategy says what a sample enqueues, in order (the L2 flush, the
// timing events, the runs, and which of them go into a graph), and the device's Timer carries the steps
// out (cuda_device.cu on streams and graphs, cpu_device.cpp on the host). One strategy per way of timing:
// hot (back-to-back runs between two events), cold (a cache flush before each sample) and graph (the runs
// captured into a CUDA graph replayed between events), chosen once per benchmark (choose_timing). A new
// way of timing is one more strategy here. Pure C++ (no CUDA), so the plans are tested on the CPU.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "device.hpp"
#include "measure.hpp"

namespace roofbench {

// flush: write over twice the cache; start and stop: the timing events; runs: the sample's runs of the
// case, back to back.
enum class SampleStep { flush, start, runs, stop };

struct SamplePlan {
  int runs = 0;                          // how many runs the `runs` step is
  std::vector<SampleStep> before_graph;  // enqueued one by one on the stream, before the graph (if any)
  std::vector<SampleStep> in_graph;      // captured into the sample's graph; empty without one
  std::vector<SampleStep> after_graph;   // enqueued after it
};

class LaunchStrategy {
 public:
  virtual ~LaunchStrategy() = default;
  // Whether the samples are graph replays (results' "timing": graph, else stream) and whether each starts
  // from flushed caches (the context's "mode": cold, else hot; the device then keeps a buffer to flush).
  virtual bool graph() const = 0;
  virtual bool cold() const = 0;
  // What a sample of `runs` runs enqueues. `timed`: a timed sample (Timer::time); else the untimed
  // launches of a profiled pass (Timer::run_untimed), the runs alone on the same launch path: no flush,
  // no events.
  virtual SamplePlan plan(int runs, bool timed) const = 0;
};

// The strategy the options name: graph (hot or cold) where options.graph, else cold or hot on the stream.
std::unique_ptr<LaunchStrategy> make_launch_strategy(const TimingOptions& options);

// A timed plan carried out on the host, the CPU device's samples (cpu_device.cpp): `flush` for each flush
// step, `run` for each of its runs, in order; the seconds from the start step to the stop step by the
// steady clock. The host has no graphs: a plan with graph steps is refused (Error).
double time_on_host(const SamplePlan& plan, const std::function<void()>& run, const std::function<void()>& flush);

// The launch of a benchmark's warm-up: on the stream (hot, or cold under --cold), with the stream hold
// on a GPU.
TimingOptions warmup_timing(const MeasureOptions& o, DeviceKind kind);

// The launch of a benchmark's timed samples, chosen once after its warm-up from the options and the case's
// Timing: cold under --cold; a graph replay where one may be used (one CUDA rank, a graphable case) and
// --graph asks for it, or on its own for runs under 20 us (`per_run`: the warm-up's time per run).
TimingOptions choose_timing(const MeasureOptions& o, const Timing& timing, DeviceKind kind, std::size_t ranks,
                            double per_run);

}  // namespace roofbench
