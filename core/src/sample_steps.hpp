// What a CUDA sample enqueues, in order: the one place that says where the L2 flush and the timing events
// go, so the timer and its CPU test agree. Pure C++ (no CUDA).
#pragma once

#include <vector>

#include "device.hpp"

namespace roofbench {

// flush: write over twice the L2; start and stop: the timing events; run: one run of the case.
enum class SampleStep { flush, start, run, stop };

struct SamplePlan {
  std::vector<SampleStep> before_graph;  // enqueued one by one on the stream, before the graph (if any)
  std::vector<SampleStep> in_graph;      // captured into the sample's graph; empty without one
  std::vector<SampleStep> after_graph;   // enqueued after it
};

// `timed`: a timed sample (Timer::time); else the untimed launches of a profiled pass (Timer::run_untimed),
// which flush nothing and record no events. A cold sample in graph mode (one run) captures the flush and the
// events into its graph: the span timed starts where the flush ends, inside the graph, so launching the graph
// is spent on the flush, outside it. What no event pair can leave out is the run's own launch after the
// start event: on an H200 an empty kernel between two event nodes right after the flush took 2.59 us, and
// the 1-token GEMV (768x3072) took 5.98 us cold after the change against 6.18 before it (two H200 machines,
// not one call).
// Every other sample has the events on the stream around the runs, as before.
SamplePlan plan_sample(const TimingOptions& options, int runs, bool timed);

}  // namespace roofbench
