// The console as a person sees it (the real executable on the CPU): the table's lines, the closing
// summary, the one line on why no GPU is used, and Google Benchmark's own formats left as they were.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support/roofbench_host.hpp"

namespace roofbench::test_support {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The table's line of `benchmark`: the line that starts with its name and a space.
std::string line_of(const std::string& text, const std::string& benchmark) {
  for (const auto& line : lines_of(text))
    if (line.starts_with(benchmark + " ")) return line;
  return "(no line for " + benchmark + ")";
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// What this machine's no-GPU line must say: without any NVIDIA driver (CI), that none is installed.
bool no_nvidia_driver_here() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec))
    if (entry.path().filename().string().starts_with("nvidia")) return false;
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) ::dlclose(driver);
  return driver == nullptr;
}

using Console = RoofbenchTest;

TEST_F(Console, OneLinePerBenchmarkAndASummary) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::mixed_plugins, "--benchmark_filter=^mixed/"});
  EXPECT_EQ(run.exit_code, 1) << run;

  EXPECT_THAT(run.out, Not(HasSubstr("iterations:1"))) << run;
  EXPECT_THAT(run.output(), Not(HasSubstr("UserCounters"))) << "Google Benchmark's console is replaced";
  EXPECT_THAT(run.output(), Not(HasSubstr("Timings may be affected"))) << "its debug warning is replaced by the note";
  EXPECT_THAT(lines_of(run.out), Contains(MatchesRegex("benchmark +time +rate +roof +bound +gate +noise"))) << run;

  const std::string passes = line_of(run.out, "mixed/passes/n:1024");
  EXPECT_THAT(passes, MatchesRegex(R"(mixed/passes/n:1024 +[0-9.]+ (ns|us|ms) +[0-9.]+ (k |M |G )?elements/s +[0-9.]+% +memory +pass +[0-9.]+%( +data in cache,?)?( +NOISY)?)"))
      << run;
  EXPECT_LE(passes.size(), 120u);  // with both notes: "data in cache, NOISY"
  EXPECT_THAT(line_of(run.out, "mixed/gate_fails/n:1024"),
              MatchesRegex(R"(mixed/gate_fails/n:1024 +FAIL \(gate\): relative L2 error 0.01, tolerance 1e-05 \(fp32\))"));
  EXPECT_THAT(line_of(run.out, "mixed/throws/n:1024"),
              MatchesRegex(R"(mixed/throws/n:1024 +FAIL \(error\): run\(\) of mixed/throws failed on purpose)"));
  EXPECT_THAT(line_of(run.out, "mixed/does_not_apply/n:1024"),
              MatchesRegex(R"(mixed/does_not_apply/n:1024 +not run: this case applies to no device \(on purpose\))"));

  EXPECT_THAT(line_of(run.out, "mixed/sweep_falls/n:4194304"), HasSubstr("sweeps/s")) << run;
  EXPECT_THAT(run.out, HasSubstr("\n  sweep mixed/sweep_falls: knee at n=1024 (throughput stopped rising)\n")) << run;
  EXPECT_THAT(line_of(run.out, "mixed/sweep_falls/n:16777216"),
              MatchesRegex(R"(mixed/sweep_falls/n:16777216 +not run: the sweep of n ended \(throughput stopped rising\))"));

  EXPECT_THAT(run.out, HasSubstr("\nsummary: ran 6 benchmarks: 4 passed, 2 failed (1 gate, 1 error)\n")) << run;
  EXPECT_THAT(run.out, HasSubstr("\n  not run: 1 benchmark of 1 case: the sweep of n ended (throughput stopped rising)\n")) << run;
  EXPECT_THAT(run.out, HasSubstr("\n  not run: 2 benchmarks of 1 case: needs a CUDA GPU")) << run;
  EXPECT_THAT(run.out, HasSubstr("\n  not run: 1 benchmark of 1 case: this case applies to no device (on purpose)\n")) << run;
  std::string results_file;
  for (const auto& entry : std::filesystem::directory_iterator(results_dir()))
    if (entry.path().filename() != "latest.json") results_file = entry.path().string();
  EXPECT_THAT(run.out, HasSubstr("\n  results: " + results_file + " (")) << run;
  EXPECT_THAT(run.out, HasSubstr("\n  next: ")) << run;
  EXPECT_THAT(run.out, HasSubstr("roofbench-report " + results_file + " -o report/\n")) << run;
}

