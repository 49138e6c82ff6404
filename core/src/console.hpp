// What a person reads while roofbench runs: one table line per benchmark (Google Benchmark's default
// console is replaced; its json and csv formats and --benchmark_out are left alone), numbers formatted
// for people, why no GPU is used, and a closing summary of the run. Every figure comes from the Result's
// summaries (summaries.hpp), under the names the results file uses.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "results.hpp"
#include "session.hpp"
#include "summaries.hpp"

namespace benchmark {
class BenchmarkReporter;
}

namespace roofbench {

// ---- numbers for people ----

// 3-4 significant digits in ns, us, ms or s: "12.34 us", "213.0 us", "1.338 ms", "2.500 s".
std::string format_seconds(double seconds);
// A rate with an SI prefix, 3 significant digits: "4.11 TB/s", "748 TFLOP/s"; a unit that is a word gets
// the prefix as a word of its own: "6.20 M elements/s".
std::string format_rate(double value, const std::string& unit);
// Binary prefixes: "768 B", "1.50 MiB".
std::string format_bytes(double bytes);
std::string format_joules(double joules);  // "14.8 J", "3.21 mJ", "850 uJ"
// A figure by its hint (a duration, a rate with its unit, a ratio, a percentage, a count, bytes, ...): never
// an SI prefix on a ratio, a percentage or a count.
std::string format_figure(const Summary& summary);
// The first line of `text`, its runs of white space made one space, cut to `width` characters with
// "..." when longer.
std::string shorten(const std::string& text, std::size_t width);
// A demangled kernel name as a table shows it: its return type, namespaces and parameters dropped, its
// template arguments kept ("gemv_kernel<4, 1>"), where its place among the others is all the name says.
std::string kernel_label(const std::string& demangled);

// Every line the console prints is kept within this many characters.
inline constexpr std::size_t kConsoleWidth = 120;
// `text`'s words in lines of at most `width` characters, the first line starting with `first_indent`,
// the others with `rest_indent`; a word wider than a line is broken after a '/' or ',' where it has one.
std::string wrap_text(const std::string& text, std::size_t width, const std::string& first_indent = "",
                      const std::string& rest_indent = "");

// ---- why no GPU is used ----

// What was found when the CUDA runtime gave no device.
struct GpuAbsence {
  bool driver_library_loads = false;  // libcuda.so.1 (the NVIDIA driver's user-space library) can be loaded
  std::string driver_library_error;   // dlerror() when it cannot
  bool device_nodes = false;          // some /dev/nvidia* exists
  int driver_cuda_version = 0;        // what the driver supports (cudaDriverGetVersion), 1000 * major + 10 * minor
  int runtime_cuda_version = 0;       // what roofbench was built with (CUDART_VERSION)
  bool runtime_says_no_device = false;  // cudaErrorNoDevice, or no error and no device
  bool runtime_says_driver_too_old = false;  // cudaErrorInsufficientDriver
  std::string runtime_error;          // the runtime's own words, when it failed
  std::optional<std::string> cuda_visible_devices;  // the variable, when set: it can hide every device
};
// One sentence with the real cause: no driver installed, no device nodes, a driver too old for this
// build, no device, or the runtime's own error when none of these fits.
std::string explain_no_gpu(const GpuAbsence& found);

// Said once before the table when Google Benchmark's library is a debug build (Debian's is): its own
// warning is about its timing loop, which roofbench does not use.
std::string debug_library_note();

// ---- the table ----

struct TableSettings {
  bool gate_enabled = true;
  std::size_t name_width = 40;  // name_column_width of the longest benchmark name
};
// The name column for names up to `longest_name` characters: at most what leaves the figures within
// kConsoleWidth; a longer name goes on a line of its own above its figures (the results keep it whole).
std::size_t name_column_width(std::size_t longest_name);
std::string table_header(const TableSettings& settings);
// One benchmark's outcome, labelled `label` (its name, or "rep 2/5" under a name said above): its figures
// when it passed, else what happened and why, shortened (the results file has the whole message). One
// line (no newline), more where the label is wider than the name column or the notes do not fit.
std::string table_row(const std::string& label, const Session::Outcome& outcome, const TableSettings& settings);
// Over repetitions of one benchmark: the median of their medians and their spread.
std::string repetitions_row(const std::string& label, const std::vector<Result>& passed, int repetitions,
                            const TableSettings& settings);
// A --profile pass: the kernels that take the time, most first (several lines, each ending in a newline).
std::string profile_text(const std::string& benchmark, const Result& r);
// --kernel-time's line: kernel_time beside the event time, or why there is none; and, where the event time
// exceeds kernel_time by over kLaunchCostNoteFraction or (without kernel_time) a GPU run is under
// kLaunchCostNoteSeconds, that the event time includes launch cost (kernel_time.hpp). Empty (no line) when
// there is nothing to say; else ends in a newline.
std::string kernel_time_text(const std::string& benchmark, const Result& r);
// A --counters pass: the counted totals against the model, the verdict where the ratio says something
// ("moves 2.3x its minimum bytes"), the kernels where there are several; or why there are no counters.
std::string counters_text(const std::string& benchmark, const Result& r);

// ---- the closing summary ----

// What the run did, counted as outcomes arrive: each outcome that counts as a failure lands in exactly one
// of gate_failed, errors, crashed, timed_out or refused, so failures() is the run's failure count.
class RunTally {
 public:
  void add(const std::string& benchmark, const Session::Outcome& outcome);
  // Matching benchmarks that cannot run on the devices chosen.
  void add_cannot_run(const std::vector<NotRun>& not_run);

