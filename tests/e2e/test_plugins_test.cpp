// The real roofbench executable running the test plugins (tests/plugins) on the CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../support/roofbench_host.hpp"

namespace roofbench::test_support {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAreArray;

const std::vector<std::string> kGoodBenchmarks{"good/scale/n:1024", "good/scale/n:4096", "good/sweep/n:256",
                                                "good/sweep/n:1024", "good/sweep/n:4096"};

using GoodPlugin = RoofbenchTest;
using CrashPlugin = RoofbenchTest;

// Each hostile case costs only its own benchmark: the worker that died or hung is replaced and the next
// benchmark runs; every outcome is in a strict-JSON results file and the run exits 1.
TEST_F(CrashPlugin, EachFlawCostsOnlyItsOwnBenchmark) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::crash_plugins, "--benchmark_filter=^crash/"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.out, HasSubstr("summary: ran 12 benchmarks: 4 passed, 8 failed (1 gate, 3 errors, 3 crashed, 1 timed out)"))
      << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_EQ(results->context.at("complete"), "true");
  const std::vector<std::tuple<std::string, std::string, std::string>> expected{
      {"crash/a_passes", "ok", ""},
      {"crash/b_aborts", "crashed", "killed by signal 6"},
      {"crash/c_segfaults", "crashed", "killed by signal 11"},
      {"crash/d_exits_zero", "crashed", "exited with code 0"},
      {"crash/e_teardown_throws_int", "error", "teardown threw a non-standard exception"},
      {"crash/f_never_ends", "timed_out", "ran past its 1.5 s timeout"},
      {"crash/g_host_field_counters", "ok", ""},
      {"crash/h_not_utf8", "ok", ""},
      {"crash/i_not_utf8_message", "gate_failed", "latin-1 \xef\xbf\xbdt\xef\xbf\xbd and a lone \xef\xbf\xbd"},
      {"crash/j_negative_error", "error", "negative relative error"},
      {"crash/k_nan_flops", "error", "work() gave flops = nan"},
      {"crash/z_passes", "ok", ""},
  };
  ASSERT_EQ(results->benchmarks.size(), expected.size()) << run;
  for (const auto& [name, status, message] : expected) {
    const BenchmarkEntry* b = results->find(name);
    ASSERT_TRUE(b) << name;
    EXPECT_EQ(b->status, status) << name << ": " << b->error_message;
    EXPECT_THAT(b->error_message, HasSubstr(message)) << name;
    if (status == "ok") {
      EXPECT_EQ(b->gate, "pass") << name;
    }
  }
  // A plugin's counters never take a host field's name: they are renamed, the host's stay the host's.
  const BenchmarkEntry* counters = results->find("crash/g_host_field_counters");
  ASSERT_TRUE(counters);
  for (const char* key : {"case.samples", "case.name", "case.noise", "case.noise.2", "case.FLOP/s", "case.real_time",
                          "samples", "noise", "FLOP/s", "real_time", "name"})
    EXPECT_THAT(counters->keys, Contains(key)) << key;
}

// --isolation=none is the old in-process mode: the same results for cases that behave.
TEST_F(CrashPlugin, InProcessIsolationStillMeasures) {
  const auto run = roofbench({"--isolation=none", "--plugin-dir", BuildPaths::crash_plugins,
                              "--benchmark_filter=^crash/(a_passes|e_teardown|j_negative|z_passes)"});
  EXPECT_EQ(run.exit_code, 1) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  ASSERT_EQ(results->benchmarks.size(), 4u) << run;
  EXPECT_EQ(results->find("crash/a_passes")->status, "ok");
  EXPECT_EQ(results->find("crash/e_teardown_throws_int")->status, "error");
  EXPECT_EQ(results->find("crash/z_passes")->status, "ok");
}

using KillerPlugins = RoofbenchTest;

const std::vector<std::string> kKillers{"exit_in_describe.so", "segfault_at_load.so", "segfault_in_describe.so"};