TEST_F(Console, SaysOnceWhyNoGpuIsUsed) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::mixed_plugins, "--benchmark_filter=^mixed/(passes|needs_gpu)/"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_EQ(count(run.output(), "no GPU used: "), 1u) << run;
  EXPECT_EQ(count(run.output(), "CUDA driver version is insufficient"), 0u) << run;
  // A build without CUDA says so instead of looking for a driver.
  const bool built_without_cuda = run.out.find("no GPU used: this roofbench was built without CUDA") != std::string::npos;
  if (no_nvidia_driver_here() && !built_without_cuda) {
    EXPECT_THAT(lines_of(run.out), Contains("no GPU used: no NVIDIA driver is installed (libcuda.so.1 cannot be loaded; "
                                            "no /dev/nvidia* device)"))
        << run;
    EXPECT_THAT(run.out, HasSubstr("needs a CUDA GPU; no GPU (see above)")) << run;
  }
}

TEST_F(Console, DebugBuildOfGoogleBenchmarkIsExplained) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/n:1024/"});
  ASSERT_EQ(run.exit_code, 0) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  std::ifstream file(latest_results());
  const std::string json((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (json.find("\"library_build_type\": \"debug\"") == std::string::npos) GTEST_SKIP() << "Google Benchmark is a release build here";
  EXPECT_THAT(run.out, HasSubstr("Library was built as DEBUG\"): roofbench's timings are not affected")) << run;
}

TEST_F(Console, RepetitionsEndInOneLineOverThem) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/n:1024/",
                              "--benchmark_repetitions=3"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_EQ(count(run.out, "\ngood/scale/n:1024 "), 4u) << run;
  EXPECT_THAT(line_of(run.out, "good/scale/n:1024"), Not(HasSubstr("median of"))) << "the repetitions come first";
  EXPECT_THAT(run.out, HasSubstr("median of 3 repetitions")) << run;
  EXPECT_THAT(run.out, HasSubstr("summary: ran 3 benchmark runs (3 repetitions each): 3 passed, 0 failed")) << run;
}

// Google Benchmark's formats stay its own: JSON or CSV on stdout, and what a person needs on stderr.
bool valid_json_file(const std::filesystem::path& file) {
  return run_process({BuildPaths::python, "-c", "import json,sys; json.load(open(sys.argv[1]))", file.string()}).exit_code == 0;
}

TEST_F(Console, JsonFormatIsGoogleBenchmarksJson) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::mixed_plugins, "--benchmark_filter=^mixed/", "--benchmark_format=json"});
  EXPECT_EQ(run.exit_code, 1) << run;
  const auto file = scratch_.write("stdout.json", run.out);
  EXPECT_TRUE(valid_json_file(file)) << run;
  EXPECT_THAT(run.out, StartsWith("{\n  \"context\": {"));
  EXPECT_THAT(run.out, HasSubstr("\"name\": \"mixed/passes/n:1024/iterations:1/manual_time\""));
  EXPECT_THAT(run.out, HasSubstr("\"executable\": \"" + BuildPaths::roofbench + "\"")) << "argv[0] must outlive Initialize";
  EXPECT_THAT(run.out, Not(HasSubstr("summary:")));
  EXPECT_THAT(run.err, HasSubstr("summary: ran 6 benchmarks: 4 passed, 2 failed (1 gate, 1 error)")) << run;
  EXPECT_THAT(run.err, HasSubstr("\n  not run: 2 benchmarks of 1 case: needs a CUDA GPU")) << run;
  EXPECT_THAT(run.err, HasSubstr("mixed/gate_fails/n:1024: gate failed: relative L2 error 0.01")) << run;
  EXPECT_EQ(count(run.err, "no GPU used: "), 1u) << run;
  EXPECT_EQ(count(run.err, "needs a CUDA GPU"), 1u) << "one line per reason, not one per case";
}

TEST_F(Console, CsvFormatIsGoogleBenchmarksCsv) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/", "--benchmark_format=csv"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, StartsWith("name,iterations,real_time,cpu_time,time_unit,")) << run;
  EXPECT_THAT(run.out, HasSubstr("\"good/scale/n:4096/iterations:1/manual_time\",1,")) << run;
  EXPECT_THAT(run.err, HasSubstr("summary: ran 2 benchmarks: 2 passed, 0 failed")) << run;
}

TEST_F(Console, BenchmarkOutWritesGoogleBenchmarksFileBesideTheTable) {
  const auto out_file = scratch_ / "gb.json";
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/",
                              "--benchmark_out=" + out_file.string(), "--benchmark_out_format=json"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(line_of(run.out, "good/scale/n:4096"), HasSubstr("pass")) << run;
  ASSERT_TRUE(valid_json_file(out_file));
  std::ifstream file(out_file);
  const std::string json((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(json, AllOf(HasSubstr("\"name\": \"good/scale/n:1024/iterations:1/manual_time\""), HasSubstr("\"time_median\": ")));
}

}  // namespace
}  // namespace roofbench::test_support
