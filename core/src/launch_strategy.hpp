// How one sample is launched: a LaunchStrategy says what a sample enqueues, in order (the L2 flush, the
// timing events, the runs, and which of them go into a graph), and the device's Timer carries the steps
// out (cuda_device.cu on streams and graphs, cpu_device.cpp on the host). One strategy per way of timing:
// hot (back-to-back runs between two events), cold by flush (a cache flush before each sample), cold by
// rotation (a graph of runs over copies of the case's inputs that together exceed twice the cache, between
// two events) and graph (the runs captured into a CUDA graph replayed between events), chosen once per
// benchmark (choose_timing, choose_rotation). A new way of timing is one more strategy here. Pure C++ (no CUDA), so the plans are tested on the CPU.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device.hpp"
#include "measure.hpp"

namespace roofbench {

// flush: write over twice the cache; start and stop: the timing events; runs: the sample's runs of the
// case, back to back.
enum class SampleStep { flush, start, runs, stop };

struct SamplePlan {
  int runs = 0;                          // how many runs the `runs` step is
  int copies = 0;                        // > 0: run i reads the case's copy copy_for_run(i) (cold by rotation)
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
  // Whether a sample flushes the cache (the device then keeps a buffer to write over): cold but rotating
  // does not.
  virtual bool flushes() const { return cold(); }
  // What a sample of `runs` runs enqueues. `timed`: a timed sample (Timer::time); else the untimed
  // launches of a profiled pass (Timer::run_untimed), the runs alone on the same launch path: no flush,
  // no events.
  virtual SamplePlan plan(int runs, bool timed) const = 0;
};

// The copy run `run` of a sample reads: the copies in turn from 0, wrapping (-1 without rotation).
int copy_for_run(const SamplePlan& plan, int run);

// The strategy the options name: cold by rotation where options.copies > 0 (cold, in a graph), else graph
// (hot or cold) where options.graph, else cold or hot on the stream.
std::unique_ptr<LaunchStrategy> make_launch_strategy(const TimingOptions& options);

// How a benchmark is timed cold: by rotation over `copies` sets of its inputs, or by flush, and why.
struct ColdRotation {
  int copies = 0;           // 0: cold by flush
  double copy_bytes = 0;    // the bytes of one set
  std::string flush_reason;  // why not by rotation, when copies == 0
  // The results' fact: "rotate: 23 copies of 4.72 MB (2 x cache = 105 MB)" or "flush: <reason>".
  std::string fact(double cache_bytes) const;
};

// Copies are refused when the extra ones would take more than this share of the device's free memory.
inline constexpr double kRotationMemoryShare = 0.5;
// Nor more copies than this in one graph (a case of a few kilobytes flushes instead).
inline constexpr int kMaxRotationCopies = 4096;

// The copies a rotating case gets: the fewest N with N x copy_bytes >= 2 x cache_bytes (one where a single
// set already is: no run can find the last run's data in the cache, and no memory is spent on copies). Flush instead
// where the case has no copies (copy_bytes 0), cannot be a graph (`graph_allowed`: one CUDA rank, a
// graphable case, not --graph=off), where the cache is unknown, or the copies would be too many or too big
// for free_bytes.
ColdRotation choose_rotation(double copy_bytes, double cache_bytes, double free_bytes, bool graph_allowed);

// Why `copies` sets of copy_bytes (one of them the case's own) do not fit in free_bytes
// (kRotationMemoryShare), or "" where they do.
std::string rotation_memory_refusal(int copies, double copy_bytes, double free_bytes);

// One rank's choose_rotation, its device's free memory and the bytes of its set, for ranks that work together
// across processes.
struct RankRotationChoice {
  int copies = 0;
  double free_bytes = 0;
  double copy_bytes = 0;
  std::string flush_reason;
};

// A choice as one rank sends it to the others: "copies N FREE BYTES reason".
std::string rotation_choice_blob(const RankRotationChoice& choice);
// The choice in a blob of rotation_choice_blob, or nothing where the blob is not one (another tag, a count
// outside 0..kMaxRotationCopies, a number that does not parse or is cut short).
std::optional<RankRotationChoice> read_rotation_choice(const std::string& blob);

// The rotation every rank of a case whose ranks work together across processes takes (each must run the case
// equally often): the most copies any rank needs, so that the largest cache decides and no rank reads warm data;
// a flush on every rank where one flushes or cannot fit that many of its own sets, its reason naming the first
// such rank. It depends on `choices` alone, the same on every rank (`copy_bytes`, this rank's, only goes into
// the fact).
ColdRotation agree_on_rotation(const std::vector<RankRotationChoice>& choices, double copy_bytes);

// Runs per sample under rotation: a whole number of rounds over the copies, at least `wanted`.
int rotation_runs_per_sample(int copies, int wanted);

// A timed plan carried out on the host, the CPU device's samples (cpu_device.cpp): `flush` for each flush
// step, `run` for each of its runs, in order; the seconds from the start step to the stop step by the
// steady clock. The host has no graphs: a plan with graph steps is refused (Error).
double time_on_host(const SamplePlan& plan, const std::function<void()>& run, const std::function<void()>& flush);

// The launch of a benchmark's warm-up: on the stream (hot, or cold under --cold), with the stream hold
// on a GPU.
TimingOptions warmup_timing(const MeasureOptions& o, DeviceKind kind);

// Whether a case's runs may be captured into a graph: one CUDA rank, a graphable case, not --graph=off.
bool graph_allowed(const MeasureOptions& o, const Timing& timing, DeviceKind kind, std::size_t ranks);

// The launch of a benchmark's timed samples, chosen once after its warm-up from the options and the case's
// Timing: cold under --cold; a graph replay where one may be used (graph_allowed) and --graph asks for it,
// or on its own for runs under 20 us (`per_run`: the warm-up's time per run); always a graph when cold by
// rotation (`copies` > 0, from choose_rotation).
TimingOptions choose_timing(const MeasureOptions& o, const Timing& timing, DeviceKind kind, std::size_t ranks,
                            double per_run, int copies = 0);

}  // namespace roofbench
