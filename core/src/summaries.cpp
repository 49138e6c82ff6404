#include "summaries.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace roofbench {

namespace {

using R = const Measurement&;

constexpr unsigned kShown = written::everywhere_but_ctest;
constexpr unsigned kHeadline = written::everywhere_but_ctest | written::ctest;

// The host's figures, in the order they are written. Declaring a figure is one line here (its name a fig::
// constant, summary.hpp) plus the Measurement field its value is read from: result_of makes each a Summary
// of the Result, which crosses the wire as a list and which every printer (results file, Google
// Benchmark's counters, console) reads; the docs' tables come from this table.
const std::vector<HostFigure> kFigures = {
    {fig::flops_per_s.data(), "FLOP/s", Hint::rate, When::passed, kHeadline, "floating-point operations per second (counted FLOPs / median time)",
     [](R r) { return r.point.flops_per_s; }},
    {fig::bytes_per_s.data(), "B/s", Hint::rate, When::passed, kHeadline, "minimum bytes moved per second (counted bytes / median time)",
     [](R r) { return r.point.bytes_per_s; }},
    {fig::intensity.data(), "FLOP/B", Hint::intensity, When::passed, kShown, "arithmetic intensity: counted FLOPs / minimum bytes",
     [](R r) { return r.point.intensity; }},
    {fig::roof_pct.data(), "%", Hint::percentage, When::passed, kHeadline, "achieved / attainable under the measured roofline",
     [](R r) { return 100.0 * r.point.roof_fraction; }},
    {fig::time_median.data(), "s", Hint::duration, When::passed, kHeadline, "median time of one run over the kept samples",
     [](R r) { return r.stats.median; }},
    {fig::time_q1.data(), "s", Hint::duration, When::passed, kShown, "first quartile of the time of one run", [](R r) { return r.stats.q1; }},
    {fig::time_q3.data(), "s", Hint::duration, When::passed, kShown, "third quartile of the time of one run", [](R r) { return r.stats.q3; }},
    {fig::noise.data(), "1", Hint::ratio, When::passed, kShown, "relative noise: stdev / mean of the samples", [](R r) { return r.stats.noise; }},
    {fig::samples.data(), "count", Hint::count, When::passed, kShown, "timed samples kept",
     [](R r) { return static_cast<double>(r.stats.count); }},
    {fig::warmup_iters.data(), "count", Hint::count, When::passed, kShown, "runs of the warm-up",
     [](R r) { return static_cast<double>(r.warmup_iterations); }},
    {fig::runs_per_sample.data(), "count", Hint::count, When::passed, kShown, "runs timed together in one sample",
     [](R r) { return static_cast<double>(r.runs_per_sample); }},
    {fig::sm_clock_mhz.data(), "MHz", Hint::frequency, When::clocked, kShown, "mean SM clock over the samples",
     [](R r) { return r.mean_clock_mhz; }},
    {fig::throttled_samples.data(), "count", Hint::count, When::clocked, kShown, "samples dropped for a throttled clock",
     [](R r) { return static_cast<double>(r.throttled_samples); }},
    {fig::hold_timeouts.data(), "count", Hint::count, When::clocked, kShown, "samples dropped because the stream hold timed out",
     [](R r) { return static_cast<double>(r.hold_timeouts); }},
    {fig::samples_with_mean_clock.data(), "count", Hint::count, When::clocked, kShown, "samples whose clock is the mean over the sample",
     [](R r) { return static_cast<double>(r.samples_with_mean_clock); }},
    {fig::noise_at_fixed_clock.data(), "1", Hint::ratio, When::clock_fitted, kShown,
     "relative noise left after fitting time = a + b / clock", [](R r) { return r.noise_at_fixed_clock; }},
    {fig::energy_per_run.data(), "J", Hint::energy, When::energy, kShown,
     "device energy per run: the energy counter's rise over a window of the samples, over the runs in it",
     [](R r) { return r.energy_per_run_j; }},
    {fig::power.data(), "W", Hint::power, When::energy, kShown, "mean device power over that window", [](R r) { return r.mean_power_w; }},
    {fig::energy_window_s.data(), "s", Hint::duration, When::energy, kShown, "the window's length, between two steps of the energy counter",
     [](R r) { return r.energy_window_s; }},
    {fig::energy_busy_fraction.data(), "1", Hint::ratio, When::energy, kShown,
     "the samples' device time over the window: the rest (between samples) is booked to the runs too",
     [](R r) { return r.energy_busy_fraction; }},
    {fig::kernel_time.data(), "s", Hint::duration, When::kernel_timed, kShown,
     "the kernels' own GPU time of one run (CUPTI; the union of their intervals), median over the traced samples",
     [](R r) { return r.kernel_time.seconds; }},
    {fig::event_minus_kernel.data(), "s", Hint::duration, When::kernel_timed, kShown,
     "time_median minus kernel_time: what the events hold besides the kernels (launches, gaps between them)",
     [](R r) { return event_minus_kernel(r.stats.median, r.kernel_time); }},
    {fig::event_minus_kernel_pct.data(), "%", Hint::percentage, When::kernel_timed, kShown, "event_minus_kernel over kernel_time",
     [](R r) { return 100.0 * event_minus_kernel_fraction(r.stats.median, r.kernel_time); }},
    {fig::gate_rel_err.data(), "1", Hint::ratio, When::gate_checked, kShown, "relative L2 error of the gate run against the reference",
     [](R r) { return r.gate_error; }},
    {fig::gate_tolerance.data(), "1", Hint::ratio, When::always, kShown, "the largest relative L2 error the gate accepts",
     [](R r) { return r.tolerance; }},
    {fig::peak_mem.data(), "B", Hint::bytes, When::always, kShown, "high-water mark of the case's allocations through the host",
     [](R r) { return r.memory.peak; }},
    {fig::leaked_mem.data(), "B", Hint::bytes, When::leaked, kShown, "device memory used after teardown and not before setup",
     [](R r) { return r.memory.leaked; }},
    {fig::measured_bytes.data(), "B", Hint::bytes, When::counted, kShown, "DRAM bytes read and written per run, counted by the hardware",
     [](R r) { return r.counters.total.dram_bytes(); }},
    {fig::measured_dram_read.data(), "B", Hint::bytes, When::counted, kShown, "DRAM bytes read per run, counted",
     [](R r) { return r.counters.total.dram_read; }},
    {fig::measured_dram_write.data(), "B", Hint::bytes, When::counted, kShown,
     "DRAM bytes written per run, counted (as lines leave L2: what is still there when the run ends is not)",
     [](R r) { return r.counters.total.dram_write; }},
    {fig::measured_l2_bytes.data(), "B", Hint::bytes, When::counted, kShown, "bytes the L2 served per run, counted",
     [](R r) { return r.counters.total.l2_bytes; }},
    {fig::measured_flops.data(), "FLOP", Hint::plain, When::counted, kShown,
     "floating-point operations executed per run, counted (an FMA as 2, tensor-core work included)",
     [](R r) { return r.counters.total.flops(); }},
    {fig::measured_ai.data(), "FLOP/B", Hint::intensity, When::counted, kShown, "measured_flops / measured_bytes",
     [](R r) { return counter_ratio(r.counters.total.flops(), r.counters.total.dram_bytes()); }},
    {fig::measured_bytes_ratio.data(), "1", Hint::ratio, When::counted_bytes, kShown, "measured_bytes / the modelled minimum bytes",
     [](R r) { return counter_ratio(r.counters.total.dram_bytes(), r.work.bytes); }},
    {fig::measured_flops_ratio.data(), "1", Hint::ratio, When::counted_flops, kShown, "measured_flops / the counted (modelled) FLOPs",
     [](R r) { return counter_ratio(r.counters.total.flops(), r.work.flops); }},
    {fig::counters_s.data(), "s", Hint::duration, When::counters_asked, kShown, "seconds the counters' pass took (its replays)",
     [](R r) { return r.counters.seconds; }},
    {fig::slowest_rank.data(), "rank", Hint::count, When::ranked, kShown,
     "the rank whose time is the benchmark's (the slowest; one process per GPU, roofbench under a launcher)",
     [](R r) { return slowest_rank_of(r); }},
    {fig::rank_spread_pct.data(), "%", Hint::percentage, When::ranked, kShown,
     "how much slower the slowest rank's time_median is than the fastest rank's", [](R r) { return rank_spread_percent(r); }},
};

// Whether the measurement made the figure. Whether the result passed is asked where a figure is shown
// (timed(), Summary::timed): the parent may fail a timed result (implausible) after it crossed.
bool made(When when, const Measurement& m) {
  const bool clocked = m.mean_clock_mhz > 0;
  switch (when) {
    case When::always:
    case When::passed: return true;
    case When::clocked: return clocked;
    case When::clock_fitted: return clocked && !std::isnan(m.noise_at_fixed_clock);
    case When::energy: return std::isfinite(m.energy_per_run_j);
    case When::kernel_timed: return m.kernel_time.measured();
    case When::gate_checked: return m.gate_checked;
    case When::leaked: return m.memory.leaked > 0;
    case When::counted: return m.counters.collected();
    case When::counted_bytes: return m.counters.collected() && m.work.bytes > 0;
    case When::counted_flops: return m.counters.collected() && m.work.flops > 0;
    case When::counters_asked: return m.counters.seconds > 0;
    case When::ranked:
      return m.rank_figures.size() > 1 && std::all_of(m.rank_figures.begin(), m.rank_figures.end(),
                                                      [](const RankFigures& k) { return k.status == Status::ok; });
  }
  return false;
}

bool timed(When when) {
  return when == When::passed || when == When::clocked || when == When::clock_fitted || when == When::energy ||
         when == When::kernel_timed || when == When::ranked;
}

const char* when_text(When when) {
  switch (when) {
    case When::always: return "always";
    case When::passed: return "timed";
    case When::clocked: return "timed, GPU (its clock is read)";
    case When::clock_fitted: return "timed, GPU, clock fit made";
    case When::energy: return "timed, `--energy`, a device with an energy counter";
    case When::kernel_timed: return "timed, `--kernel-time`, CUPTI traced the kernels";
    case When::gate_checked: return "gate ran";
    case When::leaked: return "over 256 MiB left after teardown";
    case When::counted: return "`--counters`, a GPU case whose counters were read";
    case When::counted_bytes: return "counted, the case models bytes";
    case When::counted_flops: return "counted, the case models FLOPs";
    case When::counters_asked: return "`--counters`, the pass ran";
    case When::ranked: return "timed on every rank, one process per GPU (torchrun, srun, mpirun)";
  }
  return "?";
}

const std::set<std::string>& reserved_names() {
  static const std::set<std::string> names = [] {
    std::set<std::string> n = {
        // Google Benchmark's entry fields (1.7 and 1.8)
        "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
        "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "label",
        "error_occurred", "error_message", "skipped", "skip_message", "aggregate_name", "aggregate_unit",
        "bytes_per_second", "items_per_second", "big_o", "rms", "complexity", "memory",
        // roofbench's own entry fields beside its figures
        "roofbench", "hold_abandoned"};
    for (const HostFigure& f : kFigures) n.insert(f.name);
    return n;
  }();
  return names;
}

// The case's own figures (items per second, rates, counters, gate counters), under their own names.
void add_plugin_figures(std::vector<Summary>& s, const Measurement& m) {
  auto add = [&](const std::string& name, double value, std::string unit, std::string description, Hint hint, bool is_timed) {
    s.push_back({name, value, std::move(unit), std::move(description), hint, true, written::everywhere_but_ctest, is_timed});
  };
  if (!m.work.item_name.empty())
    add(m.work.item_name + "/s", m.work.items / m.stats.median, m.work.item_name + "/s",
        m.work.item_name + " per second (counted per run / median time)", Hint::rate, true);
  for (const auto& rate : m.rates)
    add(rate.name, rate.value, "1/s", "the case's own rate (amount per run / median time)", Hint::rate, true);
  for (const auto& c : m.case_counters) add(c.name, c.value, "", "the case's counter", Hint::plain, false);
}

}  // namespace

