// Suites: named selections of benchmarks in suites/<name>.suite, one "key = value" per line:
//   description = what the suite is for
//   plugins     = cpu, micro              plugins it needs (an unknown one is an error)
//   filter      = ^cpu/add/               a regex as --benchmark_filter takes; several lines are ORed
//   axis cpu/matmul_naive.n = 64, 128     restrict one case's axis ("cpu/*.n" for every case of cpu)
//   max_time    = 1                       seconds of sampling per benchmark
//   energy      = 1                       --energy's seconds (at least 1), unless the command line says
// '#' starts a comment. Any other key, a bad regex or an unknown plugin is an error naming file:line. A
// filter is compiled as --benchmark_filter is (4096 characters at most); a leading '-' negates it only
// when it is the suite's one filter line. max_time and energy are finite.
#pragma once

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmark_set.hpp"

namespace roofbench {

struct SuiteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Suite {
  std::string name;
  std::string path;
  std::string description;
  std::vector<std::pair<std::string, int>> plugins;  // name, line
  std::vector<std::pair<std::string, int>> filters;  // regex, line
  AxisOverrides axes;
  std::vector<std::pair<std::string, int>> axis_lines;  // key, line: for error messages
  std::optional<double> max_time;
  std::optional<double> energy_seconds;

  // One regex for --benchmark_filter: the suite's filters ORed ("." when it has none).
  std::string combined_filter() const;
  // Throws SuiteError naming file:line for a plugin or axis key that names an unknown plugin.
  void check_plugins(const std::set<std::string>& loaded) const;
  // Throws SuiteError naming file:line for a filter that matches none of `all` (every benchmark of the
  // loaded plugins, whatever device it needs), which the ORed filter would otherwise drop in silence (a
  // renamed axis, a size the axis lacks). A suite without a plugins line may name plugins this build
  // lacks, so only its filters that start with loaded plugins' names (`^nccl/`, `^(cpu|micro)/`: every
  // one loaded) are checked.
  void check_filters(const std::vector<BenchmarkSpec>& all) const;
  // Throws SuiteError naming file:line for an axis line that names a case or an axis none of `all` has,
  // or a value that is not a whole number for an axis whose own values all are (it would fail only
  // when run).
  void check_axes(const std::vector<BenchmarkSpec>& all) const;
  // No filter line: the suite selects every benchmark of every loaded plugin (the host warns).
  bool selects_everything() const { return filters.empty(); }
};

Suite parse_suite(const std::string& path, const std::string& text);
Suite load_suite_file(const std::string& path);
// suites/<name>.suite in each folder, the first that exists; throws SuiteError listing what exists.
Suite find_suite(const std::string& name, const std::vector<std::string>& folders);
std::vector<std::string> list_suites(const std::vector<std::string>& folders);

}  // namespace roofbench
