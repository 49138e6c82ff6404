// The command line of the real roofbench executable: help, listings and each usage error (exit code 2).
// None of these runs a benchmark, so none needs the device's ceilings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../support/roofbench_host.hpp"
#include "console.hpp"

namespace roofbench::test_support {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using CommandLine = RoofbenchTest;

TEST_F(CommandLine, HelpExitsZero) {
  const auto run = roofbench({"--help"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("usage: roofbench"));
  EXPECT_THAT(run.out, HasSubstr("Exit codes"));
}

TEST_F(CommandLine, AnUnknownFlagExitsTwoNamingIt) {
  const auto run = roofbench({"--colour=blue"});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("'--colour=blue'")) << run;
}

TEST_F(CommandLine, AnUnknownSuiteExitsTwoListingTheKnownOnes) {
  const auto run = roofbench({"--suite", "nosuch"});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("unknown suite 'nosuch'")) << run;
  EXPECT_THAT(run.err, HasSubstr("smoke")) << run;
}

TEST_F(CommandLine, ABadSuiteFileExitsTwoNamingFileAndLine) {
  const auto suite = scratch_.write("bad.suite", "# line 1\ndescription = bad\nfilter = ^good/\ncolour = red\n");
  const auto run = roofbench({"--suite", suite.string()});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr(suite.string() + ":4:")) << run;
  EXPECT_THAT(run.err, HasSubstr("unknown key 'colour'")) << run;
}

TEST_F(CommandLine, ASuiteAskingForAnUnknownPluginExitsTwoNamingTheLine) {
  const auto suite = scratch_.write("needs.suite", "description = d\nplugins = cpu, nosuch\n");
  const auto run = roofbench({"--suite", suite.string()});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr(suite.string() + ":2: unknown plugin 'nosuch'")) << run;
}

TEST_F(CommandLine, ASuiteFilterMatchingNothingExitsTwoNamingTheLine) {
  // Its other filter matches: ORed, the dead one would be dropped without a word.
  const auto suite = scratch_.write("dead.suite", "description = d\nplugins = cpu\nfilter = ^cpu/add/\n"
                                                  "filter = ^cpu/add/size:4096/\n");
  const auto run = roofbench({"--suite", suite.string()});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr(suite.string() + ":4: filter '^cpu/add/size:4096/' matches no benchmark")) << run;
}

// A suite's energy applies unless the command line says otherwise (--energy=0: off). The CPU has no energy
// counter, so each row says so, and its samples are not lengthened for it.
TEST_F(CommandLine, ASuitesEnergyAppliesUnlessTheCommandLineTurnsItOff) {
  const auto suite = scratch_.write("energy.suite", "description = d\nplugins = cpu\nfilter = ^cpu/add/n:16384/\n"
                                                    "max_time = 0.05\nenergy = 1\n");
  const auto with = roofbench({"--suite", suite.string(), "--no-results"});
  EXPECT_EQ(with.exit_code, 0) << with;
  EXPECT_THAT(with.out, HasSubstr("no energy: the CPU has no energy counter here")) << with;
  const auto without = roofbench({"--suite", suite.string(), "--no-results", "--energy=0"});
  EXPECT_EQ(without.exit_code, 0) << without;
  EXPECT_THAT(without.out, Not(HasSubstr("energy"))) << without;
}

// --kernel-time where CUPTI cannot trace (a CPU case): the case keeps its timing and says why in one line.
TEST_F(CommandLine, KernelTimeOnTheCpuKeepsTheTimingAndSaysWhyThereIsNone) {
  const auto run = roofbench({"--benchmark_filter=^cpu/add/n:16384/", "--max-time=0.05", "--no-results", "--kernel-time=2"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("no kernel_time for cpu/add/n:16384")) << run;
  EXPECT_THAT(run.out, HasSubstr("CUPTI records GPU kernels only")) << run;
  const auto bad = roofbench({"--kernel-time=0"});
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_THAT(bad.err, HasSubstr("--kernel-time needs a whole number of samples from 1 to 1000, got '0'")) << bad;
}

// --profile, --kernel-time and --counters together on a CPU case, which none of CUPTI's passes can take: the
// run keeps the timing, says why there is no kernel_time, and no pass reports a CUPTI failure.
TEST_F(CommandLine, ProfileKernelTimeAndCountersTogetherOnTheCpuKeepTheTiming) {
  const auto run = roofbench({"--benchmark_filter=^cpu/add/n:16384/", "--max-time=0.05", "--no-results", "--profile",
                              "--kernel-time=2", "--counters"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("no kernel_time for cpu/add/n:16384")) << run;
  EXPECT_THAT(run.output(), Not(HasSubstr("CUPTI_ERROR"))) << run;
}

// The GPU tests read figures through python_rows: a results file's lines split at their tabs, empty fields
// (inside a line and at its end) kept, on a run of the CPU plugin.
TEST_F(CommandLine, PythonRowsSplitAResultsFilesLinesAtTheirTabsKeepingEmptyFields) {
  const auto run = roofbench({"--benchmark_filter=^cpu/add/n:16384/", "--max-time=0.05"});
  ASSERT_EQ(run.exit_code, 0) << run;
  const char* script =
      "import json, sys\n"
      "for b in json.load(open(sys.argv[1]))['benchmarks']:\n"
      "    print(b['name'], '', b['roofbench']['status'], '', sep='\\t')\n";
  const auto rows = python_rows(script, latest_results().string());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"cpu/add/n:16384", "", "ok", ""}));
}

