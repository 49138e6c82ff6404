#include "options.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

namespace roofbench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Options parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"roofbench"};
  argv.insert(argv.end(), args);
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

// The message the command line is refused with ("" when it is accepted).
std::string usage_error(std::initializer_list<const char*> args) {
  try {
    parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Options, DefaultsWithoutArguments) {
  const Options o = parse({});
  EXPECT_FALSE(o.help);
  EXPECT_FALSE(o.device.has_value());
  EXPECT_FALSE(o.gpus.has_value());
  EXPECT_FALSE(o.suite.has_value());
  EXPECT_EQ(o.results_dir, "roofbench-results");
  EXPECT_TRUE(o.write_results);
  EXPECT_TRUE(o.measure.gate);
  EXPECT_EQ(o.measure.graph, GraphMode::automatic);
  EXPECT_EQ(o.benchmark_args, (std::vector<std::string>{"roofbench"}));
}

TEST(Options, AnUnknownFlagIsAUsageErrorNamingIt) {
  EXPECT_THAT(usage_error({"--device", "cpu", "--colour"}), HasSubstr("unknown flag '--colour'"));
  EXPECT_THAT(usage_error({"stray"}), HasSubstr("'stray'"));
}

// The plugins read ROOFBENCH_ALGORITHM_CHOICE; the command line refuses a value they would not take.
TEST(Options, AnAlgorithmChoiceFromTheEnvironmentIsTimedOrFirst) {
  const char* outside = std::getenv("ROOFBENCH_ALGORITHM_CHOICE");
  const std::string kept = outside ? outside : "";
  for (const char* good : {"timed", "first", ""}) {
    ::setenv("ROOFBENCH_ALGORITHM_CHOICE", good, 1);
    EXPECT_EQ(usage_error({}), "") << good;
  }
  ::setenv("ROOFBENCH_ALGORITHM_CHOICE", "fastest", 1);
  EXPECT_EQ(usage_error({}), "ROOFBENCH_ALGORITHM_CHOICE must be timed or first, got 'fastest'");
  EXPECT_EQ(usage_error({"--list"}), "");  // nothing is set up, so nothing reads it
  EXPECT_EQ(usage_error({"--help"}), "");
  ::unsetenv("ROOFBENCH_ALGORITHM_CHOICE");
  EXPECT_EQ(usage_error({}), "");
  if (outside) ::setenv("ROOFBENCH_ALGORITHM_CHOICE", kept.c_str(), 1);
}

TEST(Options, Device) {
  EXPECT_EQ(parse({"--device", "cpu"}).device, "cpu");
  EXPECT_EQ(parse({"--device=cuda:0"}).device, "cuda:0");
  EXPECT_EQ(parse({"--device", "cuda:12"}).device, "cuda:12");
  for (const char* bad : {"gpu", "cuda", "cuda:", "cuda:x", "cuda:1a", "CPU"})
    EXPECT_THAT(usage_error({"--device", bad}), HasSubstr("--device must be cpu or cuda:N")) << bad;
  EXPECT_THAT(usage_error({"--device"}), HasSubstr("--device needs a value"));
}

TEST(Options, Gpus) {
  EXPECT_FALSE(parse({"--gpus", "all"}).gpus.has_value());
  EXPECT_EQ(parse({"--gpus", "0,1,3"}).gpus, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(parse({"--gpus=2"}).gpus, (std::vector<int>{2}));
  for (const char* bad : {"0,,1", "a", "0,-1", "1.5"})
    EXPECT_THAT(usage_error({"--gpus", bad}), HasSubstr("--gpus must be")) << bad;
}

TEST(Options, GateAndGraph) {
  EXPECT_FALSE(parse({"--gate", "off"}).measure.gate);
  EXPECT_TRUE(parse({"--gate=on"}).measure.gate);
  EXPECT_THAT(usage_error({"--gate", "maybe"}), HasSubstr("--gate must be on or off"));
  EXPECT_EQ(parse({"--graph", "on"}).measure.graph, GraphMode::on);
  EXPECT_EQ(parse({"--graph=off"}).measure.graph, GraphMode::off);
  EXPECT_EQ(parse({"--graph", "auto"}).measure.graph, GraphMode::automatic);
  EXPECT_THAT(usage_error({"--graph", "always"}), HasSubstr("--graph must be auto, on or off"));
}

// A suite's max_time and energy apply where the command line gave none; a flag, even --energy=0, wins.
// --counters alone replays kernels and falls back to the run; =kernel and =run fix the mode.
TEST(Options, CountersReplay) {
  EXPECT_FALSE(parse({}).measure.counters);
  EXPECT_TRUE(parse({"--counters"}).measure.counters);
  EXPECT_EQ(parse({"--counters"}).measure.counter_replay, CounterReplay::automatic);
  EXPECT_EQ(parse({"--counters=kernel"}).measure.counter_replay, CounterReplay::kernel);
  EXPECT_EQ(parse({"--counters=run"}).measure.counter_replay, CounterReplay::run);
  EXPECT_THAT(usage_error({"--counters=application"}), HasSubstr("--counters takes auto, kernel or run, got 'application'"));
}

TEST(Options, ASuitesSamplingYieldsToTheCommandLine) {
  const auto with_suite = [](std::initializer_list<const char*> args) {
    Options o = parse(args);
    apply_suite_sampling(o, 0.5, 2.0);
    return o.measure;
  };
  EXPECT_EQ(with_suite({}).max_time, 0.5);
  EXPECT_EQ(with_suite({}).energy_seconds, 2.0);
  EXPECT_EQ(with_suite({"--max-time", "3"}).max_time, 3.0);
  EXPECT_EQ(with_suite({"--energy=3"}).energy_seconds, 3.0);
  EXPECT_EQ(with_suite({"--energy"}).energy_seconds, 1.0);  // plain --energy is 1 s, not the suite's 2
  EXPECT_EQ(with_suite({"--energy=0"}).energy_seconds, 0.0);
  Options untouched = parse({});
  apply_suite_sampling(untouched, std::nullopt, std::nullopt);
  EXPECT_EQ(untouched.measure.max_time, parse({}).measure.max_time);
  EXPECT_EQ(untouched.measure.energy_seconds, 0.0);
}

TEST(Options, Energy) {
  EXPECT_EQ(parse({}).measure.energy_seconds, 0);
  EXPECT_EQ(parse({"--energy"}).measure.energy_seconds, 1.0);
  EXPECT_EQ(parse({"--energy=2.5"}).measure.energy_seconds, 2.5);
  EXPECT_THAT(usage_error({"--energy=0.5"}), HasSubstr("at least 1 s"));
  EXPECT_THAT(usage_error({"--energy=inf"}), HasSubstr("a finite non-negative number"));
  EXPECT_EQ(parse({"--energy=0"}).measure.energy_seconds, 0);  // off, and given: a suite's energy does not apply
  EXPECT_TRUE(parse({"--energy=0"}).energy_given);
  EXPECT_FALSE(parse({}).energy_given);
  EXPECT_THAT(usage_error({"--energy=lots"}), HasSubstr("--energy needs a finite non-negative number"));
  // Sampling lasts at least --energy's seconds, so the default timeout grows with it.
  MeasureOptions m;
  const double plain = default_timeout_seconds(m);
  m.energy_seconds = 3 * m.max_time;
  EXPECT_GT(default_timeout_seconds(m), plain);
}

TEST(Options, Times) {
  const Options o = parse({"--max-time", "0.05", "--min-time=0.01", "--noise", "0.1"});
  EXPECT_DOUBLE_EQ(o.measure.max_time, 0.05);
  EXPECT_TRUE(o.max_time_given);
  EXPECT_DOUBLE_EQ(o.measure.min_time, 0.01);
  EXPECT_DOUBLE_EQ(o.measure.noise_bound, 0.1);
  for (const char* bad : {"-1", "abc", "5s", ""})
    EXPECT_THAT(usage_error({"--max-time", bad}), HasSubstr("--max-time needs a finite non-negative number")) << bad;
}

TEST(Options, RunsPerSample) {
  EXPECT_EQ(parse({}).measure.runs_per_sample, 0);
  EXPECT_EQ(parse({"--runs-per-sample", "100"}).measure.runs_per_sample, 100);
  for (const char* bad : {"0", "1.5", "-3", "many", "100001"})
    EXPECT_THAT(usage_error({"--runs-per-sample", bad}), HasSubstr("--runs-per-sample")) << bad;
}

TEST(Options, FlagsWithoutValues) {
  const Options o = parse({"--list", "--recalibrate", "--cold", "--no-results", "--help"});
  EXPECT_TRUE(o.list);
  EXPECT_TRUE(o.recalibrate);
  EXPECT_TRUE(o.measure.cold);
  EXPECT_FALSE(o.write_results);
  EXPECT_TRUE(o.help);
  EXPECT_THAT(usage_error({"--list=yes"}), HasSubstr("--list takes no value"));
}

TEST(Options, FoldersAndSuite) {
  const Options o = parse({"--suite", "smoke", "--suite-dir", "/a", "--suite-dir=/b", "--results-dir", "/r",
                           "--plugin-dir", "/"});
  EXPECT_EQ(o.suite, "smoke");
  EXPECT_EQ(o.suite_dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(o.results_dir, "/r");
  EXPECT_EQ(o.plugin_dirs, (std::vector<std::string>{"/"}));
  EXPECT_THAT(usage_error({"--plugin-dir", "/nonexistent/roofbench"}), HasSubstr("no such folder '/nonexistent/roofbench'"));
}

TEST(Options, GoogleBenchmarkFlagsPassThroughInOrder) {
  const Options o = parse({"--benchmark_filter=^cpu/", "--device", "cpu", "--benchmark_repetitions=3",
                           "--benchmark_list_tests", "--v=2"});
  EXPECT_EQ(o.benchmark_args, (std::vector<std::string>{"roofbench", "--benchmark_filter=^cpu/",
                                                        "--benchmark_repetitions=3", "--benchmark_list_tests",
                                                        "--v=2"}));
  EXPECT_EQ(o.device, "cpu");
}

TEST(Options, IsolationAndTimeout) {
  EXPECT_EQ(parse({}).isolation, Isolation::process);
  EXPECT_FALSE(parse({}).timeout_s);
  const Options o = parse({"--isolation=none", "--timeout", "2.5"});
  EXPECT_EQ(o.isolation, Isolation::none);
  EXPECT_EQ(o.timeout_s, 2.5);
  EXPECT_THAT(usage_error({"--isolation=thread"}), HasSubstr("--isolation must be process or none"));
  EXPECT_THAT(usage_error({"--timeout=-1"}), HasSubstr("--timeout needs a finite non-negative number"));
  // The default fits the slowest shipped benchmark (about 15 s with 5 s of sampling) with room to spare.
  EXPECT_GE(default_timeout_seconds(MeasureOptions{}), 60);
}

TEST(Options, HelpAndTheReferenceShowEveryOptionOfTheParsersTable) {
  const std::string help = usage_text(), reference = usage_markdown();
  // The help's words, wrapped or not.
  std::string words;
  std::istringstream in(help);
  for (std::string word; in >> word;) words += " " + word;
  for (const OptionSpec& spec : option_table()) {
    if (spec.hidden) continue;
    EXPECT_THAT(help, HasSubstr("  " + spec.flag)) << spec.flag;
    EXPECT_THAT(reference, HasSubstr("| `" + spec.flag)) << spec.flag;
    if (!spec.default_text.empty()) {
      EXPECT_THAT(words, HasSubstr("(default: " + spec.default_text + ")")) << spec.flag;
    }
  }
  EXPECT_THAT(help, Not(HasSubstr("--help-markdown")));
  EXPECT_TRUE(parse({"--help-markdown"}).help_markdown);
  EXPECT_THAT(words, HasSubstr("(default: 0.01)")) << "defaults come from the options' own defaults";
}

}  // namespace
}  // namespace roofbench

namespace roofbench {
namespace {

TEST(OptionsRefused, InfiniteTimesSoNoTimeoutIsEverInfinite) {
  for (const char* flag : {"--max-time", "--min-time", "--noise", "--timeout"})
    for (const char* value : {"inf", "infinity", "1e400", "nan"})
      EXPECT_THAT(usage_error({flag, value}), HasSubstr(std::string(flag) + " needs a finite non-negative number"))
          << flag << " " << value;
}

TEST(OptionsRefused, AGpuIndexTooLargeForAnIntSaysSo) {
  EXPECT_THAT(usage_error({"--device=cuda:99999999999"}), HasSubstr("--device cuda:99999999999: no GPU has an index that large"));
  EXPECT_THAT(usage_error({"--gpus=0,99999999999"}), HasSubstr("--gpus must be 'all' or a list like 0,1"));
}

TEST(OptionsRefused, AProfileCountOutOfRangeSaysTheRange) {
  for (const char* value : {"1e20", "0", "2.5", "1001"})
    EXPECT_THAT(usage_error({(std::string("--profile=") + value).c_str()}), HasSubstr("--profile needs a whole number of runs from 1 to 1000"))
        << value;
  EXPECT_EQ(parse({"--profile=1000"}).measure.profile_runs, 1000);
}

}  // namespace
}  // namespace roofbench
