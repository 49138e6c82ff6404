#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "counter_observer.hpp"
#include "launch_strategy.hpp"
#include "sample_loop.hpp"
#include "summaries.hpp"

namespace roofbench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The plugin's view of the host for one benchmark. Owns every allocation the case makes.
class HostContext final : public Context {
 public:
  // `fill_seed`: where fill_random's seeds start (fill_seed_of).
  HostContext(const std::vector<Device*>& ranks, const Params& params, std::uint64_t seed, std::uint64_t fill_seed,
              const RankWorld& world)
      : ranks_(ranks), params_(params), seed_(seed), fill_seed_(fill_seed), world_(world) {}
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
    at(rank).fill_random(data, count, type, lo, hi, mix64(fill_seed_ + ++fills_));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, int rank) override {
    at(rank).copy_to_host(dst, src, bytes);
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes, int rank) override {
    at(rank).copy_to_device(dst, src, bytes);
  }
  void synchronize(int rank) override { at(rank).synchronize(); }
  std::uint64_t seed() const override { return seed_; }
  int world_size() const override { return world_.spans_processes() ? world_.world_size : ranks(); }
  int first_rank() const override { return world_.spans_processes() ? world_.first_rank : 0; }
  std::vector<std::string> exchange(const std::string& blob) override {
    return world_.spans_processes() ? world_.exchange(blob) : std::vector<std::string>{blob};
  }
  bool counting_kernels() const override { return roofbench::counting_kernels(); }
  const RankWorld& world() const { return world_; }

  void synchronize_all() {
    for (auto* d : ranks_) d->synchronize();
  }
  void poison_outputs() {
    for (const auto& b : buffers_)
      if (b.role == BufferRole::output) ranks_[b.rank]->poison(b.data, b.bytes);
    synchronize_all();
  }
  void release_all() noexcept { release_from(0); }
  // Gives back the buffers allocated since there were `first` (the copies of a rotation that is not used).
  void release_from(std::size_t first) noexcept {
    for (std::size_t i = first; i < buffers_.size(); ++i) {
      ranks_[buffers_[i].rank]->release(buffers_[i].data);
      allocated_ -= static_cast<double>(buffers_[i].bytes);
    }
    buffers_.resize(std::min(first, buffers_.size()));
    if (buffers_.empty()) allocated_ = 0;
  }
  std::size_t buffer_count() const { return buffers_.size(); }
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
  std::uint64_t seed_, fill_seed_;
  const RankWorld& world_;
  std::uint64_t fills_ = 0;
  std::vector<Buffer> buffers_;
  double allocated_ = 0, peak_ = 0;
};

// Whether this process's ranks work together with ranks in other processes (a collective under a
// launcher): they must then run the case equally often, so they take their timing decisions together.
bool together_across_processes(const BenchmarkSpec& b, const RankWorld& world) {
  return b.spec->device.all_selected_gpus && world.spans_processes();
}

// Where a benchmark's fill_random seeds start: at its seed, except where its ranks work together with ranks
// in other processes (a collective under a launcher). Every process then starts its own distance along,
// by its global rank, as the ranks of one process draw each their own values (every call its own seed): each
// rank contributes other inputs, so a gate that sums them sees a contribution missing or counted twice.
// Global rank 0 draws what one process draws; Context::seed() stays the same on every rank.
std::uint64_t fill_seed_of(const BenchmarkSpec& b, std::uint64_t seed, const RankWorld& world) {
  constexpr std::uint64_t kRankStride = 0x9e3779b97f4a7c15ull;  // 2^64 / golden ratio: ranks far apart
  if (!together_across_processes(b, world)) return seed;
  return seed + kRankStride * static_cast<std::uint64_t>(world.first_rank);
}