TEST_F(CommandLine, AMissingPluginFolderExitsTwo) {
  const auto run = roofbench({"--plugin-dir", "/nonexistent/roofbench-plugins"});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("/nonexistent/roofbench-plugins")) << run;
}

TEST_F(CommandLine, AFilterMatchingNothingExitsTwo) {
  const auto run = roofbench({"--benchmark_filter=^nosuch/"});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("matches no benchmark")) << run;
  EXPECT_FALSE(std::filesystem::exists(latest_results())) << "a run that measured nothing wrote results";
}

TEST_F(CommandLine, ABadFilterRegexExitsTwo) {
  const auto run = roofbench({"--benchmark_filter=^cpu/("});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("bad --benchmark_filter")) << run;
}

TEST_F(CommandLine, AFilterTooLongForTheRegexEngineExitsTwo) {
  std::string filter = "^(";
  while (filter.size() < 20000) filter += "a|";
  const auto run = roofbench({"--benchmark_filter=" + filter + "b)"});
  EXPECT_EQ(run.exit_code, 2) << run.exit_code << run.err.substr(0, 300);
  EXPECT_THAT(run.err, HasSubstr("at most 4096 are accepted"));
}

// A results folder that cannot be written fails the run before anything is measured.
TEST_F(CommandLine, AnUnwritableResultsFolderExitsOneBeforeMeasuring) {
  const auto file = scratch_.write("a-file", "not a folder\n");
  const auto run = roofbench_into(file / "results", {"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("nothing was measured")) << run;
  EXPECT_THAT(run.out, Not(HasSubstr("good/scale"))) << run;
}

TEST_F(CommandLine, AnUnknownGoogleBenchmarkFlagExitsTwo) {
  // Listing only: nothing is measured, so the flag is the only reason to fail.
  const auto run = roofbench({"--benchmark_list_tests", "--benchmark_no_such_flag=1"});
  EXPECT_EQ(run.exit_code, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("benchmark_no_such_flag")) << run;
}

TEST_F(CommandLine, AMinTimeAboveTheMaxTimeExitsTwo) {
  const auto given = roofbench({"--min-time", "5", "--max-time", "1"});
  EXPECT_EQ(given.exit_code, 2) << given;
  EXPECT_THAT(given.err, HasSubstr("--min-time 5 is more than the --max-time of 1, where sampling stops")) << given;
}

TEST_F(CommandLine, RepetitionsBelowOneExitTwo) {
  for (const char* flag : {"--benchmark_repetitions=0", "--benchmark_repetitions=-3"}) {
    const auto run = roofbench({flag});
    EXPECT_EQ(run.exit_code, 2) << run;
    EXPECT_THAT(run.err, HasSubstr("--benchmark_repetitions needs a whole number of at least 1")) << run;
  }
}

// A listing samples nothing: the sampling flags' checks do not refuse it.
TEST_F(CommandLine, AListingIsNotRefusedForSamplingFlags) {
  const auto run = roofbench({"--list", "--min-time", "5", "--max-time", "1", "--benchmark_repetitions=0"});
  EXPECT_EQ(run.exit_code, 0) << run;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every plugin this build has (with CUDA: the GPU plugins too, listed without a GPU) and the test plugins,
// whose load failures have long reasons.
TEST_F(CommandLine, TheListingAndTheHelpFitTheConsole) {
  const auto run = roofbench({"--list", "--plugin-dir", BuildPaths::good_plugins, "--plugin-dir", BuildPaths::mixed_plugins,
                              "--plugin-dir", BuildPaths::broken_plugins});
  EXPECT_EQ(run.exit_code, 0) << run;
  const auto help = roofbench({"--help"});
  for (const auto* text : {&run.out, &help.out})
    for (const std::string& line : lines_of(*text)) EXPECT_LE(line.size(), kConsoleWidth) << line;
}

// The names the shipped plugins give on this machine's default device (with a GPU: the GPU suites'), each
// in a table sized for the longest, with notes: every line fits.
TEST_F(CommandLine, TheShippedBenchmarksRowsFitTheConsole) {
  const auto run = roofbench({"--benchmark_list_tests", "--benchmark_filter=."});
  ASSERT_EQ(run.exit_code, 0) << run;
  std::vector<std::string> names;
  for (std::string line : lines_of(run.out))
    if (const auto suffix = line.find("/iterations:"); suffix != std::string::npos) names.push_back(line.erase(suffix));
  ASSERT_FALSE(names.empty()) << run;
  std::size_t longest = 0;
  for (const auto& name : names) longest = std::max(longest, name.size());
  const TableSettings table{true, name_column_width(longest)};
  Session::Outcome outcome;
  outcome.ran = true;
  Measurement m;
  m.stats.median = 465e-9;
  m.graph = m.cache_resident = true;
  m.energy_note = "the device's energy counter did not advance over the samples' window";
  outcome.result = result_of(m);
  for (const auto& name : names)
    for (const std::string& line : lines_of(table_row(name, outcome, table)))
      EXPECT_LE(line.size(), kConsoleWidth) << name << ": " << line;
}

// Suite files a hostile user writes: each refused before anything runs, naming file:line (exit 2).
TEST_F(CommandLine, ADeeplyNestedSuiteFilterIsRefusedNotACrash) {
  const auto suite = scratch_.write("nested.suite", "description = d\nfilter = " + std::string(100000, '(') + "a" +
                                                        std::string(100000, ')') + "\n");
  const auto run = roofbench({"--suite", suite.string()});
  EXPECT_EQ(run.exit_code, 2) << run.command << " " << run.exit_code;
  EXPECT_THAT(run.err, HasSubstr(suite.string() + ":2: filter regex is 200001 characters long; at most 4096"));
  EXPECT_LT(run.err.size(), 1000u) << "the long line is not echoed whole";
}

TEST_F(CommandLine, ASuiteAxisForAnUnknownCaseOrAxisOrABadValueExitsTwoNamingTheLine) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"axis good/nosuch.n = 1024", "plugin good has no case 'nosuch'"},
      {"axis good/scale.size = 1024", "no axis 'size' in good/scale"},
      {"axis good/*.n = banana", "'banana' is not a whole number"},
  };
  for (const auto& [line, reason] : bad) {
    const auto suite = scratch_.write("axis.suite", "description = d\nplugins = good\nfilter = ^good/\n" + line + "\n");
    const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--suite", suite.string()});
    EXPECT_EQ(run.exit_code, 2) << run;
    EXPECT_THAT(run.err, HasSubstr(suite.string() + ":4: ")) << run;
    EXPECT_THAT(run.err, HasSubstr(reason)) << run;
  }
}

