#include "launch_strategy.hpp"

#include "sampling.hpp"

namespace roofbench {
namespace {

using enum SampleStep;

// The runs between the two events, after a flush when `flushed`.
std::vector<SampleStep> framed(bool flushed) {
  return flushed ? std::vector<SampleStep>{flush, start, runs, stop} : std::vector<SampleStep>{start, runs, stop};
}

// --- hot: back-to-back runs between two events on the stream; the caches keep what the last run left.
class HotLaunch final : public LaunchStrategy {
 public:
  bool graph() const override { return false; }
  bool cold() const override { return false; }
  SamplePlan plan(int count, bool timed) const override {
    return {.runs = count, .before_graph = timed ? framed(false) : std::vector<SampleStep>{runs}};
  }
};

// --- cold by flush: the hot sample with the caches written over on the stream before its start event, so
// the run finds its data in main memory (one run a sample: runs_per_sample). Untimed launches flush nothing.
class ColdFlushLaunch final : public LaunchStrategy {
 public:
  bool graph() const override { return false; }
  bool cold() const override { return true; }
  SamplePlan plan(int count, bool timed) const override {
    SamplePlan hot = HotLaunch().plan(count, timed);
    if (timed) hot.before_graph.insert(hot.before_graph.begin(), flush);
    return hot;
  }
};

// --- graph: the runs captured once into a CUDA graph (the device keeps one per plan) and replayed, which
// leaves the per-launch CPU cost out. Hot, the events stay on the stream around the replay. Cold (one run),
// the flush and the events are captured into the graph: the span timed starts where the flush ends, inside
// the graph, so launching the graph is spent on the flush, outside it. What no event pair can leave out is
// the run's own launch after the start event: on an H200 an empty kernel between two event nodes right after
// the flush took 2.59 us, and the 1-token GEMV (768x3072) took 5.98 us cold timed inside the graph against
// 6.18 with the events around it (measured on two different H200 machines).
class GraphLaunch final : public LaunchStrategy {
 public:
  explicit GraphLaunch(bool cold) : cold_(cold) {}
  bool graph() const override { return true; }
  bool cold() const override { return cold_; }
  SamplePlan plan(int count, bool timed) const override {
    if (!timed) return {.runs = count, .in_graph = {runs}};
    if (cold_) return {.runs = count, .in_graph = framed(true)};
    return {.runs = count, .before_graph = {start}, .in_graph = {runs}, .after_graph = {stop}};
  }

 private:
  bool cold_;
};

}  // namespace

std::unique_ptr<LaunchStrategy> make_launch_strategy(const TimingOptions& options) {
  if (options.graph) return std::make_unique<GraphLaunch>(options.cold);
  if (options.cold) return std::make_unique<ColdFlushLaunch>();
  return std::make_unique<HotLaunch>();
}

TimingOptions warmup_timing(const MeasureOptions& o, DeviceKind kind) {
  return {.cold = o.cold, .graph = false, .hold = kind == DeviceKind::cuda};
}

TimingOptions choose_timing(const MeasureOptions& o, const Timing& timing, DeviceKind kind, std::size_t ranks,
                            double per_run) {
  const bool graph_allowed = kind == DeviceKind::cuda && ranks == 1 && timing.graphable;
  TimingOptions chosen = warmup_timing(o, kind);
  chosen.graph = use_graph_timing(o.graph, graph_allowed, per_run);
  return chosen;
}

}  // namespace roofbench