  int ran = 0, passed = 0, gate_failed = 0, errors = 0, crashed = 0, timed_out = 0;
  // Passed, but the samples do not make one number (counted in passed too): benchmark, why.
  std::vector<std::pair<std::string, std::string>> noisy;
  // Passed on several ranks whose times lie more than kRanksApartPercent apart: benchmark, which rank and how far.
  std::vector<std::pair<std::string, std::string>> ranks_apart;
  static constexpr double kRanksApartPercent = 10;
  int ended_sweep_out_of_memory = 0;  // out of memory in a sweep: ends the sweep, not a failure
  int refused = 0;  // not run, the plugin built for other GPUs: listed with the not run, and a failure
  int failed() const { return gate_failed + errors + crashed + timed_out; }
  // The run's one count of failures (the exit code reads it): the outcomes that count as a failure
  // (counts_as_failure, session.hpp), run or refused.
  int failures() const { return failed() + refused; }
  struct Reason {
    int benchmarks = 0;
    std::set<std::string> cases;
  };
  std::map<std::string, Reason> not_run;  // by reason
  std::vector<std::string> notes;         // sweeps' knees
};

struct SummarySettings {
  std::optional<std::string> results_path;  // as it should be shown (relative to the working folder when under it)
  bool results_lost = false;
  std::string report_command;  // the roofbench-report to suggest
  std::string why_no_gpu;      // said once already: reasons that quote it say "see above" instead
  std::size_t plugins_not_loaded = 0;
  int repetitions = 1;
};
// Several lines, each ending in a newline.
std::string closing_summary(const RunTally& tally, const SummarySettings& settings);

// ---- the console as Google Benchmark's display reporter ----

// The host records every outcome here as it comes (for the summary, whatever the format); with the
// console format, the reporter made by make_reporter prints each benchmark's line when Google Benchmark
// reports it (after its repetitions), reading the recorded outcome, not Google Benchmark's counters.
class Console {
 public:
  Console(TableSettings table, std::vector<std::string> preamble, int repetitions)
      : table_(table), preamble_(std::move(preamble)), repetitions_(repetitions) {}
  void record(const std::string& benchmark, const Session::Outcome& outcome);
  const RunTally& tally() const { return tally_; }
  RunTally& tally() { return tally_; }

  // Writes to `out`; lives as long as this Console is used by it.
  std::unique_ptr<benchmark::BenchmarkReporter> make_reporter(std::ostream& out);

 private:
  friend class TableReporter;
  void print_context(std::ostream& out, const std::string& host_line);
  void print_runs_of(std::ostream& out, const std::string& benchmark, bool aggregate);

  TableSettings table_;
  std::vector<std::string> preamble_;
  int repetitions_ = 1;
  bool displaying_ = false;  // a reporter prints the table
  // The header waits for the first row: the worker's one-off lines (measuring the device's ceilings) come
  // between the context and the first result, and would otherwise split the header from its rows.
  bool header_pending_ = false;
  RunTally tally_;
  std::map<std::string, std::deque<Session::Outcome>> unprinted_;
  std::map<std::string, std::vector<Result>> passed_by_name_;  // for the repetitions line
  // Under repetitions, the row's label: "NAME rep i/N" or "NAME median"; where that is wider than the name
  // column, the name is printed on its own line (once while its rows follow one another) and the label
  // is "  rep i/N", "  median" or nothing.
  std::string row_label(std::ostream& out, const std::string& benchmark, const std::string& suffix);
  std::map<std::string, int> repetitions_printed_;
  std::string named_above_;  // the benchmark whose name was last printed on a line of its own
};

}  // namespace roofbench
