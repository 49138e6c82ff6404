// The real cpu plugin (from the build's default plugin folder) through the default suite, and the
// reports made from that run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../support/roofbench_host.hpp"

namespace roofbench::test_support {
namespace {

using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Key;

class SmokeSuiteOnCpu : public RoofbenchTest {
 protected:
  // The timestamped results file of the run (results_dir() also holds latest.json, a copy of it).
  std::filesystem::path run_results_file() const {
    for (const auto& entry : std::filesystem::directory_iterator(results_dir()))
      if (entry.path().filename() != "latest.json" && entry.path().extension() == ".json") return entry.path();
    return {};
  }

  ProcessResult report_script(const std::string& script, const std::vector<std::string>& args) const {
    // -B: no __pycache__ in the source tree.
    std::vector<std::string> argv{BuildPaths::python, "-B", BuildPaths::reports + "/" + script};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv);
  }
};

TEST_F(SmokeSuiteOnCpu, PassesEveryGate) {
  const auto run = roofbench({});  // no --suite and no filter: the default suite, smoke
  ASSERT_EQ(run.exit_code, 0) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_EQ(results->context.at("suite"), "smoke");
  EXPECT_EQ(results->context.at("complete"), "true");
  // The build knows its commit when its source is a git checkout, as every build of this test's is.
  if (std::filesystem::exists(std::string(ROOFBENCH_TEST_SOURCE_DIR) + "/.git")) {
    EXPECT_THAT(results->context, Contains(Key("commit")));
  }
  EXPECT_THAT(results->names(), Contains("cpu/add/n:65536"));
  EXPECT_THAT(results->names(), Contains("cpu/stream_triad/n:4194304"));
  EXPECT_THAT(results->names(), Contains("cpu/matmul_naive/n:128"));
  // The console: one table line per benchmark that passed, and a summary that counts them.
  const std::string ran = std::to_string(results->benchmarks.size());
  EXPECT_THAT(run.out, HasSubstr("\nsummary: ran " + ran + " benchmarks: " + ran + " passed, 0 failed\n")) << run;
  for (const auto& b : results->benchmarks)
    EXPECT_THAT(run.out, ContainsRegex("\n" + b.name + " +[0-9.]+ (ns|us|ms|s) +[0-9.]+ [^\n]*/s +[0-9.]+% +(memory|compute) +pass "))
        << b.name << run;
  for (const auto& b : results->benchmarks) {
    EXPECT_TRUE(b.name.starts_with("cpu/")) << b.name << " ran with --device cpu";
    EXPECT_EQ(b.status, "ok") << b.name << ": " << b.error_message;
    EXPECT_EQ(b.gate, "pass") << b.name;
    EXPECT_THAT(b.counters, Contains("roof_pct")) << b.name;
  }
}

TEST_F(SmokeSuiteOnCpu, ReportAndSelfCompareFromTheRun) {
  const auto run = roofbench({"--suite", "smoke"});
  ASSERT_EQ(run.exit_code, 0) << run;
  const auto results_file = run_results_file();
  ASSERT_FALSE(results_file.empty()) << "no timestamped results file in " << results_dir();

  const auto report_dir = scratch_ / "report";
  const auto report = report_script("roofbench-report", {results_file.string(), "-o", report_dir.string()});
  ASSERT_EQ(report.exit_code, 0) << report;
  for (const char* file : {"summary.md", "roofline.svg", "index.html"}) {
    const auto path = report_dir / file;
    ASSERT_TRUE(std::filesystem::exists(path)) << path << report;
    EXPECT_GT(std::filesystem::file_size(path), 0u) << path;
  }

  // The summary's next command works as printed (-o report/ is only redirected into the scratch folder).
  const std::string next_prefix = "\n  next: ";
  const auto next_at = run.out.find(next_prefix);
  ASSERT_NE(next_at, std::string::npos) << run;
  std::istringstream next_words(run.out.substr(next_at + next_prefix.size(), run.out.find('\n', next_at + 1) - next_at - next_prefix.size()));
  std::vector<std::string> next{BuildPaths::python, "-B"};
  for (std::string word; next_words >> word;) next.push_back(word);
  ASSERT_EQ(next.size(), 6u) << run;
  EXPECT_EQ(next[3], results_file.string());
  EXPECT_EQ(next[5], "report/");
  next[5] = (scratch_ / "next-report").string();
  const auto next_report = run_process(next);
  EXPECT_EQ(next_report.exit_code, 0) << next_report;
  EXPECT_TRUE(std::filesystem::exists(scratch_ / "next-report" / "index.html")) << next_report;

  // One run a side is one process a side: nothing to judge a change against, and the exit code says so.
  const auto compare = report_script("roofbench-compare", {results_file.string(), results_file.string()});
  EXPECT_EQ(compare.exit_code, 3) << compare;
  EXPECT_THAT(compare.out, HasSubstr("CANNOT JUDGE")) << compare;
  EXPECT_THAT(compare.out, HasSubstr("cpu/")) << compare;
}

}  // namespace
}  // namespace roofbench::test_support
