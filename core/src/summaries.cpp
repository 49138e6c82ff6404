#include "summaries.hpp"

#include <cmath>
#include <set>

namespace roofbench {

namespace {

const std::set<std::string>& reserved_names() {
  static const std::set<std::string> names = {
      // Google Benchmark's entry fields (1.7 and 1.8)
      "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
      "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "label",
      "error_occurred", "error_message", "skipped", "skip_message", "aggregate_name", "aggregate_unit",
      "bytes_per_second", "items_per_second", "big_o", "rms", "complexity", "memory",
      // roofbench's own, in the entry and in its summaries
      "roofbench", "hold_abandoned", "FLOP/s", "B/s", "AI", "roof_pct", "time_median", "time_q1", "time_q3",
      "noise", "samples", "warmup_iters", "runs_per_sample", "sm_clock_mhz", "throttled_samples", "hold_timeouts",
      "samples_with_mean_clock", "noise_at_fixed_clock", "energy_per_run", "power", "energy_window_s", "energy_busy_fraction", "gate_rel_err", "gate_tolerance", "peak_mem", "leaked_mem"};
  return names;
}

}  // namespace

bool is_reserved_entry_name(const std::string& name) { return reserved_names().count(name) > 0; }

std::vector<Summary> summaries_of(const Result& r) {
  std::vector<Summary> s;
  std::set<std::string> used;
  auto host = [&](std::string name, double value, std::string unit, std::string description, bool integer = false) {
    used.insert(name);
    s.push_back({std::move(name), value, std::move(unit), std::move(description), integer, false});
  };
  if (r.passed()) {
    host("FLOP/s", r.point.flops_per_s, "FLOP/s", "floating-point operations per second (counted FLOPs / median time)");
    host("B/s", r.point.bytes_per_s, "B/s", "minimum bytes moved per second (counted bytes / median time)");
    host("AI", r.point.intensity, "FLOP/B", "arithmetic intensity: counted FLOPs / minimum bytes");
    host("roof_pct", 100.0 * r.point.roof_fraction, "%", "achieved / attainable under the measured roofline");
  }
  // Plugin figures after the host's, renamed when their name is taken.
  std::vector<Summary> plugin;
  auto from_plugin = [&](const std::string& name, double value, std::string unit, std::string description) {
    plugin.push_back({name, value, std::move(unit), std::move(description), false, true});
  };
  if (r.passed()) {
    if (!r.work.item_name.empty())
      from_plugin(r.work.item_name + "/s", r.work.items / r.stats.median, r.work.item_name + "/s",
                  r.work.item_name + " per second (counted per run / median time)");
    for (const auto& rate : r.rates) from_plugin(rate.name, rate.value, "1/s", "the case's own rate (amount per run / median time)");
    host("time_median", r.stats.median, "s", "median time of one run over the kept samples");
    host("time_q1", r.stats.q1, "s", "first quartile of the time of one run");
    host("time_q3", r.stats.q3, "s", "third quartile of the time of one run");
    host("noise", r.stats.noise, "1", "relative noise: stdev / mean of the samples");
    host("samples", static_cast<double>(r.stats.count), "count", "timed samples kept", true);
    host("warmup_iters", r.warmup_iterations, "count", "runs of the warm-up", true);
    host("runs_per_sample", r.runs_per_sample, "count", "runs timed together in one sample", true);
    if (r.mean_clock_mhz > 0) {
      host("sm_clock_mhz", r.mean_clock_mhz, "MHz", "mean SM clock over the samples");
      host("throttled_samples", r.throttled_samples, "count", "samples dropped for a throttled clock", true);
      host("hold_timeouts", r.hold_timeouts, "count", "samples dropped because the stream hold timed out", true);
      host("samples_with_mean_clock", r.samples_with_mean_clock, "count", "samples whose clock is the mean over the sample", true);
      if (!std::isnan(r.noise_at_fixed_clock))
        host("noise_at_fixed_clock", r.noise_at_fixed_clock, "1", "relative noise left after fitting time = a + b / clock");
    }
    if (std::isfinite(r.energy_per_run_j)) {
      host("energy_per_run", r.energy_per_run_j, "J",
           "device energy per run: the energy counter's rise over a window of the samples, over the runs in it");
      host("power", r.mean_power_w, "W", "mean device power over that window");
      host("energy_window_s", r.energy_window_s, "s", "the window's length, between two steps of the energy counter");
      host("energy_busy_fraction", r.energy_busy_fraction, "1",
           "the samples' device time over the window: the rest (between samples) is booked to the runs too");
    }
  }
  if (r.gate_checked) host("gate_rel_err", r.gate_error, "1", "relative L2 error of the gate run against the reference");
  host("gate_tolerance", r.tolerance, "1", "the largest relative L2 error the gate accepts");
  host("peak_mem", r.memory.peak, "B", "high-water mark of the case's allocations through the host");
  if (r.memory.leaked > 0) host("leaked_mem", r.memory.leaked, "B", "device memory used after teardown and not before setup");
  for (const auto& c : r.case_counters) from_plugin(c.name, c.value, "", "the case's counter");

  for (auto& p : plugin) {
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

}  // namespace roofbench