TEST_F(KillerPlugins, EachIsReportedOnceByPathAndTheOthersRun) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::killer_plugins, "--plugin-dir", BuildPaths::good_plugins,
                              "--benchmark_filter=^good/scale/n:1024/"});
  // The good benchmark is measured and kept, but the run fails: a plugin that did not load could have
  // held any benchmark the filter selects.
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("the run fails: 3 plugins could not be loaded")) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_THAT(results->names(), ElementsAre("good/scale/n:1024"));
  ASSERT_EQ(results->load_failures.size(), kKillers.size()) << run;
  for (std::size_t i = 0; i < kKillers.size(); ++i) {
    EXPECT_EQ(results->load_failures[i].first, (std::filesystem::path(BuildPaths::killer_plugins) / kKillers[i]).string());
    EXPECT_THAT(results->load_failures[i].second, HasSubstr("crashed its worker process while loading")) << run;
  }
  EXPECT_THAT(results->load_failures[0].second, HasSubstr("exited with code 0"));
  EXPECT_THAT(results->load_failures[1].second, HasSubstr("signal 11"));
  EXPECT_THAT(results->load_failures[1].second, HasSubstr("about to crash in a static constructor"));
}

TEST_F(KillerPlugins, ListSurvivesThem) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::killer_plugins, "--plugin-dir", BuildPaths::good_plugins, "--list"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("scale  [cpu")) << run;
  EXPECT_THAT(run.out, HasSubstr("plugins that failed to load:")) << run;
  for (const auto& k : kKillers) EXPECT_THAT(run.out, HasSubstr(k)) << run;
}

TEST_F(GoodPlugin, PassesItsGatesAndWritesAValidResultsFile) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/"});
  ASSERT_EQ(run.exit_code, 0) << run;
  for (const auto& name : kGoodBenchmarks) EXPECT_THAT(run.out, HasSubstr("\n" + name + " ")) << run;
  EXPECT_THAT(run.out, Not(HasSubstr("/iterations:1/manual_time"))) << run;
  EXPECT_THAT(run.out, HasSubstr(" memory   pass ")) << run;

  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_EQ(results->context.at("complete"), "true");
  EXPECT_EQ(results->context.at("gate"), "on");
  EXPECT_THAT(results->names(), UnorderedElementsAreArray(kGoodBenchmarks));
  for (const auto& b : results->benchmarks) {
    EXPECT_EQ(b.status, "ok") << b.name << ": " << b.error_message;
    EXPECT_EQ(b.gate, "pass") << b.name;
    EXPECT_THAT(b.label, HasSubstr("gate=pass")) << b.name;
    EXPECT_THAT(b.label, HasSubstr("precision=fp32")) << b.name;
    for (const char* counter : {"FLOP/s", "B/s", "AI", "roof_pct", "gate_rel_err"})
      EXPECT_THAT(b.counters, Contains(counter)) << b.name;
  }
}

TEST_F(GoodPlugin, GateOffIsSaidInEveryLabel) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/", "--gate=off"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, Not(HasSubstr(" pass "))) << run;
  EXPECT_THAT(run.out, HasSubstr(" memory   off ")) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_EQ(results->context.at("gate"), "off");
  ASSERT_EQ(results->benchmarks.size(), 2u);
  for (const auto& b : results->benchmarks) {
    EXPECT_THAT(b.label, HasSubstr("gate=off")) << b.name;
    EXPECT_EQ(b.gate, "off") << b.name;
    EXPECT_THAT(b.counters, Not(Contains("gate_rel_err"))) << b.name << ": no gate ran";
  }
}

TEST_F(GoodPlugin, ListTestsNamesTheBenchmarksAndRunsNothing) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/", "--benchmark_list_tests"});
  EXPECT_EQ(run.exit_code, 0) << run;
  for (const auto& name : kGoodBenchmarks) EXPECT_THAT(run.out, HasSubstr(name)) << run;
  EXPECT_THAT(run.out, Not(HasSubstr("cpu/"))) << run;
  EXPECT_FALSE(std::filesystem::exists(latest_results())) << "listing wrote a results file";
}