TEST_F(CommandLine, AnInfiniteMaxTimeIsRefusedInASuiteAndOnTheCommandLine) {
  const auto suite = scratch_.write("forever.suite", "description = d\nfilter = ^good/\nmax_time = inf\n");
  const auto in_suite = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--suite", suite.string()});
  EXPECT_EQ(in_suite.exit_code, 2) << in_suite;
  EXPECT_THAT(in_suite.err, HasSubstr(suite.string() + ":3: max_time must be a finite number of seconds, got 'inf'"));
  const auto flag = roofbench({"--max-time", "inf", "--noise", "0"});
  EXPECT_EQ(flag.exit_code, 2) << flag;
  EXPECT_THAT(flag.err, HasSubstr("--max-time needs a finite non-negative number, got 'inf'"));
}

TEST_F(CommandLine, AnEmptySuiteWarnsThatItSelectsEverything) {
  const auto suite = scratch_.write("empty.suite", "# nothing\n");
  const auto run = roofbench({"--plugin-dir", BuildPaths::good_plugins, "--suite", suite.string(), "--list"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.err, HasSubstr("suite " + suite.string() + " has no filter line: it selects every benchmark")) << run;
}

TEST_F(CommandLine, AGpuIndexOrProfileCountOutOfRangeExitsTwoWithTheReason) {
  const auto device = roofbench({"--device=cuda:99999999999"});
  EXPECT_EQ(device.exit_code, 2) << device;
  EXPECT_THAT(device.err, HasSubstr("--device cuda:99999999999: no GPU has an index that large")) << device;
  const auto profile = roofbench({"--profile=1e20"});
  EXPECT_EQ(profile.exit_code, 2) << profile;
  EXPECT_THAT(profile.err, HasSubstr("--profile needs a whole number of runs from 1 to 1000, got '1e20'")) << profile;
}

}  // namespace
}  // namespace roofbench::test_support
