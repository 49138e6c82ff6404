#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>

#include "energy.hpp"
#include "sample_quality.hpp"

namespace roofbench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The plugin's view of the host for one benchmark. Owns every allocation the case makes.
class HostContext final : public Context {
 public:
  HostContext(const std::vector<Device*>& ranks, const Params& params, std::uint64_t seed)
      : ranks_(ranks), params_(params), seed_(seed) {}
  ~HostContext() override { release_all(); }

  const Params& params() const override { return params_; }
  int ranks() const override { return static_cast<int>(ranks_.size()); }
  const DeviceInfo& device(int rank) const override { return at(rank).info(); }
  void* stream(int rank) const override { return at(rank).stream(); }
  void* alloc(std::size_t bytes, BufferRole role, int rank) override {
    void* p = at(rank).allocate(bytes);
    buffers_.push_back({p, bytes, role, rank});
    allocated_ += static_cast<double>(bytes);
    peak_ = std::max(peak_, allocated_);
    return p;
  }
  void fill_random(void* data, std::size_t count, ElementType type, double lo, double hi, int rank) override {
    at(rank).fill_random(data, count, type, lo, hi, mix64(seed_ + ++fills_));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, int rank) override {
    at(rank).copy_to_host(dst, src, bytes);
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes, int rank) override {
    at(rank).copy_to_device(dst, src, bytes);
  }
  void synchronize(int rank) override { at(rank).synchronize(); }
  std::uint64_t seed() const override { return seed_; }

  void synchronize_all() {
    for (auto* d : ranks_) d->synchronize();
  }
  void poison_outputs() {
    for (const auto& b : buffers_)
      if (b.role == BufferRole::output) ranks_[b.rank]->poison(b.data, b.bytes);
    synchronize_all();
  }
  void release_all() noexcept {
    for (const auto& b : buffers_) ranks_[b.rank]->release(b.data);
    buffers_.clear();
    allocated_ = 0;
  }
  double allocated() const { return allocated_; }
  double peak() const { return peak_; }

 private:
  struct Buffer {
    void* data;
    std::size_t bytes;
    BufferRole role;
    int rank;
  };
  Device& at(int rank) const {
    if (rank < 0 || rank >= static_cast<int>(ranks_.size()))
      throw Error("rank " + std::to_string(rank) + " out of range (the case has " + std::to_string(ranks_.size()) + ")");
    return *ranks_[rank];
  }
  std::vector<Device*> ranks_;
  const Params& params_;
  std::uint64_t seed_;
  std::uint64_t fills_ = 0;
  std::vector<Buffer> buffers_;
  double allocated_ = 0, peak_ = 0;
};

bool looks_like_oom(const std::string& message) {
  return message.find("out of memory") != std::string::npos || message.find("OUT_OF_MEMORY") != std::string::npos ||
         message.find("ALLOC_FAILED") != std::string::npos;
}

// How long one sample should last: long enough that timer resolution and per-sample overhead vanish,
// and, on a GPU, that a sample spans the millisecond-scale swings of the clock under its power limit
// (single 1.6 ms bf16 GEMMs measured 2.5% noise on an H200; the work itself is the same each time).
double target_sample_seconds(DeviceKind kind, bool graph) {
  if (kind == DeviceKind::cpu) return 1e-3;
  return graph ? 1e-3 : 2e-3;
}

// Warm-up lasts at least this long. A GPU's power controller answers a heavy kernel within about 0.2 s:
// after a 50 ms warm-up, the first 150 ms of an H200's fp16 4096^3 samples ran 5-10% faster than the
// rest, at boost clock.
double min_warmup_seconds(DeviceKind kind) { return kind == DeviceKind::cpu ? 0.05 : 0.25; }

// --energy: each rank's energy counter polled on a thread, started before the warm-up so that finding
// the counter (loading NVML, the first time in a process) never leaves the device idle between the
// warm-up and the samples; empty (the reason in r.energy_note) where a rank has none, and then the samples
// are not lengthened for it either.
std::vector<std::unique_ptr<EnergyPoller>> start_energy_pollers(Result& r, const std::vector<Device*>& ranks,
                                                                const MeasureOptions& o) {
  if (o.energy_seconds <= 0) return {};
  if (o.cold) {
    r.energy_note = "not with --cold: each sample's cache flush would be booked to its run";
    return {};
  }
  std::vector<std::unique_ptr<EnergyPoller>> pollers;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    std::string why;
    auto read = ranks[rank]->energy_counter(why);
    if (!read) {
      r.energy_note = (ranks.size() > 1 ? "rank " + std::to_string(rank) + ": " : std::string()) + why;
      return {};
    }
    // Every 0.5 ms: a step's moment is then known to well under 1% of the H200's 100 ms update interval.
    pollers.push_back(std::make_unique<EnergyPoller>(std::move(read), std::chrono::microseconds(500)));
  }
  return pollers;
}