// Google Benchmark decides what its flags mean: =0 is not listing, so everything is measured.
TEST_F(GoodPlugin, ListTestsZeroMeasures) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/", "--benchmark_list_tests=0"});
  ASSERT_EQ(run.exit_code, 0) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  ASSERT_EQ(results->benchmarks.size(), 2u);
  for (const auto& b : results->benchmarks) {
    EXPECT_THAT(b.counters, Contains("roof_pct")) << b.name;
    EXPECT_THAT(b.label, HasSubstr("bound=")) << b.name;
  }
}

// Two runs at once into one folder keep two files (a run file is claimed exclusively).
TEST_F(GoodPlugin, TwoRunsInOneSecondKeepTwoFiles) {
  ProcessResult first, second;
  std::thread other([&] { first = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/n:1024/"}); });
  second = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/n:1024/"});
  other.join();
  EXPECT_EQ(first.exit_code, 0) << first;
  EXPECT_EQ(second.exit_code, 0) << second;
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(results_dir())) files.insert(entry.path().filename().string());
  files.erase("latest.json");
  EXPECT_EQ(files.size(), 2u) << ::testing::PrintToString(files);
}

TEST_F(GoodPlugin, ListShowsDevicesPluginsCasesAndAxes) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--list"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, AllOf(HasSubstr("devices:"), HasSubstr("  cpu: "), HasSubstr("plugins:"))) << run;
  EXPECT_THAT(run.out, HasSubstr("good  (" + BuildPaths::good_plugins)) << run;
  EXPECT_THAT(run.out, HasSubstr("scale  [cpu, fp32, 2 benchmarks]")) << run;
  EXPECT_THAT(run.out, HasSubstr("sweep  [cpu, fp32, 3 benchmarks, sweeps n]")) << run;
  EXPECT_THAT(run.out, HasSubstr("n: 1024 4096")) << run;
  EXPECT_THAT(run.out, HasSubstr("n: 256 1024 4096")) << run;
  EXPECT_THAT(run.out, HasSubstr("suites: ")) << run;
  EXPECT_THAT(run.out, HasSubstr("smoke")) << run;
}

using WrongPlugin = RoofbenchTest;

TEST_F(WrongPlugin, FailuresExitOneAndEveryResultSurvives) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::wrong_plugins, "--benchmark_filter=^wrong/"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.out, HasSubstr("\nwrong/off_by_one_percent/n:4096  FAIL (gate): relative L2 error 0.01, tolerance 1e-05"))
      << run;
  EXPECT_THAT(run.out, HasSubstr("summary: ran 6 benchmarks: 2 passed, 4 failed (2 gate, 2 errors)")) << run;

  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_EQ(results->context.at("complete"), "true");
  EXPECT_THAT(results->names(), ElementsAre("wrong/before_failures/n:4096", "wrong/off_by_one_percent/n:4096",
                                            "wrong/forgets_output/n:4096", "wrong/throws_in_run/n:4096",
                                            "wrong/throws_in_setup/n:4096", "wrong/after_failures/n:4096"));
  for (const char* passing : {"wrong/before_failures/n:4096", "wrong/after_failures/n:4096"}) {
    const BenchmarkEntry* b = results->find(passing);
    ASSERT_TRUE(b) << passing;
    EXPECT_EQ(b->status, "ok") << passing << ": " << b->error_message;
    EXPECT_EQ(b->gate, "pass") << passing;
  }

  const BenchmarkEntry* off = results->find("wrong/off_by_one_percent/n:4096");
  ASSERT_TRUE(off);
  EXPECT_EQ(off->status, "gate_failed");
  EXPECT_EQ(off->gate, "fail");
  EXPECT_THAT(off->error_message, AllOf(HasSubstr("relative L2 error 0.01"), HasSubstr("tolerance 1e-05")));
  EXPECT_THAT(off->counters, Contains("gate_rel_err"));

  const BenchmarkEntry* forgets = results->find("wrong/forgets_output/n:4096");
  ASSERT_TRUE(forgets);
  EXPECT_EQ(forgets->gate, "fail");
  EXPECT_THAT(forgets->error_message, AllOf(HasSubstr("relative L2 error nan"), HasSubstr("tolerance")));
  EXPECT_THAT(forgets->counters, Not(Contains("gate_rel_err"))) << "NaN must be written as null";

  const BenchmarkEntry* throws_in_run = results->find("wrong/throws_in_run/n:4096");
  ASSERT_TRUE(throws_in_run);
  EXPECT_EQ(throws_in_run->status, "error");
  EXPECT_EQ(throws_in_run->gate, "error");
  EXPECT_THAT(throws_in_run->error_message, HasSubstr("run() of throws_in_run failed on purpose"));

  const BenchmarkEntry* throws_in_setup = results->find("wrong/throws_in_setup/n:4096");
  ASSERT_TRUE(throws_in_setup);
  EXPECT_EQ(throws_in_setup->status, "error");
  EXPECT_THAT(throws_in_setup->error_message, HasSubstr("setup() of throws_in_setup failed on purpose"));
}

