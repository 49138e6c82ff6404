// The results file: every Result so far plus the run's context, rewritten atomically after each
// benchmark so that a crash later in the run leaves a valid file (format: docs/results-format.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "measure.hpp"
#include "plugin_loader.hpp"
#include "roofline.hpp"

namespace roofbench {

struct NotRun {
  std::string benchmark;  // a case name or a benchmark name
  std::string reason;
};

struct RunContext {
  std::string executable, suite, device_name, device_kind, device_key;
  std::string driver;      // the GPU driver's version (NVML); empty on the CPU or without NVML
  int device_index = 0;
  int llc_level = 0;       // the device's last-level cache, "data in cache" is judged against: 2 (L2), 3 (L3)
  double llc_bytes = 0;
  bool gate = true, cold = false;
  std::string isolation = "process";  // --isolation
  Ceilings measured;
  std::string measured_at;
  std::vector<std::string> ceilings_how;
  std::optional<Datasheet> datasheet;
  std::vector<std::pair<std::string, std::string>> plugins;  // name, path
  std::vector<std::size_t> plugin_case_counts;
  std::vector<LoadFailure> load_failures;
  std::vector<NotRun> not_run;
  std::vector<std::string> notes;  // e.g. sweep knees
  // A launcher started one roofbench per GPU (rank_mode.hpp): its name, and every rank's host in rank order.
  std::string launcher;
  std::vector<std::string> rank_hosts;
};

class JsonWriter;
// One benchmark's entry of the results file: Google Benchmark's fields, the Result's figures (summaries_of)
// under their names, and roofbench's object (what each figure is, the case, the profile, the samples).
void write_entry(JsonWriter& j, const Result& r, int repetition_index, int repetitions, bool gate_enabled);

class ResultsFile {
 public:
  ResultsFile(std::string path, RunContext context) : path_(std::move(path)), context_(std::move(context)) {}
  void add(Result r, int repetition_index, int repetitions);
  void add_not_run(NotRun n) { context_.not_run.push_back(std::move(n)); }
  void add_note(std::string note) { context_.notes.push_back(std::move(note)); }
  // Writes the whole file to a temporary beside it and renames it over the old one.
  void write(bool complete) const;
  const std::string& path() const { return path_; }
  const std::vector<Result>& results() const { return results_; }
  std::string to_json(bool complete) const;

 private:
  std::string path_;
  RunContext context_;
  std::vector<Result> results_;
  std::vector<std::pair<int, int>> repetitions_;  // index, count
};

// "2026-11-29T12:00:00+00:00"
std::string utc_timestamp();

// Throws std::runtime_error saying why when no file can be created in `dir` (created if missing):
// checked before anything is measured, so a run never measures what it cannot keep.
void check_results_dir_writable(const std::string& dir);

// Creates <dir>/<stem>.json, or <stem>-2.json, -3, ... when that exists (another run in the same
// second), exclusively, and returns its path: two runs never write one file.
std::string claim_run_file(const std::string& dir, const std::string& stem);

}  // namespace roofbench
