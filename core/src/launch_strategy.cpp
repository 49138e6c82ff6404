#include "launch_strategy.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>

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

// --- cold by rotation: the hot graph's plan over runs that read the case's copies in turn, so each run finds
// what it reads in main memory: the copies together are over twice the cache, and between two reads of one
// copy every other copy went through it. No flush and no event sits between the runs, and the sample's time
// is divided by its runs, so a kernel of a few microseconds is timed without the floor of an event pair
// inside the graph (2.59 us on an H200, above).
class ColdRotateLaunch final : public LaunchStrategy {
 public:
  explicit ColdRotateLaunch(int copies) : copies_(copies) {}
  bool graph() const override { return true; }
  bool cold() const override { return true; }
  bool flushes() const override { return false; }
  SamplePlan plan(int count, bool timed) const override {
    SamplePlan p = GraphLaunch(false).plan(count, timed);
    p.copies = copies_;
    return p;
  }

 private:
  int copies_;
};

// "4.72 MB", "8.59 GB": three digits, in decimal units.
std::string megabytes(double bytes) {
  char text[32];
  if (bytes >= 1e9) std::snprintf(text, sizeof text, "%.3g GB", bytes / 1e9);
  else std::snprintf(text, sizeof text, "%.3g MB", bytes / 1e6);
  return text;
}

}  // namespace

int copy_for_run(const SamplePlan& plan, int run) { return plan.copies > 0 ? run % plan.copies : -1; }

std::unique_ptr<LaunchStrategy> make_launch_strategy(const TimingOptions& options) {
  if (options.cold && options.copies > 0) return std::make_unique<ColdRotateLaunch>(options.copies);
  if (options.graph) return std::make_unique<GraphLaunch>(options.cold);
  if (options.cold) return std::make_unique<ColdFlushLaunch>();
  return std::make_unique<HotLaunch>();
}

TimingOptions warmup_timing(const MeasureOptions& o, DeviceKind kind) {
  return {.cold = o.cold, .graph = false, .hold = kind == DeviceKind::cuda};
}

bool graph_allowed(const MeasureOptions& o, const Timing& timing, DeviceKind kind, std::size_t ranks) {
  return kind == DeviceKind::cuda && ranks == 1 && timing.graphable && o.graph != GraphMode::off;
}

TimingOptions choose_timing(const MeasureOptions& o, const Timing& timing, DeviceKind kind, std::size_t ranks,
                            double per_run, int copies) {
  TimingOptions chosen = warmup_timing(o, kind);
  chosen.copies = o.cold ? copies : 0;
  chosen.graph = chosen.copies > 0 || use_graph_timing(o.graph, graph_allowed(o, timing, kind, ranks), per_run);
  return chosen;
}

ColdRotation choose_rotation(double copy_bytes, double cache_bytes, double free_bytes, bool graph_allowed) {
  ColdRotation c{.copy_bytes = copy_bytes};
  if (copy_bytes <= 0) c.flush_reason = "the case has no copies of its inputs to rotate";
  else if (!graph_allowed) c.flush_reason = "its runs cannot be one graph (several ranks, not graphable, or --graph=off)";
  else if (cache_bytes <= 0) c.flush_reason = "the device's cache size is not known";
  if (!c.flush_reason.empty()) return c;
  const double needed = std::max(1.0, std::ceil(2 * cache_bytes / copy_bytes));
  if (needed > kMaxRotationCopies) {
    c.flush_reason = "its inputs (" + megabytes(copy_bytes) + ") would need " + std::to_string(int64_t(needed)) +
                     " copies to exceed twice the cache, over " + std::to_string(kMaxRotationCopies);
  } else {
    c.flush_reason = rotation_memory_refusal(static_cast<int>(needed), copy_bytes, free_bytes);
    if (c.flush_reason.empty()) c.copies = static_cast<int>(needed);
  }
  return c;
}

std::string rotation_memory_refusal(int copies, double copy_bytes, double free_bytes) {
  if ((copies - 1) * copy_bytes <= kRotationMemoryShare * free_bytes) return "";
  return std::to_string(copies - 1) + " more copies of " + megabytes(copy_bytes) +
         " would take over half the device's free memory (" + megabytes(free_bytes) + ")";
}

ColdRotation agree_on_rotation(const std::vector<RankRotationChoice>& choices, double copy_bytes) {
  ColdRotation agreed{.copy_bytes = copy_bytes};
  for (const RankRotationChoice& c : choices) agreed.copies = std::max(agreed.copies, c.copies);
  auto flush = [&](std::size_t rank, const std::string& why) {
    agreed.copies = 0;
    agreed.flush_reason = "rank " + std::to_string(rank) + ": " + why;
    return agreed;
  };
  for (std::size_t p = 0; p < choices.size(); ++p)
    if (choices[p].copies == 0) return flush(p, choices[p].flush_reason);
  for (std::size_t p = 0; p < choices.size(); ++p)
    if (auto why = rotation_memory_refusal(agreed.copies, choices[p].copy_bytes, choices[p].free_bytes); !why.empty())
      return flush(p, why);
  return agreed;
}

std::string rotation_choice_blob(const RankRotationChoice& choice) {
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "copies %d %.17g %.17g ", choice.copies, choice.free_bytes, choice.copy_bytes);
  return numbers + choice.flush_reason;
}

std::optional<RankRotationChoice> read_rotation_choice(const std::string& blob) {
  constexpr std::string_view tag = "copies ";
  if (!blob.starts_with(tag)) return std::nullopt;
  const char* at = blob.data() + tag.size();
  const char* const end = blob.data() + blob.size();
  // One number and the space after it.
  auto field = [&](auto& value) {
    const auto [next, error] = std::from_chars(at, end, value);
    if (error != std::errc() || next == end || *next != ' ') return false;
    at = next + 1;
    return true;
  };
  RankRotationChoice c;
  if (!field(c.copies) || !field(c.free_bytes) || !field(c.copy_bytes)) return std::nullopt;
  if (c.copies < 0 || c.copies > kMaxRotationCopies) return std::nullopt;
  c.flush_reason.assign(at, end);
  return c;
}

int rotation_runs_per_sample(int copies, int wanted) {
  const int rounds = std::max(1, (std::max(wanted, 1) + copies - 1) / copies);
  return rounds * copies;
}

std::string ColdRotation::fact(double cache_bytes) const {
  if (copies == 0) return "flush: " + flush_reason;
  return "rotate: " + std::to_string(copies) + (copies == 1 ? " copy of " : " copies of ") + megabytes(copy_bytes) + " (2 x cache = " +
         megabytes(2 * cache_bytes) + ")";
}

}  // namespace roofbench