bool looks_like_oom(const std::string& message) {
  return message.find("out of memory") != std::string::npos || message.find("OUT_OF_MEMORY") != std::string::npos ||
         message.find("ALLOC_FAILED") != std::string::npos;
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

// A case's figures: numbers become the result's counters, texts its facts.
void keep_figures(Measurement& r, const std::vector<Figure>& figures) {
  for (const Figure& f : figures) {
    if (f.is_text) r.case_facts.push_back({f.name, f.text});
    else r.case_counters.push_back({f.name, f.number});
  }
}

// After a failed case: each device clears its error or resets, and the result says what happened.
void recover_devices(Measurement& r, const std::vector<Device*>& ranks) {
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

Measurement unmeasured(const BenchmarkSpec& b, const std::vector<Device*>& ranks) {
  Measurement r;
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

Result unmeasured_result(const BenchmarkSpec& b, const std::vector<Device*>& ranks) { return result_of(unmeasured(b, ranks)); }

std::string Result::gate_word(bool gate_enabled, GateView view) const {
  if (view == GateView::entry && status != Status::ok) return status == Status::gate_failed ? "fail" : "error";
  if (!gate_enabled) return "off";
  if (status == Status::gate_failed) return "fail";
  return gate_checked ? "pass" : "none";
}

std::string Result::label(bool gate_enabled) const {
  // A result that was not timed has no place on the roofline, so no bound.
  std::string s = passed() ? std::string("bound=") + to_string(bound) + " " : std::string();
  s += std::string("precision=") + to_string(precision) + " gate=" + gate_word(gate_enabled) +
       " mode=" + (cold ? "cold" : "hot");
  if (cold_copies > 0) s += " cold=rotate";
  if (graph) s += " timing=graph";
  if (cache_resident) s += " data=cache";
  if (!ladder.empty()) s += " ladder=" + ladder;
  if (noisy()) s += " noisy";
  return s;
}

namespace {

// Whether the case may run on its devices at all: a plugin built for other GPUs would fail in its first
// kernel, so it is refused once, by architecture, instead; a device that failed before this case touched
// it (on an H200 after an in-process reset following a sticky error, cudaSetDevice answered "busy or
// unavailable") fails the case, and says so. *used_before: the devices' used memory, for the leak check.
bool ready_to_measure(Measurement& r, const BenchmarkSpec& b, const std::vector<Device*>& ranks, double* used_before) {
  try {
    if (b.cuda_probe)
      for (Device* rank : ranks)
        if (auto refusal = rank->architecture_refusal(b.cuda_probe, b.plugin)) {
          r.status = Status::refused;
          r.message = *refusal;
          return false;
        }
    *used_before = driver_used_total(ranks);
    return true;
  } catch (const std::exception& e) {
    r.status = Status::error;
    r.message = std::string("the device could not be used: ") + e.what();
    recover_devices(r, ranks);
    return false;
  }
}

// The correctness gate: one run on outputs poisoned with NaN, held against the case's reference.
void run_gate(Measurement& r, Case& c, HostContext& ctx) {
  ctx.poison_outputs();
  c.run(ctx);
  ctx.synchronize_all();
  const Check check = c.check(ctx);
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
    std::snprintf(buf, sizeof buf, "relative L2 error %.3g, tolerance %.3g (%s)", check.rel_l2_error,
                  r.tolerance, to_string(r.precision));
    r.message = buf;
    if (!check.detail.empty()) r.message += ": " + check.detail;
  }
}

// Ranks that work together across processes rotate over as many copies each: the runs of a sample are whole
// rounds over them, so other counts would run the collective unequally often and leave one rank waiting in
// it. Each sends the copies its own cache needs, its free memory and the bytes of its set; all take
// agree_on_rotation's, which every rank computes from the same blobs alike. A blob that is no choice fails the
// case on every rank alike.
void agree_on_copies(ColdRotation& cold, double free_bytes, HostContext& ctx) {
  const std::vector<std::string> all =
      ctx.exchange(rotation_choice_blob({cold.copies, free_bytes, cold.copy_bytes, cold.flush_reason}));
  std::vector<RankRotationChoice> choices;
  for (std::size_t p = 0; p < all.size(); ++p) {
    std::optional<RankRotationChoice> c = read_rotation_choice(all[p]);
    if (!c) throw Error("rank " + std::to_string(p) + " sent no count of copies");
    choices.push_back(std::move(*c));
  }
  cold = agree_on_rotation(choices, cold.copy_bytes);
}

// After the copies were made (or not) on ranks that work together across processes: where one rank's did not
// fit, every rank flushes, naming it, and gives back the copies it made (those since `made_from`).
void agree_copies_fit(ColdRotation& cold, HostContext& ctx, std::size_t made_from) {
  const std::vector<std::string> all = ctx.exchange(cold.copies > 0 ? std::string("made") : "failed " + cold.flush_reason);
  for (std::size_t p = 0; p < all.size(); ++p) {
    if (all[p] == "made") continue;
    cold.copies = 0;
    cold.flush_reason = "rank " + std::to_string(p) + ": " + all[p].substr(all[p].find(' ') + 1);
    ctx.synchronize_all();
    ctx.release_from(made_from);
    return;
  }
}

// Under --cold: the copies of its inputs a rotating case is timed over, made here after its gate, or why it is
// flushed instead (choose_rotation); the result's fact cold_mode says which. Ranks that work together across
// processes agree on the count before the copies are made, and again on whether they fit.
CopyRotation prepare_rotation(Measurement& r, const BenchmarkSpec& b, Case& c, HostContext& ctx,
                              const std::vector<Device*>& ranks, const MeasureOptions& o) {
  Rotation* rotation = c.rotation();
  Device& device = *ranks.front();
  const bool graph = graph_allowed(o, b.spec->timing, device.info().kind, ranks.size());
  const double free_bytes = device.free_bytes();
  ColdRotation cold = choose_rotation(rotation ? static_cast<double>(rotation->bytes()) : 0, device.cache_bytes(),
                                      free_bytes, graph);
  const bool together = together_across_processes(b, ctx.world());  // with a rotation or not, on every rank alike
  if (together) agree_on_copies(cold, free_bytes, ctx);
  const int agreed = cold.copies;
  const std::size_t made_from = ctx.buffer_count();
  if (agreed > 0) {
    try {
      rotation->make_copies(ctx, cold.copies);
    } catch (const OutOfMemory& e) {
      cold.copies = 0;
      cold.flush_reason = std::string("its copies did not fit: ") + e.what();
    }
  }
  if (together && agreed > 0) agree_copies_fit(cold, ctx, made_from);
  r.cold_copies = cold.copies;
  r.case_facts.push_back({"cold_mode", cold.fact(device.cache_bytes())});
  if (cold.copies == 0) return {};
  return {cold.copies, [rotation](int copy) { rotation->use(copy); }};
}

// After the gate, for ranks that work together across processes: they are timed only where every one
// passed its gate. A rank that stopped alone would leave the others' first timed collective waiting for
// it until the benchmark's timeout (forever without isolation). A rank whose gate passed ends naming the
// first whose gate did not, so the combined result is that rank's.
void agree_to_time(Measurement& r, HostContext& ctx) {
  const std::vector<std::string> gates = ctx.exchange(r.status == Status::ok ? "pass" : "fail");
  if (r.status != Status::ok) return;
  for (std::size_t p = 0; p < gates.size(); ++p)
    if (gates[p] != "pass") throw Error(kEndedByRank + std::to_string(p) + " (its gate failed; no rank was timed)");
}

// The timed runs of a case that passed its gate, and what its median time gives: the roofline point and rates.
void time_and_place(Measurement& r, const BenchmarkSpec& b, Case& c, HostContext& ctx, const std::vector<Device*>& ranks,
                    const Ceilings& ceilings, const MeasureOptions& o) {
  const CopyRotation rotation = o.cold ? prepare_rotation(r, b, c, ctx, ranks, o) : CopyRotation{};
  // Ranks in several processes that work together must run the case equally often: they agree on rank 0's
  // timing decisions. Ranks that each measure on their own decide for themselves, as in one process.
  const bool together = together_across_processes(b, ctx.world());
  time_case(r, b, [&] { c.run(ctx); }, ranks, o, rotation, together ? &ctx.world() : nullptr);
  const double cache = ranks.front()->cache_bytes();
  r.cache_resident = !r.cold && cache > 0 && r.work.bytes > 0 && r.work.bytes <= cache;
  r.point = place(r.work, r.stats.median, r.precision, ceilings, r.cache_resident);
  for (const auto& rate : r.work.rates) r.rates.push_back({rate.name, rate.value / r.stats.median});
}

// The status and message of a case that threw (called in a catch block: rethrows to tell what it was).
void record_failure(Measurement& r) {
  try {
    throw;
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
}

// The case made and set up, and its work known; *set_up once teardown is owed.
void set_up_case(Measurement& r, const BenchmarkSpec& b, std::unique_ptr<Case>& c, bool* set_up, HostContext& ctx,
                 const std::vector<Device*>& ranks) {
  if (ranks.size() == 1) ranks.front()->make_current();
  c = b.spec->make(r.params);
  if (!c) throw Error("make() returned no case");
  c->setup(ctx);
  *set_up = true;
  // After setup: a case may only know its work once it knows its ranks.
  r.work = c->work();
  check_work(r.work);
  ctx.synchronize_all();
}

// set_up_case for ranks that work together across processes, which then meet. A rank whose setup failed
// after the communicators were made (its memory full, say) never reaches the gate's collective, and the others
// would wait in theirs until the timeout: the failed rank is already in its finishing round, so this exchange
// throws on every other rank, naming it. A case not applicable on one rank (NotApplicable) is not applicable
// on every rank: each ends it in step, naming the first rank that found it so, and no rank's worker is stopped.
void set_up_in_step(Measurement& r, const BenchmarkSpec& b, std::unique_ptr<Case>& c, bool* set_up, HostContext& ctx,
                    const std::vector<Device*>& ranks, const std::function<void()>& end_setup) {
  const std::string not_applicable = kNotApplicableBlob;
  std::string verdict = kSetUpBlob;
  try {
    set_up_case(r, b, c, set_up, ctx, ranks);
    end_setup();
  } catch (const NotApplicable& e) {
    verdict = not_applicable + e.what();
  }
  const std::vector<std::string> all = ctx.exchange(verdict);
  for (std::size_t p = 0; p < all.size(); ++p)
    if (all[p].rfind(not_applicable, 0) == 0)
      throw NotApplicable("rank " + std::to_string(p) + ": " + all[p].substr(not_applicable.size()));
}

// Gated and timed, once set up. Ranks that work together across processes agree on whether the case applies
// only at its setup (NotApplicable's place): found later on one rank alone, it fails the case.
void gate_and_time(Measurement& r, const BenchmarkSpec& b, Case& c, HostContext& ctx, const std::vector<Device*>& ranks,
                   const Ceilings& ceilings, const MeasureOptions& o, const std::function<void()>& end_gate) {
  const bool together = together_across_processes(b, ctx.world());
  try {
    if (o.gate) run_gate(r, c, ctx);
    keep_figures(r, c.figures());
    end_gate();
    if (together) agree_to_time(r, ctx);
    if (r.status == Status::ok) time_and_place(r, b, c, ctx, ranks, ceilings, o);
  } catch (const NotApplicable& e) {
    if (!together) throw;
    throw Error(std::string("not applicable after its setup, on this rank alone: ") + e.what());
  }
}

// Made, set up, gated and timed, each phase's seconds in r.phases; *set_up once teardown is owed. What
// throws ends the case with the status it calls for (record_failure).
void run_case(Measurement& r, const BenchmarkSpec& b, std::unique_ptr<Case>& c, bool* set_up, HostContext& ctx,
              const std::vector<Device*>& ranks, const Ceilings& ceilings, const MeasureOptions& o) {
  auto phase_start = Clock::now();
  auto end_phase = [&](double& phase) {
    const auto now = Clock::now();
    phase = std::chrono::duration<double>(now - phase_start).count();
    phase_start = now;
  };
  try {
    const auto end_setup = [&] { end_phase(r.phases.setup); };
    if (together_across_processes(b, ctx.world())) {
      set_up_in_step(r, b, c, set_up, ctx, ranks, end_setup);
    } else {
      set_up_case(r, b, c, set_up, ctx, ranks);
      end_setup();
    }
    gate_and_time(r, b, *c, ctx, ranks, ceilings, o, [&] { end_phase(r.phases.gate); });
    r.memory.allocated = ctx.allocated();
    r.memory.peak = ctx.peak();
    r.memory.reserved = ctx.allocated();  // the host allocates directly: nothing is cached
    r.memory.driver_used = ranks.front()->driver_used_bytes();
  } catch (...) {
    record_failure(r);
  }
}

// The case's teardown, after its devices are idle; a failure there fails a case that had passed.
void tear_down(Measurement& r, Case& c, HostContext& ctx, const std::vector<Device*>& ranks) {
  try {
    for (auto* d : ranks) d->synchronize();
    c.teardown(ctx);
  } catch (const std::exception& e) {
    if (r.status == Status::ok) r.status = Status::error;
    r.message += (r.message.empty() ? "" : "; ") + std::string("teardown failed: ") + e.what();
  } catch (...) {
    if (r.status == Status::ok) r.status = Status::error;
    r.message += (r.message.empty() ? "" : "; ") + std::string("teardown threw a non-standard exception");
  }
}

// Device memory the case did not give back (used after teardown and the host's frees, against before setup).
void report_leak(Measurement& r, const std::vector<Device*>& ranks, double used_before) {
  if (used_before <= 0) return;
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
    // a device that cannot say is recovered after this (measure), or was never used
  }
}

}  // namespace

Measurement take_measurement(const BenchmarkSpec& b, const std::vector<Device*>& ranks, const Ceilings& ceilings,
                             const MeasureOptions& o, const RankWorld& world) {
  Measurement r = unmeasured(b, ranks);
  double used_before = 0;
  if (!ready_to_measure(r, b, ranks, &used_before)) return r;
  const auto begin = Clock::now();
  const std::uint64_t seed = o.seed ^ mix64(std::hash<std::string>{}(b.name));
  HostContext ctx(ranks, r.params, seed, fill_seed_of(b, seed, world), world);
  std::unique_ptr<Case> c;
  bool set_up = false;
  run_case(r, b, c, &set_up, ctx, ranks, ceilings, o);
  if (c && set_up) tear_down(r, *c, ctx, ranks);
  c.reset();
  ctx.release_all();
  report_leak(r, ranks, used_before);
  if (r.status != Status::ok && r.status != Status::not_applicable && r.status != Status::refused)
    recover_devices(r, ranks);
  r.phases.total = seconds_since(begin);
  return r;
}

Result measure(const BenchmarkSpec& b, const std::vector<Device*>& ranks, const Ceilings& ceilings,
               const MeasureOptions& options, const RankWorld& world) {
  return result_of(take_measurement(b, ranks, ceilings, options, world));
}

}  // namespace roofbench
