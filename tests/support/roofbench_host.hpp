// What the end-to-end tests need around the real roofbench executable: where things were built, a
// fixture that runs roofbench on the CPU into a fresh results folder, and a reader for results files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "process.hpp"
#include "scratch_dir.hpp"

namespace roofbench::test_support {

// Paths fixed at build time (tests/CMakeLists.txt).
struct BuildPaths {
  static const std::string roofbench;        // the host executable
  static const std::string good_plugins;     // folders of the test plugins
  static const std::string wrong_plugins;
  static const std::string broken_plugins;
  static const std::string crash_plugins;
  static const std::string mixed_plugins;   // one case per kind of console line
  static const std::string killer_plugins;  // plugins that kill the process loading them
  static const std::string hostile_plugins;  // cases that lie about their work or send escape sequences
  static const std::string ceilings_cache;   // ROOFBENCH_CACHE_DIR of every run
  static const std::string reports;          // reports/ of the source tree
  static const std::string python;
  static const std::string results_reader;   // read_results.py
};

struct BenchmarkEntry {
  std::string name, status, gate, label, error_message;
  std::set<std::string> counters;  // the headline counters present with a finite value
  std::set<std::string> keys;      // every key of the entry
};

struct ResultsSummary {
  std::map<std::string, std::string> context;               // suite, complete, gate
  std::vector<std::pair<std::string, std::string>> load_failures;  // path, reason
  std::vector<BenchmarkEntry> benchmarks;

  const BenchmarkEntry* find(const std::string& name) const;
  std::vector<std::string> names() const;
};

// The lines `script` (Python, given the file as sys.argv[1]) prints about a results file, each split at its tabs:
// for a test that wants figures read_results does not keep. Fails the current test where the script fails.
std::vector<std::vector<std::string>> python_rows(const char* script, const std::string& file);

// Reads a results file through Python's strict JSON parser (NaN or Infinity anywhere is an error).
// Fails the current test and returns nothing when the file is missing or not valid.
std::optional<ResultsSummary> read_results(const std::filesystem::path& file);

class RoofbenchTest : public ::testing::Test {
 protected:
  // roofbench --device cpu --max-time 0.05 --results-dir <fresh>/roofbench-results ARGS, with the shared
  // ceilings cache and no plugin folders from this process's environment.
  ProcessResult roofbench(const std::vector<std::string>& args) const;
  // The same with the results going to `results_dir` instead.
  ProcessResult roofbench_into(const std::filesystem::path& results_dir, const std::vector<std::string>& args) const;
  std::filesystem::path results_dir() const { return scratch_ / "roofbench-results"; }
  std::filesystem::path latest_results() const { return results_dir() / "latest.json"; }

  ScratchDir scratch_;
};

}  // namespace roofbench::test_support