double slowest_rank_of(const ResultParts& r) {
  const auto slowest = std::max_element(r.rank_figures.begin(), r.rank_figures.end(),
                                        [](const RankFigures& a, const RankFigures& b) { return a.time_median < b.time_median; });
  return slowest == r.rank_figures.end() ? std::numeric_limits<double>::quiet_NaN() : slowest->rank;
}
double rank_spread_percent(const ResultParts& r) {
  const auto [fastest, slowest] = std::minmax_element(
      r.rank_figures.begin(), r.rank_figures.end(),
      [](const RankFigures& a, const RankFigures& b) { return a.time_median < b.time_median; });
  if (fastest == r.rank_figures.end() || !(fastest->time_median > 0)) return std::numeric_limits<double>::quiet_NaN();
  return 100.0 * (slowest->time_median - fastest->time_median) / fastest->time_median;
}

const std::vector<HostFigure>& host_figures() { return kFigures; }

bool is_reserved_entry_name(const std::string& name) { return reserved_names().count(name) > 0; }

Result result_of(const Measurement& m) {
  Result r;
  static_cast<ResultParts&>(r) = m;
  for (const HostFigure& f : kFigures)
    if (made(f.when, m)) r.summaries.push_back({f.name, f.value(m), f.unit, f.description, f.hint, false, f.written, timed(f.when)});
  add_plugin_figures(r.summaries, m);
  r.bound = m.point.bound;
  r.attainable_flops = m.point.attainable;
  r.memory_roof = m.point.memory_roof;
  return r;
}

