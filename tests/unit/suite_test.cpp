#include "suite.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "../support/scratch_dir.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;

// The message a suite parse fails with ("" when it does not fail).
std::string parse_error(const std::string& text, const std::string& path = "/suites/x.suite") {
  try {
    parse_suite(path, text);
  } catch (const SuiteError& e) {
    return e.what();
  }
  return "";
}

TEST(ParseSuite, AValidSuite) {
  const Suite s = parse_suite("/somewhere/nightly.suite", R"(# a comment line
description = Nightly: everything   # trailing comment

plugins = cpu, micro
filter = ^cpu/add/
filter = ^micro/copy/
axis cpu/add.n = 64, 128
axis cpu/*.threads = 1
max_time = 0.5
energy = 2
)");
  EXPECT_EQ(s.name, "nightly");
  EXPECT_EQ(s.path, "/somewhere/nightly.suite");
  EXPECT_EQ(s.description, "Nightly: everything");
  EXPECT_EQ(s.plugins, (std::vector<std::pair<std::string, int>>{{"cpu", 4}, {"micro", 4}}));
  EXPECT_EQ(s.filters, (std::vector<std::pair<std::string, int>>{{"^cpu/add/", 5}, {"^micro/copy/", 6}}));
  EXPECT_EQ(s.axes, (AxisOverrides{{"cpu/add.n", {"64", "128"}}, {"cpu/*.threads", {"1"}}}));
  EXPECT_EQ(s.axis_lines, (std::vector<std::pair<std::string, int>>{{"cpu/add.n", 7}, {"cpu/*.threads", 8}}));
  ASSERT_TRUE(s.max_time.has_value());
  EXPECT_DOUBLE_EQ(*s.max_time, 0.5);
  ASSERT_TRUE(s.energy_seconds.has_value());
  EXPECT_DOUBLE_EQ(*s.energy_seconds, 2);
  EXPECT_EQ(s.combined_filter(), "(^cpu/add/)|(^micro/copy/)");
}

TEST(ParseSuite, CombinedFilterOfOneOrNoFilters) {
  EXPECT_EQ(parse_suite("a.suite", "filter = ^cpu/\n").combined_filter(), "^cpu/");
  EXPECT_EQ(parse_suite("a.suite", "description = nothing\n").combined_filter(), ".");
}

TEST(ParseSuite, TheRepositorysSmokeSuiteParses) {
  const Suite smoke = load_suite_file(ROOFBENCH_TEST_SUITES_DIR "/smoke.suite");
  EXPECT_EQ(smoke.name, "smoke");
  EXPECT_FALSE(smoke.filters.empty());
  EXPECT_TRUE(smoke.max_time.has_value());
}

TEST(ParseSuite, AnUnknownKeyNamesFileAndLine) {
  const std::string error = parse_error("# header\ndescription = d\ncolour = red\n");
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:3:"));
  EXPECT_THAT(error, HasSubstr("unknown key 'colour'"));
}

TEST(ParseSuite, ABadRegexNamesFileAndLine) {
  const std::string error = parse_error("filter = ^cpu/\nfilter = ^cpu/(add\n");
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:2:"));
  EXPECT_THAT(error, HasSubstr("bad filter regex"));
}

TEST(ParseSuite, ALineWithoutEqualsNamesFileAndLine) {
  const std::string error = parse_error("\n\nplugins cpu\n");
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:3:"));
  EXPECT_THAT(error, HasSubstr("expected 'key = value'"));
}

TEST(ParseSuite, BadAxisKeysNameFileAndLine) {
  for (const std::string key : {"axis cpu.n", "axis cpu/add", "axis n.cpu/add", "axis"}) {
    const std::string error = parse_error("description = d\n" + key + " = 1\n");
    EXPECT_THAT(error, HasSubstr("/suites/x.suite:2:")) << key;
  }
  EXPECT_THAT(parse_error("axis cpu/add.n = ,\n"), HasSubstr("has no values"));
}

TEST(ParseSuite, ANonNumericMaxTimeNamesFileAndLine) {
  const std::string error = parse_error("max_time = soon\n");
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:1:"));
  EXPECT_THAT(error, HasSubstr("max_time must be a finite number"));
  EXPECT_THAT(parse_error("energy = 0.5\n"), HasSubstr("energy needs at least 1 s"));
  EXPECT_THAT(parse_error("energy = inf\n"), HasSubstr("energy must be a finite number of seconds"));
  EXPECT_THAT(parse_error("energy = lots\n"), HasSubstr("energy must be a finite number of seconds"));
}

// FIXME(core/src/suite.cpp, parse_suite, key "max_time"): std::stod stops at the first character it
// cannot read and the parser never checks that it read the whole value, so "5 minutes" is accepted as
// 5 seconds and "-1" as a negative time; --max-time on the command line rejects both (options.cpp,
// parse_number). Fails until the suite parser checks the same way.
TEST(ParseSuite, AMaxTimeWithTrailingTextOrBelowZeroIsAnError) {
  EXPECT_THAT(parse_error("max_time = 5 minutes\n"), HasSubstr("/suites/x.suite:1:"));
  EXPECT_THAT(parse_error("max_time = -1\n"), HasSubstr("/suites/x.suite:1:"));
}

TEST(CheckPlugins, AnUnknownPluginNamesTheLineThatAskedForIt) {
  const Suite s = parse_suite("/suites/x.suite", "description = d\nplugins = cpu\nplugins = nosuch\n");
  EXPECT_NO_THROW(s.check_plugins({"cpu", "nosuch"}));
  try {
    s.check_plugins({"cpu"});
    FAIL() << "check_plugins accepted an unknown plugin";
  } catch (const SuiteError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/suites/x.suite:3:"));
    EXPECT_THAT(e.what(), HasSubstr("unknown plugin 'nosuch'"));
  }
}

TEST(CheckPlugins, AnAxisKeyOfAnUnknownPluginNamesItsLine) {
  const Suite s = parse_suite("/suites/x.suite", "axis */*.n = 1\naxis nosuch/add.n = 1\n");
  EXPECT_THROW(
      {
        try {
          s.check_plugins({"cpu"});
        } catch (const SuiteError& e) {
          EXPECT_THAT(e.what(), HasSubstr("/suites/x.suite:2: unknown plugin 'nosuch'"));
          throw;
        }
      },
      SuiteError);
}

TEST(FindSuite, ByNameInTheFirstFolderThatHasIt) {
  test_support::ScratchDir first, second;
  first.write("a.suite", "description = first a\n");
  second.write("a.suite", "description = second a\n");
  second.write("b.suite", "description = second b\n");
  EXPECT_EQ(find_suite("a", {first.path().string(), second.path().string()}).description, "first a");
  EXPECT_EQ(find_suite("b", {first.path().string(), second.path().string()}).description, "second b");
  EXPECT_EQ(list_suites({first.path().string(), second.path().string()}), (std::vector<std::string>{"a", "b"}));
}

TEST(FindSuite, APathIsReadAsAFile) {
  test_support::ScratchDir dir;
  const auto file = dir.write("custom.suite", "filter = ^cpu/\n");
  EXPECT_EQ(find_suite(file.string(), {}).filters.front().first, "^cpu/");
  EXPECT_EQ(find_suite(file.string(), {}).filters.size(), 1u);
  EXPECT_THROW(find_suite((dir / "missing.suite").string(), {}), SuiteError);
}

TEST(FindSuite, AnUnknownNameListsTheKnownSuites) {
  test_support::ScratchDir dir;
  dir.write("a.suite", "");
  dir.write("b.suite", "");
  try {
    find_suite("nosuch", {dir.path().string()});
    FAIL() << "find_suite found a suite that does not exist";
  } catch (const SuiteError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown suite 'nosuch'"));
    EXPECT_THAT(e.what(), HasSubstr("known: a, b"));
  }
}

}  // namespace
}  // namespace roofbench

