// Timing one case that passed its gate, as steps: the warm-up (sampling.hpp's batching), the launch chosen
// for the samples (hot, cold by flush or by rotation, on the stream or as a graph: the Timer the device makes for them), the
// sample loop until the stopping rule ends it, the observers' figures (sample_observer.hpp), and the judging
// of the kept samples. Fills the Measurement's timing fields; prints nothing.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "device.hpp"
#include "measure.hpp"
#include "sample_observer.hpp"
#include "sampling.hpp"

namespace roofbench {

// The Timer of one benchmark, made by its first rank's device for the launch the options name (hot or cold,
// held or not, on the stream or as a graph); remade when that changes: into a graph once, after the
// warm-up, and without the stream hold when a hold times out with one launch behind it.
//
// Ranks in several processes that work together (`agree_with`: a collective in every run) must run the case
// equally often, or a collective waits forever: each sample's time and elapsed seconds are then rank 0's for
// every decision the loops take (agree()), and its hold timed out where it did on any rank (the sample is
// dropped on all), while each rank keeps its own times as its samples.
class Launcher {
 public:
  Launcher(const std::vector<Device*>& ranks, std::function<void()> run_once, const TimingOptions& options,
           const RankWorld* agree_with = nullptr);
  Timer& timer() { return *timer_; }
  // What the loops decide on: `own` and `elapsed` alone, or rank 0's (the hold flag: any rank's) where the
  // ranks agree.
  struct Decided {
    SampleTime sample;
    double elapsed = 0;
  };
  Decided agree(const SampleTime& own, double elapsed) const;
  const TimingOptions& options() const { return options_; }
  // The samples' launch (choose_timing) from now on, the hold kept as it is; a graph is instantiated here for
  // `runs`, outside the samples. Nothing is remade where the launch stays the same.
  void use(const TimingOptions& chosen, int runs);
  // No stream hold from now on (HoldTimeoutAnswer::abandon_hold); a graph is instantiated again for `runs`.
  void abandon_hold(int runs);

 private:
  void remake();
  std::vector<Device*> ranks_;
  std::function<void()> run_once_;
  TimingOptions options_;
  const RankWorld* agree_with_;
  std::unique_ptr<Timer> timer_;
};

// The observers of a benchmark's samples, in the order they end: `energy` first where there is one (its
// pollers stop with the samples: make_energy_observer), the clock's mean over every sample before the clock
// floor drops any, the kernel-time trace (--kernel-time), the profiled pass (GPU cases, --profile) last.
// `together`: the ranks in other processes the case works with (Launcher), or none; their ranks count with
// this process's where --counters refuses a case of several ranks.
std::vector<std::unique_ptr<SampleObserver>> make_observers(std::unique_ptr<SampleObserver> energy,
                                                            const std::vector<Device*>& ranks, const MeasureOptions& o,
                                                            const RankWorld* together = nullptr);

// What the warm-up ends on: the time per run it settled to, and the most runs a sample may queue.
struct WarmupOutcome {
  double per_run = 0;
  int cap = 1;
};
// Runs until the time per run has settled (clocks up, caches and libraries warm) or o.warmup_max is spent;
// counts r.warmup_iterations and the stream holds that timed out, and sets r.phases.warmup.
WarmupOutcome warm_up(Launcher& launch, Measurement& r, DeviceKind kind, const MeasureOptions& o);

// Samples of r.runs_per_sample runs until `stop` ends them, each kept one shown to the observers; a sample
// whose hold timed out is dropped, and the hold goes or the runs per sample halve. r.samples: every kept
// sample's time per run; r.phases.sampling: the loop's seconds.
void sample_until_stopped(Launcher& launch, Measurement& r, StoppingRule& stop,
                          const std::vector<std::unique_ptr<SampleObserver>>& observers, bool runs_given);

// Under --cold, the copies of its inputs a case's samples rotate over (choose_rotation, made by the case
// after its gate) and how a run is pointed at one; copies 0: cold by flush, or hot.
struct CopyRotation {
  int copies = 0;
  std::function<void(int)> use_copy;
};

// All the steps for one case: `run_once` is one run of it.
// `agree_with`: the ranks in other processes this case works together with (Launcher), or none.
void time_case(Measurement& r, const BenchmarkSpec& b, std::function<void()> run_once, const std::vector<Device*>& ranks,
               const MeasureOptions& o, const CopyRotation& rotation = {}, const RankWorld* agree_with = nullptr);

}  // namespace roofbench
