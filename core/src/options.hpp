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

struct Options {
  bool help = false;
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
  std::vector<std::string> benchmark_args;  // passed to Google Benchmark, argv[0] first
  bool has_benchmark_filter = false;
  bool lists_benchmark_tests = false;
  int benchmark_repetitions = 1;  // from --benchmark_repetitions, for the results file
};

Options parse_options(int argc, const char* const* argv);
std::string usage_text();

}  // namespace roofbench
