#include "roofbench_host.hpp"

#include <sstream>

namespace roofbench::test_support {

const std::string BuildPaths::roofbench = ROOFBENCH_TEST_EXECUTABLE;
const std::string BuildPaths::good_plugins = ROOFBENCH_TEST_GOOD_PLUGINS;
const std::string BuildPaths::wrong_plugins = ROOFBENCH_TEST_WRONG_PLUGINS;
const std::string BuildPaths::crash_plugins = ROOFBENCH_TEST_CRASH_PLUGINS;
const std::string BuildPaths::mixed_plugins = ROOFBENCH_TEST_MIXED_PLUGINS;
const std::string BuildPaths::killer_plugins = ROOFBENCH_TEST_KILLER_PLUGINS;
const std::string BuildPaths::hostile_plugins = ROOFBENCH_TEST_HOSTILE_PLUGINS;
const std::string BuildPaths::broken_plugins = ROOFBENCH_TEST_BROKEN_PLUGINS;
const std::string BuildPaths::ceilings_cache = ROOFBENCH_TEST_CEILINGS_CACHE;
const std::string BuildPaths::reports = ROOFBENCH_TEST_REPORTS_DIR;
const std::string BuildPaths::python = ROOFBENCH_TEST_PYTHON;
const std::string BuildPaths::results_reader = ROOFBENCH_TEST_RESULTS_READER;

namespace {

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, separator);) fields.push_back(field);
  if (!line.empty() && line.back() == separator) fields.emplace_back();
  return fields;
}

}  // namespace

const BenchmarkEntry* ResultsSummary::find(const std::string& name) const {
  for (const auto& b : benchmarks)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<std::string> ResultsSummary::names() const {
  std::vector<std::string> out;
  for (const auto& b : benchmarks) out.push_back(b.name);
  return out;
}

std::vector<std::vector<std::string>> python_rows(const char* script, const std::string& file) {
  const ProcessResult read = run_process({BuildPaths::python, "-c", script, file});
  EXPECT_EQ(read.exit_code, 0) << read;
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(read.out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string>& fields = rows.emplace_back();
    std::istringstream parts(line);
    for (std::string field; std::getline(parts, field, '\t');) fields.push_back(field);
    if (!line.empty() && line.back() == '\t') fields.emplace_back();
  }
  return rows;
}

std::optional<ResultsSummary> read_results(const std::filesystem::path& file) {
  const ProcessResult reader = run_process({BuildPaths::python, BuildPaths::results_reader, file.string()});
  if (reader.exit_code != 0) {
    ADD_FAILURE() << "not a valid results file: " << file << reader;
    return std::nullopt;
  }
  ResultsSummary summary;
  std::stringstream lines(reader.out);
  for (std::string line; std::getline(lines, line);) {
    const auto fields = split(line, '\t');
    if (fields.size() == 3 && fields[0] == "context") {
      summary.context[fields[1]] = fields[2];
    } else if (fields.size() == 3 && fields[0] == "load_failure") {
      summary.load_failures.emplace_back(fields[1], fields[2]);
    } else if (fields.size() == 7 && fields[0] == "benchmark") {
      const auto counters = split(fields[5], ',');
      summary.benchmarks.push_back(
          {fields[1], fields[2], fields[3], fields[4], fields[6], std::set<std::string>(counters.begin(), counters.end()), {}});
    } else if (fields.size() == 3 && fields[0] == "keys" && !summary.benchmarks.empty()) {
      const auto keys = split(fields[2], ',');
      summary.benchmarks.back().keys = std::set<std::string>(keys.begin(), keys.end());
    } else {
      ADD_FAILURE() << "unexpected line from " << BuildPaths::results_reader << ": " << line;
      return std::nullopt;
    }
  }
  return summary;
}

ProcessResult RoofbenchTest::roofbench(const std::vector<std::string>& args) const {
  return roofbench_into(results_dir(), args);
}

ProcessResult RoofbenchTest::roofbench_into(const std::filesystem::path& dir, const std::vector<std::string>& args) const {
  std::vector<std::string> argv{BuildPaths::roofbench, "--device", "cpu", "--max-time", "0.05",
                                "--results-dir", dir.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  // Plugins come from the build's own plugin folder and the --plugin-dir arguments only.
  return run_process(argv, {{"ROOFBENCH_CACHE_DIR", BuildPaths::ceilings_cache}}, {"ROOFBENCH_PLUGIN_PATH"});
}

}  // namespace roofbench::test_support