// Each rank's energy per run over its own window of the samples, summed (as its power is). A sample whose
// stream hold timed out is not among the spans, but its hold's spin and its runs are in the window.
void record_energy(Result& r, std::vector<std::unique_ptr<EnergyPoller>>& pollers, const std::vector<SampleSpan>& spans,
                   int hold_timeouts_while_sampling) {
  std::vector<std::vector<CounterStep>> steps;
  for (auto& poller : pollers) steps.push_back(poller->stop());  // all stopped before any is judged
  if (hold_timeouts_while_sampling > 0) {
    r.energy_note = "a stream hold timed out during the samples: its device time is in the window, not in the runs";
    return;
  }
  double joules = 0, watts = 0, window = 0, busy = 1;
  for (std::size_t rank = 0; rank < steps.size(); ++rank) {
    std::string why;
    const std::optional<EnergyFigure> figure = energy_per_run(steps[rank], spans, &why);
    if (!figure) {
      r.energy_note = (steps.size() > 1 ? "rank " + std::to_string(rank) + ": " : std::string()) + why;
      return;
    }
    joules += figure->joules_per_run;
    watts += figure->mean_watts;
    window = std::max(window, figure->window_seconds);
    busy = std::min(busy, figure->busy_fraction);
  }
  r.energy_per_run_j = joules;
  r.mean_power_w = watts;
  r.energy_window_s = window;
  r.energy_busy_fraction = busy;
}