void add_rank_summaries(Result& r) {
  Measurement m;
  static_cast<ResultParts&>(m) = r;
  for (const HostFigure& f : kFigures)
    if (f.when == When::ranked && made(f.when, m))
      r.summaries.push_back({f.name, f.value(m), f.unit, f.description, f.hint, false, f.written, timed(f.when)});
}

double Result::figure(std::string_view name) const {
  for (const Summary& s : summaries)
    if (!s.from_plugin && s.name == name) return s.value;
  return std::numeric_limits<double>::quiet_NaN();
}

std::vector<Summary> summaries_of(const Result& r) {
  std::vector<Summary> s;
  std::set<std::string> used;
  for (const Summary& f : r.summaries) {
    if (f.from_plugin || (f.timed && !r.passed())) continue;
    used.insert(f.name);
    s.push_back(f);
  }
  // Plugin figures after the host's, renamed when their name is taken.
  for (Summary p : r.summaries) {
    if (!p.from_plugin || (p.timed && !r.passed())) continue;
    if (is_reserved_entry_name(p.name) || used.count(p.name)) {
      std::string renamed = "case." + p.name;
      for (int n = 2; used.count(renamed) || is_reserved_entry_name(renamed); ++n) renamed = "case." + p.name + "." + std::to_string(n);
      p.description += " (renamed from '" + p.name + "': a host field has that name)";
      p.name = renamed;
    }
    used.insert(p.name);
    s.push_back(std::move(p));
  }
  return s;
}

