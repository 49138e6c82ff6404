// roofbench's own command line. Google Benchmark's flags (--benchmark_*) pass through untouched;
// anything else unknown is a usage error (exit code 2).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "measure.hpp"

namespace roofbench {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Isolation { process, none };

// Seconds one benchmark may take in all (setup, gate, warm-up, samples, profile) unless --timeout or its
// case says otherwise: the slowest shipped benchmarks (gpt's and micro's largest GEMMs) take about 15 s
// with the default 5 s of sampling, and sampling may last 4 x --max-time for a slow case (the stopping rule,
// sampling.hpp).
double default_timeout_seconds(const MeasureOptions& m);

struct Options {
  bool help = false;
  bool help_markdown = false;  // --help-markdown: the text of docs/cli.md
  bool list = false;
  bool recalibrate = false;
  std::optional<std::string> device;        // "cpu", "cuda:N"
  std::optional<std::vector<int>> gpus;     // for multi-GPU cases; empty optional: all
  std::vector<std::string> plugin_dirs;
  std::vector<std::string> suite_dirs;
  std::optional<std::string> suite;
  std::string results_dir = "roofbench-results";
  bool write_results = true;
  MeasureOptions measure;
  bool max_time_given = false;
  bool energy_given = false;  // --energy, even =0: the suite's energy key does not apply
  bool min_time_given = false;
  Isolation isolation = Isolation::process;
  std::optional<double> timeout_s;          // --timeout; 0: none
  double rendezvous_timeout_s = 300;        // --rendezvous-timeout: ranks started by a launcher

  std::vector<std::string> benchmark_args;  // passed to Google Benchmark, argv[0] first
};

// One row of the options table: the parser, --help and docs/cli.md (--help-markdown) all read it.
enum class Takes { nothing, value, optional_inline_value };
struct OptionSpec {
  std::string flag;          // "--device"
  std::string argument;      // what its value looks like ("cpu|cuda:N", "[=N]"); empty when it takes none
  Takes takes = Takes::nothing;
  std::string default_text;  // empty where there is none to say
  std::string help;
  void (*apply)(Options& options, const std::string& flag, const std::optional<std::string>& value) = nullptr;
  bool hidden = false;       // not in --help or docs/cli.md
};
const std::vector<OptionSpec>& option_table();

Options parse_options(int argc, const char* const* argv);
// A suite's max_time and energy, each where the command line gave none (--energy=0 is given: off).
void apply_suite_sampling(Options& o, std::optional<double> max_time, std::optional<double> energy_seconds);
std::string usage_text();
std::string usage_markdown();  // docs/cli.md

}  // namespace roofbench