void run_timed(Result& r, const BenchmarkSpec& b, Case& c, HostContext& ctx, const std::vector<Device*>& ranks,
               const MeasureOptions& o) {
  const DeviceKind kind = ranks.front()->info().kind;
  auto run_once = [&] { c.run(ctx); };
  TimingOptions timing{o.cold, false, kind == DeviceKind::cuda};
  auto timer = ranks.front()->make_timer(ranks, run_once, timing);
  std::vector<std::unique_ptr<EnergyPoller>> pollers = start_energy_pollers(r, ranks, o);
  // A hold that times out with a single launch behind it was not released because the host was stuck
  // in that launch: a profiler (Nsight Compute) serialises launches. Time without the hold from then on.
  auto abandon_hold = [&] {
    timing.hold = false;
    timer = ranks.front()->make_timer(ranks, run_once, timing);
    if (timing.graph) timer->time(r.runs_per_sample);  // instantiates the graph outside the samples
    r.hold_abandoned = true;
  };

  // Warm-up: until the time per run has settled (clocks up, caches and libraries warm). Runs are
  // batched, doubling until a batch lasts one target sample, so timer resolution does not pass for noise.
  const double target = target_sample_seconds(kind, false);
  // At most this many runs are queued behind the stream hold: a full launch queue would block the
  // host until the hold times out (a cuBLAS call may be several launches).
  const int cap = kind == DeviceKind::cuda ? 64 : 100000;
  std::vector<double> warm;
  int batch = 1;
  const auto warm_start = Clock::now();
  int cap_now = cap;
  while (true) {
    const SampleTime sample = timer->time(batch);
    r.warmup_iterations += batch;
    const double elapsed = seconds_since(warm_start);
    if (sample.hold_timed_out) {  // more launches than the queue holds: queue fewer from now on
      ++r.hold_timeouts;
      if (batch == 1) abandon_hold();
      cap_now = std::max(1, batch / 2);
      batch = cap_now;
      warm.clear();
      if (elapsed >= o.warmup_max) break;
      continue;
    }
    const double seconds = sample.seconds;
    warm.push_back(seconds / batch);
    if (elapsed >= o.warmup_max) break;
    if (seconds < target && batch < cap_now && !o.cold) {
      batch = std::min(batch * 2, cap_now);
      warm.clear();  // settle on batches of the final size only
      continue;
    }
    if (warmup_settled(warm) && elapsed >= min_warmup_seconds(kind)) break;
  }
  r.phases.warmup = seconds_since(warm_start);
  const double per_run = quantile(std::vector<double>(warm.end() - std::min<std::size_t>(warm.size(), 5), warm.end()), 0.5);

  const bool graph_allowed = kind == DeviceKind::cuda && ranks.size() == 1 && b.spec->timing.graphable;
  r.graph = graph_allowed && (o.graph == GraphMode::on || (o.graph == GraphMode::automatic && per_run < 20e-6));
  r.cold = o.cold;
  const int runs_cap = r.graph ? 10000 : cap_now;
  r.runs_per_sample = o.runs_per_sample > 0 ? o.runs_per_sample
                      : o.cold               ? 1
                                             : std::clamp(static_cast<int>(std::ceil(target_sample_seconds(kind, r.graph) /
                                                                                     std::max(per_run, 1e-9))),
                                                          1, runs_cap);
  if (r.graph) {
    timing.graph = true;
    timer = ranks.front()->make_timer(ranks, run_once, timing);
    timer->time(r.runs_per_sample);  // instantiates the graph outside the samples
  }

  // Samples until the noise is under its bound, or time is up. Throttled samples are dropped at the
  // end (drop_throttled), against the highest clock the samples reached.
  std::vector<SampleSpan> spans;
  const int hold_timeouts_before_sampling = r.hold_timeouts;
  const double min_time = pollers.empty() ? o.min_time : std::max(o.min_time, o.energy_seconds);
  const double max_time = pollers.empty() ? o.max_time : longest_sampling_seconds(o);
  const auto start = Clock::now();
  std::vector<double> times, clocks;
  double sum = 0, sum_squares = 0;
  const auto min_samples = std::max<std::size_t>(static_cast<std::size_t>(b.spec->timing.min_samples), 2);
  while (true) {
    const SampleTime s = timer->time(r.runs_per_sample);
    const double elapsed = seconds_since(start);
    if (s.hold_timed_out) {
      ++r.hold_timeouts;
      // One launch (a graph, or a single run) cannot fill the launch queue: see abandon_hold.
      if (r.graph || r.runs_per_sample == 1 || o.runs_per_sample > 0) {
        abandon_hold();
      } else {
        r.runs_per_sample = std::max(1, r.runs_per_sample / 2);
      }
      if (elapsed >= max_time && times.size() >= 3) break;
      if (elapsed >= 4 * max_time && times.empty())
        throw Error("every sample's stream hold timed out (" + std::to_string(r.hold_timeouts) + " times)");
      continue;
    }
    if (!pollers.empty()) spans.push_back({steady_seconds(), s.seconds, r.runs_per_sample});
    const double t = s.seconds / r.runs_per_sample;
    times.push_back(t);
    if (s.clock_mhz > 0) clocks.push_back(s.clock_mhz);
    if (s.clock_spans_sample) ++r.samples_with_mean_clock;
    sum += t;
    sum_squares += t * t;
    const double n = static_cast<double>(times.size());
    const bool enough_samples = times.size() >= min_samples;
    // max_time ends sampling once there are enough samples; a case too slow for even that many in
    // four times max_time stops at three.
    if (elapsed >= max_time && (enough_samples || (elapsed >= 4 * max_time && times.size() >= 3))) break;
    if (enough_samples && elapsed >= min_time) {
      const double mean = sum / n;
      const double variance = std::max(0.0, (sum_squares - n * mean * mean) / (n - 1));
      if (std::sqrt(variance) / mean <= o.noise_bound) break;
    }
  }
  r.phases.sampling = seconds_since(start);
  if (!pollers.empty()) record_energy(r, pollers, spans, r.hold_timeouts - hold_timeouts_before_sampling);
  if (!clocks.empty()) r.mean_clock_mhz = std::accumulate(clocks.begin(), clocks.end(), 0.0) / clocks.size();
  ThrottleSplit kept = drop_throttled(times, clocks, o.clock_floor);
  r.throttled_samples = kept.dropped;
  r.samples = std::move(kept.times);
  r.sample_clocks_mhz = std::move(kept.clocks_mhz);
  r.stats = summarize(r.samples);
  if (r.sample_clocks_mhz.size() == r.samples.size())
    r.noise_at_fixed_clock = noise_at_fixed_clock(r.samples, r.sample_clocks_mhz);
  // A clock moving under the power limit is the device's behaviour: where it is known, the noise held
  // against the bound is what is left at a fixed clock.
  const SampleQuality quality = assess_samples(r.samples, o.noise_bound,
                                               std::isnan(r.noise_at_fixed_clock) ? -1.0 : r.noise_at_fixed_clock);
  if (quality.noisy) r.quality_reason = quality.reason;

  if (o.profile_runs > 0 && kind == DeviceKind::cuda) {
    const auto profile_start = Clock::now();
    // Samples' worth of launches through the timer, so a graph-timed case is profiled inside its graph
    // (back to back, as it was timed) rather than as separate launches.
    const int launches = std::max(r.runs_per_sample, 1);
    r.profile = profile_kernels([&] { timer->run_untimed(launches); }, o.profile_runs);
    scale_per_run(r.profile, 1.0 / launches);
    r.phases.profile = seconds_since(profile_start);
  }
}

