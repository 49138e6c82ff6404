// The rules that decide, from times alone, how a benchmark is sampled: how many runs make a sample (during
// the warm-up and after it), what a stream hold that timed out changes, and when the samples are enough.
// Pure C++: no device and no clock, so each rule is tested on its own (tests/unit/sampling_test.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "measure.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench {

// How long one sample should last: long enough that timer resolution and per-sample overhead vanish,
// and, on a GPU, that a sample spans the millisecond-scale swings of the clock under its power limit
// (single 1.6 ms bf16 GEMMs measured 2.5% noise on an H200; the work itself is the same each time).
double target_sample_seconds(DeviceKind kind, bool graph);

// Warm-up lasts at least this long. A GPU's power controller answers a heavy kernel within about 0.2 s:
// after a 50 ms warm-up, the first 150 ms of an H200's fp16 4096^3 samples ran 5-10% faster than the
// rest, at boost clock.
double min_warmup_seconds(DeviceKind kind);

// At most this many runs are queued behind the stream hold: a full launch queue would block the host
// until the hold times out (a cuBLAS call may be several launches).
int launch_queue_cap(DeviceKind kind);

// The most runs a graph-timed sample holds: one launch queues them all, so the launch queue sets no cap.
inline constexpr int kGraphRunsCap = 10000;

// Runs per warm-up sample: one at first, doubling until a sample lasts the target (so timer resolution
// does not pass for noise), never past the cap; halved, and capped there, when a stream hold times out.
class WarmupBatching {
 public:
  // grow: false keeps one run a sample (cold: every sample starts from flushed caches).
  WarmupBatching(double target_seconds, int cap, bool grow) : target_(target_seconds), cap_(cap), grow_(grow) {}
  int batch() const { return batch_; }
  // The most runs a sample may queue now: the starting cap, or less after a hold timed out.
  int cap() const { return cap_; }
  // A sample of batch() runs took `seconds`: whether the batch doubled (the times so far are then of a
  // smaller batch, and the warm-up settles on batches of the final size only).
  bool grow_after(double seconds);
  // The sample's stream hold timed out: more launches than the queue holds. Queue half as many from now on.
  void halve();

 private:
  double target_;
  int cap_;
  bool grow_;
  int batch_ = 1;
};

// The time per run the warm-up ends on: the median of its last five times (0 with none).
double settled_time_per_run(const std::vector<double>& warm_times);

// Whether the samples are timed as graph replays: where a graph may be used (`allowed`: one CUDA rank, a
// graphable case), when asked for, or on its own for runs under 20 us, whose launch cost would show.
bool use_graph_timing(GraphMode mode, bool allowed, double per_run);

// Runs per timed sample: `asked` where given (> 0), one when cold, else as many as fill a sample of
// `target_seconds` at `per_run`, between 1 and `cap`.
int runs_per_sample(int asked, bool cold, double target_seconds, double per_run, int cap);

// What a timed sample's stream hold that timed out changes. With one launch behind it (a graph, a single
// run) the queue cannot have been full: the host was stuck in that launch (a profiler such as Nsight
// Compute serialises launches), so the hold goes; so it does when the runs per sample were given, which are
// kept. Else the sample queued too many runs: half as many from then on.
enum class HoldTimeoutAnswer { abandon_hold, halve_runs };
HoldTimeoutAnswer answer_hold_timeout(bool graph, int runs, bool runs_given);

struct StoppingSettings {
  std::size_t min_samples = 2;  // the case's least, and never under 2
  double min_time = 0;          // seconds of sampling before the noise may end it
  double max_time = 0;          // seconds after which enough samples end it
  double noise_bound = 0;       // stdev / mean under which sampling ends
};

// The stopping rule's settings for a case asking for `case_min_samples`; `energy`: an energy counter is
// polled beside the samples, which then last at least --energy's seconds (and may last that long).
StoppingSettings stopping_settings(const MeasureOptions& o, double case_min_samples, bool energy);

// When sampling ends: once the noise (stdev / mean of the times so far) is under its bound after
// min_time, or at max_time once there are min_samples; a case too slow for that many in four times
// max_time stops at three.
class StoppingRule {
 public:
  explicit StoppingRule(const StoppingSettings& settings) : s_(settings) {}
  // One kept sample's time per run.
  void add(double seconds_per_run);
  std::size_t count() const { return count_; }
  // After a kept sample, `elapsed` seconds into sampling: whether sampling ends.
  bool done(double elapsed) const;
  // After a dropped sample (its hold timed out): whether sampling ends.
  bool done_after_dropped(double elapsed) const;
  // Four times max_time gone and not one sample kept: sampling cannot succeed.
  bool hopeless(double elapsed) const;

 private:
  StoppingSettings s_;
  std::size_t count_ = 0;
  double sum_ = 0, sum_squares_ = 0;
};

}  // namespace roofbench
