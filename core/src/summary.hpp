// One figure of a Result, self-describing (nvbench's model: name, value, unit, meaning and a hint saying
// how to show it), and the names of the host's figures. A Result carries its figures as a list of these,
// so the wire, the results file, Google Benchmark's counters and the console need no field per figure:
// the host's figures are declared once, in kFigures (summaries.cpp).
#pragma once

#include <string>
#include <string_view>

namespace roofbench {

// How a figure is shown (the console's format; every printer reads the same word).
enum class Hint { plain, duration, rate, intensity, percentage, ratio, count, bytes, frequency, energy, power };

// Where a figure is written, a set of these bits: the results entry (a key of its own, described under
// roofbench.summaries), Google Benchmark's counters, the CTest measurements
// (reports/roofbench_reports/ctest_measurements.py lists them; tests/cmake/headline_check.cmake holds it so).
namespace written {
inline constexpr unsigned results_file = 1, counters = 2, ctest = 4;
inline constexpr unsigned everywhere_but_ctest = results_file | counters;
}  // namespace written

struct Summary {
  std::string name;
  double value = 0;
  std::string unit;         // "s", "FLOP/s", "B/s", "B", "%", "1" (a ratio), "count", "MHz", ...
  std::string description;  // one line
  Hint hint = Hint::plain;
  bool from_plugin = false;  // a case's counter or rate (namespaced when its name is taken)
  unsigned written = written::everywhere_but_ctest;
  // A figure of the timing: shown only while the result's status is ok (a result the parent fails after
  // it was timed, as implausible, keeps the figure in its list but shows it nowhere).
  bool timed = false;
  bool integer() const { return hint == Hint::count; }  // written without a fraction
};

// The host's figures by name, for the code that reads one (Result::figure): kFigures declares each under
// its constant, and a test holds every constant to a line of the table, so no reader can misspell one.
namespace fig {
inline constexpr std::string_view flops_per_s = "FLOP/s", bytes_per_s = "B/s", intensity = "AI", roof_pct = "roof_pct";
inline constexpr std::string_view time_median = "time_median", time_q1 = "time_q1", time_q3 = "time_q3", noise = "noise";
inline constexpr std::string_view samples = "samples", warmup_iters = "warmup_iters", runs_per_sample = "runs_per_sample";
inline constexpr std::string_view sm_clock_mhz = "sm_clock_mhz", throttled_samples = "throttled_samples";
inline constexpr std::string_view hold_timeouts = "hold_timeouts", samples_with_mean_clock = "samples_with_mean_clock";
inline constexpr std::string_view noise_at_fixed_clock = "noise_at_fixed_clock";
inline constexpr std::string_view energy_per_run = "energy_per_run", power = "power", energy_window_s = "energy_window_s";
inline constexpr std::string_view energy_busy_fraction = "energy_busy_fraction";
inline constexpr std::string_view kernel_time = "kernel_time", event_minus_kernel = "event_minus_kernel";
inline constexpr std::string_view event_minus_kernel_pct = "event_minus_kernel_pct";
inline constexpr std::string_view gate_rel_err = "gate_rel_err", gate_tolerance = "gate_tolerance";
inline constexpr std::string_view peak_mem = "peak_mem", leaked_mem = "leaked_mem";
inline constexpr std::string_view measured_bytes = "measured_bytes", measured_dram_read = "measured_dram_read";
inline constexpr std::string_view measured_dram_write = "measured_dram_write", measured_l2_bytes = "measured_l2_bytes";
inline constexpr std::string_view measured_flops = "measured_flops", measured_ai = "measured_ai";
inline constexpr std::string_view measured_bytes_ratio = "measured_bytes_ratio", measured_flops_ratio = "measured_flops_ratio";
inline constexpr std::string_view counters_s = "counters_s";
inline constexpr std::string_view slowest_rank = "slowest_rank", rank_spread_pct = "rank_spread_pct";
// Every constant above, for the test that holds them to the table.
inline constexpr std::string_view all[] = {
    flops_per_s, bytes_per_s, intensity, roof_pct, time_median, time_q1, time_q3, noise, samples, warmup_iters,
    runs_per_sample, sm_clock_mhz, throttled_samples, hold_timeouts, samples_with_mean_clock, noise_at_fixed_clock,
    energy_per_run, power, energy_window_s, energy_busy_fraction, kernel_time, event_minus_kernel,
    event_minus_kernel_pct, gate_rel_err, gate_tolerance, peak_mem, leaked_mem,
    measured_bytes, measured_dram_read, measured_dram_write, measured_l2_bytes, measured_flops, measured_ai,
    measured_bytes_ratio, measured_flops_ratio, counters_s, slowest_rank, rank_spread_pct};
}  // namespace fig

}  // namespace roofbench