// A work figure that cannot be a count of anything is the case's bug: rates and the roofline built on
// it would be nonsense that looks like a measurement.
void check_work(const Work& w) {
  auto check = [](const char* what, double v) {
    if (!std::isfinite(v) || v < 0)
      throw Error(std::string("work() gave ") + what + " = " + std::to_string(v) + " (must be finite and not negative)");
  };
  check("flops", w.flops);
  check("bytes", w.bytes);
  check("items", w.items);
  for (const auto& rate : w.rates) check(("rate '" + rate.name + "'").c_str(), rate.value);
}

// After a failed case: each device clears its error or resets, and the result says what happened.
// A case's figures: numbers become the result's counters, texts its facts.
void keep_figures(Result& r, const std::vector<Figure>& figures) {
  for (const Figure& f : figures) {
    if (f.is_text) r.case_facts.push_back({f.name, f.text});
    else r.case_counters.push_back({f.name, f.number});
  }
}

void recover_devices(Result& r, const std::vector<Device*>& ranks) {
  for (auto* d : ranks) {
    try {
      if (auto note = d->recover(); !note.empty()) r.message += " [" + note + "]";
    } catch (const std::exception& e) {
      r.message += std::string(" [recovery failed: ") + e.what() + "]";
    }
  }
}

double driver_used_total(const std::vector<Device*>& ranks) {
  double used = 0;
  for (auto* d : ranks) used += d->driver_used_bytes();
  return used;
}

}  // namespace

std::string device_label(const std::vector<Device*>& ranks) {
  if (ranks.front()->info().kind == DeviceKind::cpu) return "cpu";
  std::string s = "cuda:";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]->info().index);
  return s;
}

Result unmeasured_result(const BenchmarkSpec& b, const std::vector<Device*>& ranks) {
  Result r;
  r.name = b.name;
  r.plugin = b.plugin;
  r.case_name = b.spec->name;
  r.ladder = b.spec->ladder;
  r.sweep_axis = b.spec->sweep_axis;
  r.params = b.params;
  r.precision = b.spec->precision;
  r.device = device_label(ranks);
  r.tolerance = b.spec->tolerance > 0 ? b.spec->tolerance : default_tolerance(b.spec->precision);
  return r;
}

std::string Result::gate_word(bool gate_enabled) const {
  if (!gate_enabled) return "off";
  if (status == Status::gate_failed) return "fail";
  return gate_checked ? "pass" : "none";
}

std::string Result::label(bool gate_enabled) const {
  // A result that was not timed has no place on the roofline, so no bound.
  std::string s = passed() ? std::string("bound=") + to_string(point.bound) + " " : std::string();
  s += std::string("precision=") + to_string(precision) + " gate=" + gate_word(gate_enabled) +
       " mode=" + (cold ? "cold" : "hot");
  if (graph) s += " timing=graph";
  if (cache_resident) s += " data=cache";
  if (!ladder.empty()) s += " ladder=" + ladder;
  if (noisy()) s += " noisy";
  return s;
}