namespace roofbench {
namespace {

// What a check of a parsed suite against loaded benchmarks throws ("" when it does not).
template <typename Check>
std::string check_error(Check&& check) {
  try {
    check();
  } catch (const SuiteError& e) {
    return e.what();
  }
  return "";
}

// One plugin "cpu" with a case "add" whose axis n takes whole numbers and whose axis kind takes words.
struct CpuAddPlugin {
  Plugin plugin;
  std::vector<BenchmarkSpec> all;
  CpuAddPlugin() {
    plugin.name = "cpu";
    CaseSpec add;
    add.name = "add";
    add.axes = {Axis::ints("n", {64, 128}), Axis::strings("kind", {"plain", "fused"})};
    plugin.add(add);
    all = expand_plugin(plugin);
  }
};

TEST(ParseSuite, AFilterOverTheLengthLimitIsRefusedBeforeItIsCompiled) {
  // Nested groups this deep overflowed std::regex's stack; the limit and the engine are the command line's.
  const std::string nested = std::string(3000, '(') + "a" + std::string(3000, ')');
  const std::string error = parse_error("description = d\nfilter = " + nested + "\n");
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:2:"));
  EXPECT_THAT(error, HasSubstr("6001 characters long; at most 4096"));
}

TEST(ParseSuite, DeepNestingWithinTheLimitDoesNotCrash) {
  const std::string nested = std::string(2000, '(') + "a" + std::string(2000, ')');
  EXPECT_EQ(parse_error("filter = " + nested + "\n"), "");
}

TEST(ParseSuite, ALongBadLineIsEchoedShortened) {
  const std::string error = parse_error("colour" + std::string(1 << 20, 'x') + " = red\n");
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:1:"));
  EXPECT_LT(error.size(), 400u) << error.substr(0, 400);
  EXPECT_THAT(error, HasSubstr("characters"));
}

TEST(ParseSuite, ANegatedFilterAmongSeveralIsRefused) {
  const std::string error = parse_error("filter = ^cpu/\nfilter = -^cpu/add\n");
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:2:"));
  EXPECT_THAT(error, HasSubstr("'-'"));
}

TEST(ParseSuite, ALoneNegatedFilterNegatesAsOnTheCommandLine) {
  const Suite s = parse_suite("/suites/x.suite", "plugins = cpu\nfilter = -^cpu/sub\n");
  EXPECT_EQ(s.combined_filter(), "-^cpu/sub");
  CpuAddPlugin cpu;
  EXPECT_EQ(check_error([&] { s.check_filters(cpu.all); }), "");
  const Suite none = parse_suite("/suites/x.suite", "plugins = cpu\nfilter = -^cpu/add\n");
  EXPECT_THAT(check_error([&] { none.check_filters(cpu.all); }), HasSubstr("/suites/x.suite:2:"));
}

TEST(ParseSuite, FiltersWhoseUnionIsTooLongAreRefused) {
  std::string text;
  for (int i = 0; i < 3; ++i) text += "filter = " + std::string(2000, 'a') + "\n";
  EXPECT_THAT(parse_error(text), HasSubstr("/suites/x.suite:3:"));
}

TEST(CheckAxes, AnAxisLineForAnUnknownCaseNamesItsLine) {
  CpuAddPlugin cpu;
  const Suite s = parse_suite("/suites/x.suite", "axis cpu/add.n = 64\naxis cpu/nosuch.n = 1\n");
  const std::string error = check_error([&] { s.check_axes(cpu.all); });
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:2:"));
  EXPECT_THAT(error, HasSubstr("no case 'nosuch'"));
}

TEST(CheckAxes, AnAxisLineForAnUnknownAxisNamesItsLine) {
  CpuAddPlugin cpu;
  for (const std::string key : {"cpu/add.threads", "cpu/*.threads", "*/*.threads"}) {
    const Suite s = parse_suite("/suites/x.suite", "description = d\naxis " + key + " = 1\n");
    const std::string error = check_error([&] { s.check_axes(cpu.all); });
    EXPECT_THAT(error, HasSubstr("/suites/x.suite:2:")) << key;
    EXPECT_THAT(error, HasSubstr("no axis 'threads'")) << key;
  }
}

TEST(CheckAxes, AWordForAWholeNumberAxisNamesItsLine) {
  CpuAddPlugin cpu;
  const Suite s = parse_suite("/suites/x.suite", "axis cpu/*.n = 64, banana\n");
  const std::string error = check_error([&] { s.check_axes(cpu.all); });
  EXPECT_THAT(error, HasSubstr("/suites/x.suite:1:"));
  EXPECT_THAT(error, HasSubstr("'banana'"));
  EXPECT_THAT(error, HasSubstr("whole number"));
}

TEST(CheckAxes, KnownAxesWithFittingValuesPass) {
  CpuAddPlugin cpu;
  const Suite s = parse_suite("/suites/x.suite", "axis cpu/add.n = 256\naxis */*.kind = fused\naxis cpu/*.n = -1\n");
  EXPECT_EQ(check_error([&] { s.check_axes(cpu.all); }), "");
}

TEST(ParseSuite, AMaxTimeOfInfinityIsRefused) {
  for (const std::string v : {"inf", "infinity", "nan", "1e400"}) {
    const std::string error = parse_error("max_time = " + v + "\n");
    EXPECT_THAT(error, HasSubstr("/suites/x.suite:1:")) << v;
  }
}

TEST(ParseSuite, ASuiteWithoutFilterSaysItSelectsEverything) {
  EXPECT_TRUE(parse_suite("a.suite", "description = all\n").selects_everything());
  EXPECT_FALSE(parse_suite("a.suite", "filter = ^cpu/\n").selects_everything());
}

TEST(CheckFilters, ASuiteWithoutPluginsHoldsTheLinesThatNameALoadedPlugin) {
  // A size the axis lacks (n 1000: the axis has 64 and 128) would drop the line in silence.
  CpuAddPlugin cpu;
  const Suite wrong_size = parse_suite("/suites/x.suite", "filter = ^cpu/add/n:64/\nfilter = ^cpu/add/n:1000/\n");
  EXPECT_THAT(check_error([&] { wrong_size.check_filters(cpu.all); }), HasSubstr("/suites/x.suite:2:"));
  // A plugin this build lacks, or a line that names no plugin literally, is not held to it.
  const Suite elsewhere = parse_suite("/suites/x.suite", "filter = ^nccl/allreduce/\nfilter = add/n:1000\n");
  EXPECT_EQ(check_error([&] { elsewhere.check_filters(cpu.all); }), "");
}

TEST(CheckFilters, ASuiteWithoutPluginsHoldsALineThatNamesSeveralLoadedPlugins) {
  CpuAddPlugin cpu;
  Plugin micro;
  micro.name = "micro";
  CaseSpec copy;
  copy.name = "copy";
  copy.axes = {Axis::ints("bytes", {1024})};
  micro.add(copy);
  std::vector<BenchmarkSpec> both = cpu.all;
  for (const BenchmarkSpec& b : expand_plugin(micro)) both.push_back(b);
  // Both plugins loaded: a line over both that matches nothing fails; one that matches either passes.
  const Suite wrong = parse_suite("/suites/x.suite", "filter = ^(cpu|micro)/add/n:1000/\n");
  EXPECT_THAT(check_error([&] { wrong.check_filters(both); }), HasSubstr("/suites/x.suite:1:"));
  const Suite right = parse_suite("/suites/x.suite", "filter = ^(cpu|micro)/copy/bytes:1024/\n");
  EXPECT_EQ(check_error([&] { right.check_filters(both); }), "");
  // Only cpu loaded: the line may be micro's, so it is not held.
  EXPECT_EQ(check_error([&] { wrong.check_filters(cpu.all); }), "");
  // A '|' outside the group starts another alternative, which may name a plugin this build lacks.
  const Suite split = parse_suite("/suites/x.suite", "filter = ^cpu/add/n:1000/|^nccl/allreduce/\n");
  EXPECT_EQ(check_error([&] { split.check_filters(cpu.all); }), "");
  // A negated lone filter names no plugin literally: not held either.
  const Suite negated = parse_suite("/suites/x.suite", "filter = -^cpu/\n");
  EXPECT_EQ(check_error([&] { negated.check_filters(cpu.all); }), "");
}

}  // namespace
}  // namespace roofbench
