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
// which flush nothing and record no events. A cold sample in graph mode captures the flush and the events
// into its graph, so that the span timed is the runs alone and the cost of launching the graph (about 3.6 us
// on an H200, more than a 1-token GEMV's kernel) is spent on the flush, outside it. Every other sample has
// the events on the stream around the runs, as before.
SamplePlan plan_sample(const TimingOptions& options, int runs, bool timed);

}  // namespace roofbench
