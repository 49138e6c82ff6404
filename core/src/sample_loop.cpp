#include "sample_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "clock_observers.hpp"
#include "energy_observer.hpp"
#include "launch_strategy.hpp"
#include "kernel_time_observer.hpp"
#include "counter_observer.hpp"
#include "nvtx_range.hpp"
#include "profile_observer.hpp"
#include "sample_quality.hpp"
#include "statistics.hpp"

namespace roofbench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void abandon_hold(Launcher& launch, Measurement& r) {
  launch.abandon_hold(r.runs_per_sample);
  r.hold_abandoned = true;
}

// After the warm-up, once for the benchmark: the launch of its samples (launch_strategy.hpp), and the runs
// per sample: under rotation whole rounds over the copies, as many as fill a graph's sample.
void choose_launch(Launcher& launch, Measurement& r, const BenchmarkSpec& b, const std::vector<Device*>& ranks,
                   const MeasureOptions& o, const WarmupOutcome& warm, const CopyRotation& rotation) {
  const DeviceKind kind = ranks.front()->info().kind;
  TimingOptions chosen = choose_timing(o, b.spec->timing, kind, ranks.size(), warm.per_run, rotation.copies);
  chosen.use_copy = rotation.use_copy;
  r.graph = chosen.graph;
  r.cold = chosen.cold;
  const bool rotating = chosen.copies > 0;
  r.runs_per_sample = runs_per_sample(o.runs_per_sample, chosen.cold && !rotating, target_sample_seconds(kind, r.graph),
                                      warm.per_run, r.graph ? kGraphRunsCap : warm.cap);
  if (rotating) r.runs_per_sample = rotation_runs_per_sample(chosen.copies, r.runs_per_sample);
  launch.use(chosen, r.runs_per_sample);
}

// The kept samples' summary, their noise at a fixed clock, and whether they can be trusted as one number.
// A clock moving under the power limit is the device's behaviour: where it is known, the noise held
// against the bound is what is left at a fixed clock.
void judge_samples(Measurement& r, double noise_bound) {
  r.stats = summarize(r.samples);
  if (r.sample_clocks_mhz.size() == r.samples.size())
    r.noise_at_fixed_clock = noise_at_fixed_clock(r.samples, r.sample_clocks_mhz);
  const SampleQuality quality =
      assess_samples(r.samples, noise_bound, std::isnan(r.noise_at_fixed_clock) ? -1.0 : r.noise_at_fixed_clock);
  if (quality.noisy) r.quality_reason = quality.reason;
}

// --energy lengthens the sampling (stopping_settings): ranks that work together across processes measure it
// only where every one has an energy counter, or their stopping rules would differ, and so would the number
// of runs of a collective that every rank must run equally often.
std::unique_ptr<SampleObserver> energy_on_every_rank(std::unique_ptr<SampleObserver> energy, Measurement& r,
                                                     const RankWorld& world) {
  const std::vector<std::string> counted = world.exchange(energy ? "energy" : "none");
  if (!energy) return energy;
  for (std::size_t p = 0; p < counted.size(); ++p)
    if (counted[p] != "energy") {
      r.energy_note = "rank " + std::to_string(p) + ": no energy counter there, and ranks that work together sample alike";
      return nullptr;
    }
  return energy;
}

}  // namespace

Launcher::Launcher(const std::vector<Device*>& ranks, std::function<void()> run_once, const TimingOptions& options,
                   const RankWorld* agree_with)
    : ranks_(ranks), run_once_(std::move(run_once)), options_(options), agree_with_(agree_with) {
  remake();
}

Launcher::Decided Launcher::agree(const SampleTime& own, double elapsed) const {
  if (!agree_with_) return {own, elapsed};
  double mine[3] = {own.seconds, elapsed, own.hold_timed_out ? 1.0 : 0.0};
  std::string blob(sizeof mine, '\0');
  std::memcpy(blob.data(), mine, sizeof mine);
  const std::vector<std::string> all = agree_with_->exchange(blob);
  Decided decided{own, 0};
  decided.sample.hold_timed_out = false;
  for (std::size_t p = 0; p < all.size(); ++p) {
    if (all[p].size() != sizeof mine)
      throw Error("rank " + std::to_string(p) + " sent a sample of " + std::to_string(all[p].size()) + " bytes");
    double theirs[3];
    std::memcpy(theirs, all[p].data(), sizeof theirs);
    if (p == 0) decided.sample.seconds = theirs[0], decided.elapsed = theirs[1];
    // A sample whose hold timed out on any rank is dropped on every rank: its time there includes the
    // launches' own gaps, and a rank that kept it would report the slowest, wrong, time.
    decided.sample.hold_timed_out = decided.sample.hold_timed_out || theirs[2] != 0;
  }
  return decided;
}

void Launcher::remake() { timer_ = ranks_.front()->make_timer(ranks_, run_once_, options_); }

void Launcher::use(const TimingOptions& chosen, int runs) {
  if (chosen.cold == options_.cold && chosen.graph == options_.graph && chosen.copies == options_.copies) return;
  options_.cold = chosen.cold;
  options_.graph = chosen.graph;
  options_.copies = chosen.copies;
  options_.use_copy = chosen.use_copy;
  remake();
  if (options_.graph) timer_->time(runs);
}

void Launcher::abandon_hold(int runs) {
  options_.hold = false;
  remake();
  if (options_.graph) timer_->time(runs);
}

