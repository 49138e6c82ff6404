// Whether a result's samples can be trusted as one number: a benchmark whose samples fall into two
// clusters far apart (a CPU case whose worker threads sometimes sleep through a scheduler tick) or whose
// noise stays far above the --noise bound has a median that says little, and must not look like a
// clean pass. Pure: the host calls it on the samples it reports and writes what it says.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace roofbench {

struct SampleQualityRules {
  // Noise (stdev / mean) above this many times the --noise bound is "far above" it.
  double noise_factor = 5.0;
  // Two clusters count when the faster one's slowest sample and the slower one's fastest differ by at
  // least this ratio, and that gap is this many times wider (in log time) than either cluster's spread.
  double min_gap_ratio = 1.5;
  double min_gap_over_spread = 3.0;
  // The smaller cluster holds at least this fraction of the samples (and 2 of them): a few outliers
  // are an ordinary tail, not a second mode.
  double min_cluster_fraction = 0.1;
  // Fewer samples than this are not judged for two clusters or a fast edge.
  std::size_t min_samples = 6;
  // Unsettled: the 5th-percentile sample under this fraction of the median. Interference (preemption,
  // a flushed cache) only adds time, so fast samples far below the median mean something slowed most of
  // the run (contention for memory bandwidth), and its median need not repeat: on a busy 2-core machine
  // such runs (0.27-0.6) flipped 1.8-2.3x between identical runs, preempted but steady ones stayed
  // at 0.92-1.0. reports/roofbench_reports/compare.py applies the same rule (UNSETTLED_FAST_EDGE).
  double min_fast_edge = 0.8;
};

struct SampleQuality {
  bool noisy = false;
  // One line, empty when clean: "bimodal: 12 of 40 samples near 4.9 ms, the rest near 1.0 us",
  // "noise 55% is over 5x the --noise bound (1%)" or "unsettled: the fastest 5% of samples are 46%
  // under the median".
  std::string reason;
  // Set when bimodal: the samples in the faster and the slower cluster.
  std::size_t fast_samples = 0, slow_samples = 0;
};

// samples_s: the per-sample times (seconds per run) the result reports; noise_bound: --noise as a
// fraction (0.01). noise: the relative noise to hold against the bound; negative (the default) means
// stdev / mean of the samples, computed here. A GPU passes its noise at a fixed clock when known: a clock
// moving under the power limit is the device's behaviour, not a measurement to distrust, so then the
// unsettled rule (which the clock's swings would trip) is not applied either.
SampleQuality assess_samples(const std::vector<double>& samples_s, double noise_bound, double noise = -1,
                             const SampleQualityRules& rules = {});

}  // namespace roofbench
