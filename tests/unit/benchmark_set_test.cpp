#include "benchmark_set.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace roofbench {
namespace {

using Items = std::vector<std::pair<std::string, std::string>>;

std::vector<Items> items_of(const std::vector<Params>& points) {
  std::vector<Items> out;
  for (const auto& p : points) out.push_back(p.items());
  return out;
}

std::vector<std::string> names_of(const std::vector<BenchmarkSpec>& benchmarks) {
  std::vector<std::string> out;
  for (const auto& b : benchmarks) out.push_back(b.name);
  return out;
}

// A case that is never run: expansion only reads names and axes.
CaseSpec case_with_axes(std::string name, std::vector<Axis> axes, std::string sweep_axis = "") {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.axes = std::move(axes);
  spec.sweep_axis = std::move(sweep_axis);
  spec.make = [](const Params&) -> std::unique_ptr<Case> { return nullptr; };
  return spec;
}

Plugin plugin_with_two_cases() {
  Plugin plugin;
  plugin.name = "p";
  plugin.add(case_with_axes("c", {Axis::ints("n", {1, 2}), Axis::strings("type", {"a", "b"})}));
  plugin.add(case_with_axes("d", {Axis::ints("n", {1, 2, 3})}));
  return plugin;
}

TEST(ExpandAxes, CartesianProductWithTheFirstAxisVaryingSlowest) {
  const auto points = expand_axes({Axis::ints("n", {1, 2}), Axis::strings("type", {"a", "b", "c"})});
  EXPECT_EQ(items_of(points), (std::vector<Items>{
                                  {{"n", "1"}, {"type", "a"}},
                                  {{"n", "1"}, {"type", "b"}},
                                  {{"n", "1"}, {"type", "c"}},
                                  {{"n", "2"}, {"type", "a"}},
                                  {{"n", "2"}, {"type", "b"}},
                                  {{"n", "2"}, {"type", "c"}},
                              }));
}

TEST(ExpandAxes, NoAxesGiveOneEmptyPoint) {
  const auto points = expand_axes({});
  ASSERT_EQ(points.size(), 1u);
  EXPECT_TRUE(points.front().items().empty());
}

TEST(ExpandAxes, AnAxisWithoutValuesGivesNoPoints) {
  EXPECT_TRUE(expand_axes({Axis::ints("n", {1}), Axis::strings("empty", {})}).empty());
}

TEST(AxisHelpers, PowersStopAtTheLastValueThatFits) {
  EXPECT_EQ(Axis::powers("n", 1, 8).values, (std::vector<std::string>{"1", "2", "4", "8"}));
  EXPECT_EQ(Axis::powers("n", 4096, 100000, 4).values, (std::vector<std::string>{"4096", "16384", "65536"}));
}

TEST(BenchmarkName, JoinsPluginCaseAndEveryAxisInOrder) {
  EXPECT_EQ(benchmark_name("p", "c", Params({{"n", "64"}, {"type", "bf16"}})), "p/c/n:64/type:bf16");
  EXPECT_EQ(benchmark_name("p", "c", Params()), "p/c");
}

TEST(ExpandPlugin, EveryCaseAtEveryPointInCaseOrder) {
  const Plugin plugin = plugin_with_two_cases();
  const auto benchmarks = expand_plugin(plugin);
  EXPECT_EQ(names_of(benchmarks), (std::vector<std::string>{"p/c/n:1/type:a", "p/c/n:1/type:b", "p/c/n:2/type:a",
                                                            "p/c/n:2/type:b", "p/d/n:1", "p/d/n:2", "p/d/n:3"}));
  EXPECT_EQ(benchmarks.front().plugin, "p");
  EXPECT_EQ(benchmarks.front().spec, &plugin.cases[0]);
  EXPECT_EQ(benchmarks.back().spec, &plugin.cases[1]);
  EXPECT_EQ(benchmarks.back().params.str("n"), "3");
}

TEST(ExpandPlugin, AnExactKeyOverridesOneCaseOnly) {
  const Plugin plugin = plugin_with_two_cases();
  const auto benchmarks = expand_plugin(plugin, {{"p/c.n", {"8"}}});
  EXPECT_EQ(names_of(benchmarks),
            (std::vector<std::string>{"p/c/n:8/type:a", "p/c/n:8/type:b", "p/d/n:1", "p/d/n:2", "p/d/n:3"}));
}

TEST(ExpandPlugin, APluginWildcardKeyOverridesEveryCaseWithThatAxis) {
  const Plugin plugin = plugin_with_two_cases();
  const auto benchmarks = expand_plugin(plugin, {{"p/*.n", {"5", "6"}}});
  EXPECT_EQ(names_of(benchmarks), (std::vector<std::string>{"p/c/n:5/type:a", "p/c/n:5/type:b", "p/c/n:6/type:a",
                                                            "p/c/n:6/type:b", "p/d/n:5", "p/d/n:6"}));
}

TEST(ExpandPlugin, TheExactKeyWinsOverThePluginWildcard) {
  const Plugin plugin = plugin_with_two_cases();
  const auto benchmarks = expand_plugin(plugin, {{"p/*.n", {"5"}}, {"p/d.n", {"7"}}});
  EXPECT_EQ(names_of(benchmarks), (std::vector<std::string>{"p/c/n:5/type:a", "p/c/n:5/type:b", "p/d/n:7"}));
}

TEST(ExpandPlugin, KeysForOtherPluginsOrAxesChangeNothing) {
  const Plugin plugin = plugin_with_two_cases();
  EXPECT_EQ(names_of(expand_plugin(plugin, {{"q/*.n", {"9"}}, {"p/c.m", {"9"}}})), names_of(expand_plugin(plugin)));
}

TEST(SweepGroup, TheNameWithoutTheSweepAxis) {
  Plugin plugin;
  plugin.name = "p";
  plugin.add(case_with_axes("c", {Axis::ints("batch", {2}), Axis::ints("n", {4, 8})}, "n"));
  const auto benchmarks = expand_plugin(plugin);
  ASSERT_EQ(benchmarks.size(), 2u);
  EXPECT_EQ(sweep_group(benchmarks[0]), "p/c/batch:2");
  EXPECT_EQ(sweep_group(benchmarks[0]), sweep_group(benchmarks[1]));
}

TEST(SweepGroup, EmptyForACaseWithoutASweepAxis) {
  const Plugin plugin = plugin_with_two_cases();
  EXPECT_EQ(sweep_group(expand_plugin(plugin).front()), "");
}

}  // namespace
}  // namespace roofbench