const Summary* headline_rate(const std::vector<Summary>& summaries, const Result& r) {
  const bool counts_items = !r.work.item_name.empty() && r.work.items > 0;
  const std::string item_unit = r.work.item_name + "/s";
  for (const auto& s : summaries) {
    if (counts_items ? s.from_plugin && s.unit == item_unit : s.name == (r.work.flops > 0 ? "FLOP/s" : "B/s")) return &s;
  }
  return nullptr;
}

static std::string where_text(unsigned where) {
  std::string text;
  auto add = [&](unsigned bit, const char* name) {
    if (where & bit) text += (text.empty() ? "" : ", ") + std::string(name);
  };
  add(written::results_file, "results");
  add(written::counters, "counters");
  add(written::ctest, "CTest");
  return text;
}

std::string figures_markdown() {
  std::string md = "| figure | unit | written when | written to | meaning |\n|---|---|---|---|---|\n";
  for (const HostFigure& f : kFigures)
    md += std::string("| `") + f.name + "` | " + f.unit + " | " + when_text(f.when) + " | " + where_text(f.written) + " | " +
          f.description + " |\n";
  md += "| `<items>/s`, the case's rates and counters | | the case reports them | " + where_text(kShown) +
        (" (the items/s also CTest) | the plugin's own figures, `from_plugin: true` under `roofbench.summaries`, "
         "renamed `case.<name>` when a name above is taken |\n");
  return md;
}

}  // namespace roofbench
