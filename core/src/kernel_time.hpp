// --kernel-time: the kernels' own GPU time per run (memcpys and memsets too), from CUPTI's records
// (kernel_profile.hpp), beside the event time. The records come from a pass right after the timed samples, over the same
// launch path (Timer::run_untimed: a graph-timed case replays its graph, and the kernels inside it are
// recorded), so CUPTI's instrumentation never sits in a timed sample. Each traced sample holds the samples'
// runs; its kernel time is the union of its kernels' intervals (kernels that overlap count once) over its
// runs, and kernel_time is the median over the traced samples. Pure C++: the bookkeeping is tested on the CPU.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernel_profile.hpp"

namespace roofbench {

struct KernelTimeFigures {
  double seconds = std::numeric_limits<double>::quiet_NaN();  // per run; NaN where there is none
  int samples = 0;                                             // traced samples it is the median of
  std::string error;  // why there is no kernel_time (a CPU device, no CUPTI, a driver that refuses, ...)
  bool measured() const { return seconds == seconds; }
};

// The samples --kernel-time traces when given without a number.
inline constexpr int kDefaultKernelTimeSamples = 10;

// Nanoseconds covered by at least one of the [start, end) intervals: overlapping kernels count once.
std::uint64_t covered_nanoseconds(std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals);

// kernel_time of a trace whose every pass held `runs` runs: per pass the covered time over `runs`, the
// median over the passes. A pass without a record (nothing on the GPU) counts as no kernel time; a trace
// with an error, or without a record at all, has none and says why.
KernelTimeFigures kernel_time_of(const KernelTrace& trace, int runs);

// The event time per run minus kernel_time: the absolute difference, and relative to kernel_time.
double event_minus_kernel(double event_seconds, const KernelTimeFigures& k);
double event_minus_kernel_fraction(double event_seconds, const KernelTimeFigures& k);

// The console notes that the event time includes launch cost where it exceeds kernel_time by more than
// this fraction (the like-for-like target: events within 3% of CUPTI's kernel time)...
inline constexpr double kLaunchCostNoteFraction = 0.03;
// ...or, without kernel_time, where a run takes less than this on a GPU: a launch and the gap between two
// kernels cost a few tenths of a microsecond, over 5% of the run below 5 us.
inline constexpr double kLaunchCostNoteSeconds = 5e-6;
bool launch_cost_noted(double event_seconds, const KernelTimeFigures& k);
// Where the event time is below kernel_time by more than that fraction, the console says that CUPTI's tracing
// lengthens the kernels it records: events enclose the kernels of an untraced run, so they bound its kernel
// time (docs/method.md, "Timers compared like for like").
bool tracing_cost_noted(double event_seconds, const KernelTimeFigures& k);

}  // namespace roofbench
