#include "roofbench/case_support/launch_timing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "roofbench/case_support/algorithm_choice.hpp"
#include "roofbench/case_support/owned_handle.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::case_support {

int TimingPlan::launches_per_group(double one_launch_ms) const {
  if (!(one_launch_ms > 0)) return max_launches_per_group;
  return int(std::clamp(std::ceil(group_ms / one_launch_ms), 1.0, double(max_launches_per_group)));
}

bool TimingPlan::skip(double one_launch_ms, double best_ms) const {
  return std::isfinite(best_ms) && one_launch_ms > skip_factor * best_ms + skip_margin_ms;
}

std::string CandidateTiming::text() const {
  if (!failed.empty()) return "failed (" + failed.substr(0, 240) + ")";
  if (untimed) return "not timed (ROOFBENCH_ALGORITHM_CHOICE=first)";
  char buffer[96];
  if (skipped)
    std::snprintf(buffer, sizeof buffer, "skipped (one launch %.4g ms)", one_launch_ms);
  else
    std::snprintf(buffer, sizeof buffer, "%.4g ms", per_launch_ms);
  return buffer;
}

double median(std::span<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(middle), values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + std::ptrdiff_t(middle));
  return (lower + upper) / 2;
}

std::size_t fastest(std::span<const CandidateTiming> timings) {
  std::size_t best = timings.size();
  for (std::size_t i = 0; i < timings.size(); ++i)
    if (!timings[i].skipped && (best == timings.size() || timings[i].per_launch_ms < timings[best].per_launch_ms))
      best = i;
  if (best == timings.size()) throw Error("no candidate was timed (every one was skipped, or none was given)");
  return best;
}

std::size_t fastest(std::span<const CandidateTiming> timings, std::span<const std::string> labels) {
  if (std::any_of(timings.begin(), timings.end(), [](const CandidateTiming& t) { return !t.skipped; }))
    return fastest(timings);
  throw Error("no candidate could be timed: " + describe_timings(labels, timings, TimingPlan{}.groups));
}

std::string describe_timings(std::span<const std::string> labels, std::span<const CandidateTiming> timings, int groups) {
  if (labels.size() != timings.size())
    throw Error(std::to_string(timings.size()) + " timings for " + std::to_string(labels.size()) + " candidates");
  int most_launches = 0;
  bool all_graph = true;
  std::string timed;
  for (std::size_t i = 0; i < timings.size(); ++i) {
    most_launches = std::max(most_launches, timings[i].launches_per_group);
    if (!timings[i].skipped) all_graph = all_graph && timings[i].graph;
    timed += (i ? ", " : "") + labels[i] + " " + timings[i].text();
  }
  return "timed per launch (median of " + std::to_string(groups) + " groups of up to " + std::to_string(most_launches) +
         " launches, " + (all_graph ? "CUDA graph" : "some launched one by one") + "): " + timed;
}

namespace {

using Event = case_support::OwnedHandle<cudaEvent_t, cudaEventDestroy>;
using GraphExec = case_support::OwnedHandle<cudaGraphExec_t, cudaGraphExecDestroy>;

// `launches` launches captured into `exec`; false when capture fails (the stream is left usable and the
// error cleared, and the caller launches one by one instead).
bool capture(cudaStream_t stream, const std::function<void()>& launch, int launches, GraphExec& exec) {
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  // Whatever a launch throws, the capture is ended below: a stream left capturing breaks every later call.
  bool launched = true;
  try {
    for (int i = 0; i < launches; ++i) launch();
  } catch (...) {
    launched = false;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t instantiated = nullptr;
  if (launched && ended == cudaSuccess && graph && cudaGraphInstantiate(&instantiated, graph, 0) == cudaSuccess)
    *exec.replace() = instantiated;
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  return exec.get() != nullptr;
}

}  // namespace

namespace {

CandidateTiming time_or_throw(cudaStream_t stream, const std::function<void()>& launch, const TimingPlan& plan,
                              double best_ms) {
  Event start, stop;
  ROOFBENCH_CUDA(cudaEventCreate(start.replace()));
  ROOFBENCH_CUDA(cudaEventCreate(stop.replace()));
  auto elapsed_ms = [&](const std::function<void()>& enqueue) {
    ROOFBENCH_CUDA(cudaEventRecord(start.get(), stream));
    enqueue();
    ROOFBENCH_CUDA(cudaEventRecord(stop.get(), stream));
    ROOFBENCH_CUDA(cudaEventSynchronize(stop.get()));
    float ms = 0;
    ROOFBENCH_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    return double(ms);
  };

  for (int i = 0; i < plan.warmup_launches; ++i) launch();
  ROOFBENCH_CUDA(cudaStreamSynchronize(stream));
  CandidateTiming timing;
  timing.one_launch_ms = elapsed_ms(launch);
  if (plan.skip(timing.one_launch_ms, best_ms)) {
    timing.skipped = true;
    return timing;
  }
  timing.launches_per_group = plan.launches_per_group(timing.one_launch_ms);
  timing.groups = plan.groups;
  GraphExec graph;
  timing.graph = capture(stream, launch, timing.launches_per_group, graph);
  if (!timing.graph && plan.require_graph) throw Error("its launches could not be captured into a CUDA graph");
  auto group = [&] {
    if (timing.graph)
      ROOFBENCH_CUDA(cudaGraphLaunch(graph.get(), stream));
    else
      for (int i = 0; i < timing.launches_per_group; ++i) launch();
  };
  group();  // the graph's first launch uploads it
  std::vector<double> per_launch;
  for (int g = 0; g < plan.groups; ++g) per_launch.push_back(elapsed_ms(group) / timing.launches_per_group);
  timing.per_launch_ms = median(per_launch);
  return timing;
}

}  // namespace

CandidateTiming time_launches(cudaStream_t stream, const std::function<void()>& launch, const TimingPlan& plan,
                              double best_ms) {
  try {
    return time_or_throw(stream, launch, plan, best_ms);
  } catch (const Error& e) {
    // A candidate that failed to launch is skipped; one that left a sticky error (an illegal address) has
    // broken the context for every candidate and the case, so that is the case's error, not a skip.
    if (const cudaError_t sticky = cudaStreamSynchronize(stream); sticky != cudaSuccess) {
      (void)cudaGetLastError();
      if (cudaStreamSynchronize(stream) != cudaSuccess)
        throw Error(std::string("timing a candidate left the device in error (") + cudaGetErrorString(sticky) +
                    "): " + e.what());
    }
    CandidateTiming timing;
    timing.skipped = true;
    timing.failed = e.what();
    return timing;
  }
}

bool first_candidate_only() {
  const char* value = std::getenv(kAlgorithmChoiceVariable);
  if (const std::optional<bool> first = algorithm_choice_is_first(value)) return *first;
  throw Error(std::string(kAlgorithmChoiceVariable) + "=" + value + ": expected timed or first");
}

std::vector<CandidateTiming> time_each(cudaStream_t stream, std::size_t count,
                                       const std::function<void(std::size_t)>& launch, const TimingPlan& plan) {
  const bool first_only = first_candidate_only();
  std::vector<CandidateTiming> timings;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < count; ++i) {
    if (first_only && best < std::numeric_limits<double>::infinity()) {
      timings.push_back(CandidateTiming{.skipped = true, .untimed = true});
      continue;
    }
    timings.push_back(time_launches(stream, [&] { launch(i); }, plan, best));
    if (!timings.back().skipped) best = std::min(best, timings.back().per_launch_ms);
  }
  return timings;
}

}  // namespace roofbench::case_support