std::vector<std::unique_ptr<SampleObserver>> make_observers(std::unique_ptr<SampleObserver> energy,
                                                            const std::vector<Device*>& ranks, const MeasureOptions& o,
                                                            const RankWorld* together) {
  std::vector<std::unique_ptr<SampleObserver>> observers;
  if (energy) observers.push_back(std::move(energy));
  observers.push_back(std::make_unique<ClockProbeObserver>());
  observers.push_back(std::make_unique<ClockFloorObserver>(o.clock_floor));
  // The traced passes run the case again: ranks that work together run them as often, or none does.
  if (o.kernel_time_samples > 0)
    observers.push_back(std::make_unique<KernelTimeObserver>(o.kernel_time_samples, ranks.front()->info().kind, together));
  if (o.profile_runs > 0 && ranks.front()->info().kind == DeviceKind::cuda)
    observers.push_back(std::make_unique<KernelProfileObserver>(o.profile_runs, together));
  // A collective case under a launcher has one rank in this process, but its kernels still wait for the
  // other processes' ranks: a counters pass must count all of them, or it replays one rank's collectives alone.
  const std::size_t case_ranks = together ? static_cast<std::size_t>(together->world_size) : ranks.size();
  if (o.counters && ranks.front()->info().kind == DeviceKind::cuda)
    observers.push_back(std::make_unique<CounterObserver>(case_ranks, ranks.front()->info().index, o.counter_replay));
  return observers;
}

WarmupOutcome warm_up(Launcher& launch, Measurement& r, DeviceKind kind, const MeasureOptions& o) {
  WarmupBatching batching(target_sample_seconds(kind, false), launch_queue_cap(kind), !o.cold);
  std::vector<double> warm;  // times per run of batches of the current size
  const auto start = Clock::now();
  while (true) {
    const int batch = batching.batch();
    const auto [sample, elapsed] = launch.agree(launch.timer().time(batch), seconds_since(start));
    r.warmup_iterations += batch;
    if (sample.hold_timed_out) {
      ++r.hold_timeouts;
      if (batch == 1) abandon_hold(launch, r);
      batching.halve();
      warm.clear();
      if (elapsed >= o.warmup_max) break;
      continue;
    }
    warm.push_back(sample.seconds / batch);
    if (elapsed >= o.warmup_max) break;
    if (batching.grow_after(sample.seconds)) {
      warm.clear();
      continue;
    }
    if (warmup_settled(warm) && elapsed >= min_warmup_seconds(kind)) break;
  }
  r.phases.warmup = seconds_since(start);
  return {settled_time_per_run(warm), batching.cap()};
}

void sample_until_stopped(Launcher& launch, Measurement& r, StoppingRule& stop,
                          const std::vector<std::unique_ptr<SampleObserver>>& observers, bool runs_given) {
  std::vector<double> times;
  const auto start = Clock::now();
  while (true) {
    const SampleTime s = launch.timer().time(r.runs_per_sample);
    const auto [decided, elapsed] = launch.agree(s, seconds_since(start));
    if (decided.hold_timed_out) {
      ++r.hold_timeouts;
      for (const auto& observer : observers) observer->dropped(s);
      if (answer_hold_timeout(r.graph, r.runs_per_sample, runs_given) == HoldTimeoutAnswer::abandon_hold)
        abandon_hold(launch, r);
      else
        r.runs_per_sample = std::max(1, r.runs_per_sample / 2);
      if (stop.done_after_dropped(elapsed)) break;
      if (stop.hopeless(elapsed))
        throw Error("every sample's stream hold timed out (" + std::to_string(r.hold_timeouts) + " times)");
      continue;
    }
    for (const auto& observer : observers) observer->sample(s, r.runs_per_sample);
    times.push_back(s.seconds / r.runs_per_sample);
    stop.add(decided.seconds / r.runs_per_sample);
    if (stop.done(elapsed)) break;
  }
  r.phases.sampling = seconds_since(start);
  r.samples = std::move(times);
}

void time_case(Measurement& r, const BenchmarkSpec& b, std::function<void()> run_once, const std::vector<Device*>& ranks,
               const MeasureOptions& o, const CopyRotation& rotation, const RankWorld* agree_with) {
  const DeviceKind kind = ranks.front()->info().kind;
  Launcher launch(ranks, std::move(run_once), warmup_timing(o, kind), agree_with);
  std::unique_ptr<SampleObserver> energy = make_energy_observer(r, ranks, o);
  if (agree_with && o.energy_seconds > 0) energy = energy_on_every_rank(std::move(energy), r, *agree_with);
  const bool energy_measured = energy != nullptr;
  const auto observers = make_observers(std::move(energy), ranks, o, agree_with);
  for (const auto& observer : observers) observer->begin();
  const WarmupOutcome warm = warm_up(launch, r, kind, o);
  choose_launch(launch, r, b, ranks, o, warm, rotation);
  StoppingRule stop(stopping_settings(o, b.spec->timing.min_samples, energy_measured));
  {
    const NvtxRange samples(kSamplesRangeName);
    sample_until_stopped(launch, r, stop, observers, o.runs_per_sample > 0);
  }
  for (const auto& observer : observers) observer->end(r, launch.timer());
  judge_samples(r, o.noise_bound);
}

}  // namespace roofbench