using BrokenPlugins = RoofbenchTest;

// Each plugin in the broken folder, with what its load failure must say.
const std::vector<std::pair<std::string, std::string>> kBrokenPluginReasons{
    {"no_entry_point.so", "no entry point"},
    {"wrong_abi_version.so", "ABI version 999"},
    {"unresolved_symbol.so", "undefined symbol: roofbench_test_function_defined_nowhere"},
    {"describe_throws.so", "describe() threw: describe_throws cannot describe itself"},
    {"duplicate_case_names.so", "two cases named 'twice'"},
    {"slash_in_axis_value.so", "axis 'a': value 'x/b:1' has '/'"},
    {"duplicate_axis_names.so", "two axes named 'n'"},
    {"old_string_abi.so", "_GLIBCXX_USE_CXX11_ABI=0, this host with 1"},
    {"notaplugin.so", "cannot load"},
};

TEST_F(BrokenPlugins, EachIsReportedByPathAndReasonWhileTheGoodOneRuns) {
  const auto text_plugin = scratch_.write("text/notaplugin.so", "this is text, not a shared library\n");
  const auto run = roofbench({"--plugin-dir", BuildPaths::broken_plugins, "--plugin-dir", BuildPaths::good_plugins,
                              "--plugin-dir", text_plugin.parent_path().string(), "--benchmark_filter=^good/scale/n:1024/"});
  // Every one but the library without an entry point could have held benchmarks of the selection.
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("the run fails: " + std::to_string(kBrokenPluginReasons.size() - 1) +
                                 " plugins could not be loaded")) << run;
  for (const auto& [file, reason] : kBrokenPluginReasons) {
    const std::string folder = file == "notaplugin.so" ? text_plugin.parent_path().string() : BuildPaths::broken_plugins;
    EXPECT_THAT(run.err, HasSubstr("plugin " + (std::filesystem::path(folder) / file).string() + " not loaded: ")) << run;
    EXPECT_THAT(run.err, HasSubstr(reason)) << run;
  }
  EXPECT_THAT(run.out, HasSubstr("\ngood/scale/n:1024 ")) << run;
  EXPECT_THAT(run.out, HasSubstr("\n  " + std::to_string(kBrokenPluginReasons.size()) + " plugins not loaded (reasons above)\n")) << run;

  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_THAT(results->names(), ElementsAre("good/scale/n:1024"));
  EXPECT_EQ(results->load_failures.size(), kBrokenPluginReasons.size());
  for (const auto& [path, reason] : results->load_failures) {
    const std::string file = std::filesystem::path(path).filename().string();
    const auto expected = std::find_if(kBrokenPluginReasons.begin(), kBrokenPluginReasons.end(),
                                       [&](const auto& entry) { return entry.first == file; });
    ASSERT_NE(expected, kBrokenPluginReasons.end()) << "unexpected load failure of " << path;
    EXPECT_THAT(reason, HasSubstr(expected->second)) << path;
  }
}

TEST_F(BrokenPlugins, ListShowsWhatFailedToLoad) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::broken_plugins, "--plugin-dir", BuildPaths::good_plugins, "--list"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("plugins that failed to load:")) << run;
  EXPECT_THAT(run.out, HasSubstr("wrong_abi_version.so: ABI version 999")) << run;
  EXPECT_THAT(run.out, HasSubstr("scale  [cpu")) << run;
}

}  // namespace
}  // namespace roofbench::test_support