Result measure(const BenchmarkSpec& b, const std::vector<Device*>& ranks, const Ceilings& ceilings,
               const MeasureOptions& o) {
  Result r = unmeasured_result(b, ranks);
  double used_before = 0;
  try {
    // A plugin built for other GPUs would fail in its first kernel; say so once, by architecture, instead.
    if (b.cuda_probe)
      for (Device* rank : ranks)
        if (auto refusal = rank->architecture_refusal(b.cuda_probe, b.plugin)) {
          r.status = Status::refused;
          r.message = *refusal;
          return r;
        }
    used_before = driver_used_total(ranks);
  } catch (const std::exception& e) {
    // The device failed before this case touched it (on an H200 after an in-process reset following a
    // sticky error, cudaSetDevice answered "busy or unavailable"): this case fails and says so.
    r.status = Status::error;
    r.message = std::string("the device could not be used: ") + e.what();
    recover_devices(r, ranks);
    return r;
  }

  const auto begin = Clock::now();
  auto phase_start = begin;
  auto end_phase = [&](double& phase) {
    const auto now = Clock::now();
    phase = std::chrono::duration<double>(now - phase_start).count();
    phase_start = now;
  };
  HostContext ctx(ranks, r.params, o.seed ^ mix64(std::hash<std::string>{}(b.name)));
  std::unique_ptr<Case> c;
  bool set_up = false;
  try {
    c = b.spec->make(r.params);
    if (!c) throw Error("make() returned no case");
    c->setup(ctx);
    set_up = true;
    // After setup: a case may only know its work once it knows its ranks.
    r.work = c->work();
    check_work(r.work);
    ctx.synchronize_all();
    end_phase(r.phases.setup);
    if (o.gate) {
      ctx.poison_outputs();
      c->run(ctx);
      ctx.synchronize_all();
      const Check check = c->check(ctx);
      r.gate_checked = true;
      r.gate_error = check.rel_l2_error;
      // NaN (an output not finite) and infinity (a zero reference) fail the gate below; a negative
      // error is no distance at all: the check is broken.
      if (check.rel_l2_error < 0)
        throw Error("check() returned a negative relative error (" + std::to_string(check.rel_l2_error) + ")");
      const bool within = check.rel_l2_error <= r.tolerance;  // false for NaN
      if (!within || !check.passed_extra) {
        r.status = Status::gate_failed;
        char buf[160];
        std::snprintf(buf, sizeof buf, "gate failed: relative L2 error %.3g, tolerance %.3g (%s)", check.rel_l2_error,
                      r.tolerance, to_string(r.precision));
        r.message = buf;
        if (!check.detail.empty()) r.message += ": " + check.detail;
      }
    }
    keep_figures(r, c->figures());
    end_phase(r.phases.gate);
    if (r.status == Status::ok) {
      run_timed(r, b, *c, ctx, ranks, o);
      const double cache = ranks.front()->cache_bytes();
      r.cache_resident = !r.cold && cache > 0 && r.work.bytes > 0 && r.work.bytes <= cache;
      r.point = place(r.work, r.stats.median, r.precision, ceilings);
      for (const auto& rate : r.work.rates) r.rates.push_back({rate.name, rate.value / r.stats.median});
    }
    r.memory.allocated = ctx.allocated();
    r.memory.peak = ctx.peak();
    r.memory.reserved = ctx.allocated();  // the host allocates directly: nothing is cached
    r.memory.driver_used = ranks.front()->driver_used_bytes();
  } catch (const NotApplicable& e) {
    r.status = Status::not_applicable;
    r.message = e.what();
  } catch (const OutOfMemory& e) {
    r.status = Status::out_of_memory;
    r.message = e.what();
  } catch (const std::exception& e) {
    r.status = looks_like_oom(e.what()) ? Status::out_of_memory : Status::error;
    r.message = e.what();
  } catch (...) {
    r.status = Status::error;
    r.message = "the case threw a non-standard exception";
  }
  if (c && set_up) {
    try {
      for (auto* d : ranks) d->synchronize();
      c->teardown(ctx);
    } catch (const std::exception& e) {
      if (r.status == Status::ok) r.status = Status::error;
      r.message += (r.message.empty() ? "" : "; ") + std::string("teardown failed: ") + e.what();
    } catch (...) {
      if (r.status == Status::ok) r.status = Status::error;
      r.message += (r.message.empty() ? "" : "; ") + std::string("teardown threw a non-standard exception");
    }
  }
  c.reset();
  ctx.release_all();
  if (used_before > 0) {
    try {
      for (auto* d : ranks) d->synchronize();
      const double leaked = driver_used_total(ranks) - used_before;
      if (leaked > kLeakReportBytes) {
        r.memory.leaked = leaked;
        char note[160];
        std::snprintf(note, sizeof note, "leaked %.0f MiB of device memory (used after teardown vs before setup)",
                      leaked / (1024.0 * 1024.0));
        r.message += (r.message.empty() ? "" : "; ") + std::string(note);
      }
    } catch (const std::exception&) {
      // a device that cannot say is recovered below, or was never used
    }
  }
  if (r.status != Status::ok && r.status != Status::not_applicable && r.status != Status::refused)
    recover_devices(r, ranks);
  r.phases.total = seconds_since(begin);
  return r;
}

}  // namespace roofbench
