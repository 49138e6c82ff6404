// Which benchmarks this run measures, and on which devices: Google Benchmark's filter applied the way
// Google Benchmark applies it, and each case's device need matched against the devices chosen.
#pragma once

#include <regex.h>

#include <string>
#include <vector>

#include "benchmark_set.hpp"
#include "device.hpp"
#include "results.hpp"

namespace roofbench {

// Google Benchmark appends this to every benchmark registered with Iterations(1) and UseManualTime(),
// and matches its filter against the name with it.
inline constexpr const char* kGoogleBenchmarkSuffix = "/iterations:1/manual_time";

// Filters longer than this are refused: regex engines recurse on long patterns (a 20,000-character
// alternation overflowed std::regex's stack).
inline constexpr std::size_t kMaxFilterLength = 4096;
// Throws UsageError when `filter` is longer than kMaxFilterLength, naming it as `source`.
void check_filter_length(const std::string& filter, const std::string& source);

// --benchmark_filter: a POSIX extended regex searched in the name as roofbench shows it and in the name
// Google Benchmark matches (with kGoogleBenchmarkSuffix), so both 'n:4096$' and '.../manual_time$' select;
// a leading '-' negates it; empty or "all" matches everything.
class NameFilter {
 public:
  // Throws UsageError for a bad or too long filter; `source` names it in the message (a suite's file:line).
  explicit NameFilter(std::string filter, const std::string& source = "--benchmark_filter");
  ~NameFilter();
  NameFilter(const NameFilter&) = delete;
  NameFilter& operator=(const NameFilter&) = delete;
  bool matches(const std::string& benchmark_name) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  bool negate_ = false;
  regex_t regex_{};
};

struct DeviceChoice {
  Device* device = nullptr;       // where single-device cases run
  std::vector<Device*> gpus;      // what multi-GPU cases use
  bool have_gpus = false;         // any GPU was found at all
  std::string why_no_gpu;         // when none was
  int world_size = 1;             // > 1: a launcher started this many processes; ranks that work together are one each
};

struct Selection {
  std::vector<BenchmarkSpec> benchmarks;        // can run here (the filter still decides what runs)
  std::vector<std::vector<Device*>> ranks;      // their devices, same order
  std::vector<NotRun> not_run;                  // matching benchmarks that cannot run here, and why
  std::vector<std::pair<NotRun, int>> not_run_by_case;  // the same, one line per case, with a count
};

Selection select_benchmarks(const std::vector<BenchmarkSpec>& all, const DeviceChoice& choice, const NameFilter& filter);

}  // namespace roofbench
