// Setup-time timing of candidate ways to run one operation (cuDNN's algorithms, its backend engine plans),
// which a case uses to choose among them. A candidate is a callable that enqueues one launch. cuDNN's own
// Find times each algorithm from single launches; at small N (10-20 us kernels) its figures carried
// 0.1-0.25 ms of launch and module-loading overhead and its ranking was noise (on the H200 it put
// IMPLICIT_GEMM without tensor cores first for conv2_1x1_64 at N=32). Here every candidate is warmed up,
// then timed over groups of back-to-back launches replayed from a CUDA graph, as the host times short runs,
// and the median group decides.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace roofbench::case_support {

struct TimingPlan {
  int warmup_launches = 2;
  int groups = 5;                     // the median of these decides
  int max_launches_per_group = 50;
  double group_ms = 1.0;              // a group lasts about this long, from one launch's time
  double skip_factor = 4, skip_margin_ms = 0.05;  // see skip()
  // A candidate whose launches cannot be captured into a CUDA graph fails instead of being launched one
  // by one: for graphable cases, whose run() the host may replay from a graph.
  bool require_graph = false;

  // Launches per group from one warm launch's time: enough that launch overhead does not dominate a
  // group of short kernels, a single launch for kernels longer than a group.
  int launches_per_group(double one_launch_ms) const;
  // A candidate whose one warm launch took longer than skip_factor times the best per-launch time so far
  // (and skip_margin_ms more, so that overhead-bound launches of short kernels are never skipped) cannot
  // win: it is not timed further, which keeps slow algorithms (FFT, DIRECT at N=256) from costing seconds.
  bool skip(double one_launch_ms, double best_ms) const;
};

struct CandidateTiming {
  double one_launch_ms = 0;  // the warm launch that sized the groups
  double per_launch_ms = 0;  // median over the groups; unset when skipped
  int launches_per_group = 0;
  int groups = 0;
  bool skipped = false;  // not timed further: clearly slower, or failed, or not timed (untimed)
  bool untimed = false;  // after the first that runs, under ROOFBENCH_ALGORITHM_CHOICE=first
  bool graph = false;    // replayed from a CUDA graph (false: launched one by one, when capture failed)
  std::string failed;    // why a launch threw (the candidate is skipped)
  std::string text() const;  // "0.0123 ms", "skipped (one launch 1.23 ms)", "failed (<why>)"
};

// The median of `values` (the mean of the middle two for an even count); values is reordered.
double median(std::span<double> values);

// The index of the fastest timed candidate; the earliest (the caller's order) among equal times. Throws Error
// when every candidate was skipped or none was given.
std::size_t fastest(std::span<const CandidateTiming> timings);
// The same, the Error naming every candidate (`labels`, one per timing) and what became of it.
std::size_t fastest(std::span<const CandidateTiming> timings, std::span<const std::string> labels);

// "timed per launch (median of 5 groups of up to 50 launches, CUDA graph): A 0.0101 ms, B skipped (one
// launch 1.2 ms)": what was timed, one label per timing ("some launched one by one" when a capture failed).
std::string describe_timings(std::span<const std::string> labels, std::span<const CandidateTiming> timings, int groups);

// Times `launch` (which enqueues one run on `stream`) under `plan`, given the best per-launch time of the
// candidates timed before it (infinity for the first). A launch that throws Error makes the candidate
// skipped with the reason in `failed`: one candidate that cannot run must not end the search.
CandidateTiming time_launches(cudaStream_t stream, const std::function<void()>& launch, const TimingPlan& plan,
                              double best_ms);

// ROOFBENCH_ALGORITHM_CHOICE: "timed" (unset or empty: the default) or "first". Under "first" time_each times the
// candidates in order until one runs and leaves the rest untimed, so the caller's first that runs (the
// library's heuristic's first) is chosen: two processes then choose alike, where a profiler intercepting
// the launches of one would change the timings. Throws Error naming any other value.
bool first_candidate_only();

// Times `count` candidates in order (launch(i) enqueues one launch of candidate i), each given the best
// time of those before it (under first_candidate_only(), until one runs).
std::vector<CandidateTiming> time_each(cudaStream_t stream, std::size_t count,
                                       const std::function<void(std::size_t)>& launch, const TimingPlan& plan);

}  // namespace roofbench::case_support
