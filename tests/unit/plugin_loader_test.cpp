// Loads the test plugins (tests/plugins) directly, without the host process.
#include "plugin_loader.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "../support/scoped_env.hpp"
#include "../support/scratch_dir.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

TEST(PluginLoader, FindsSharedLibrariesInNameOrderOncePerFile) {
  const auto files = find_plugin_files({ROOFBENCH_TEST_BROKEN_PLUGINS, ROOFBENCH_TEST_BROKEN_PLUGINS, "/nonexistent"});
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(file_name(f));
  EXPECT_EQ(names, (std::vector<std::string>{"describe_throws.so", "duplicate_axis_names.so", "duplicate_case_names.so",
                                             "no_entry_point.so", "old_string_abi.so", "slash_in_axis_value.so",
                                             "unresolved_symbol.so", "wrong_abi_version.so"}));
}

TEST(PluginLoader, LoadsTheGoodPlugin) {
  const LoadResult result = load_plugins(find_plugin_files({ROOFBENCH_TEST_GOOD_PLUGINS}));
  EXPECT_TRUE(result.failures.empty());
  ASSERT_EQ(result.plugins.size(), 1u);
  const Plugin& good = result.plugins.front().plugin;
  EXPECT_EQ(good.name, "good");
  ASSERT_EQ(good.cases.size(), 2u);
  EXPECT_EQ(good.cases[0].name, "scale");
  EXPECT_EQ(good.cases[1].sweep_axis, "n");
}

TEST(PluginLoader, EachBrokenPluginFailsWithItsReason) {
  test_support::ScratchDir dir;
  const auto text_file = dir.write("notaplugin.so", "this is text, not an ELF file\n");
  auto files = find_plugin_files({ROOFBENCH_TEST_BROKEN_PLUGINS});
  files.push_back(text_file.string());
  const LoadResult result = load_plugins(files);
  EXPECT_TRUE(result.plugins.empty());
  std::map<std::string, std::string> reasons;
  for (const auto& f : result.failures) reasons[file_name(f.path)] = f.reason;
  EXPECT_THAT(reasons["no_entry_point.so"], HasSubstr("no entry point"));
  EXPECT_THAT(reasons["wrong_abi_version.so"], HasSubstr("ABI version 999"));
  EXPECT_THAT(reasons["unresolved_symbol.so"], HasSubstr("undefined symbol"));
  EXPECT_THAT(reasons["unresolved_symbol.so"], HasSubstr("roofbench_test_function_defined_nowhere"));
  EXPECT_THAT(reasons["describe_throws.so"], HasSubstr("describe() threw: describe_throws cannot describe itself"));
  EXPECT_THAT(reasons["duplicate_case_names.so"], HasSubstr("two cases named 'twice'"));
  EXPECT_THAT(reasons["notaplugin.so"], HasSubstr("cannot load"));
  EXPECT_THAT(reasons["old_string_abi.so"], HasSubstr("ABI mismatch: built with _GLIBCXX_USE_CXX11_ABI=0"));
  EXPECT_THAT(reasons["slash_in_axis_value.so"], HasSubstr("has '/'"));
  EXPECT_THAT(reasons["duplicate_axis_names.so"], HasSubstr("two axes named 'n'"));
  EXPECT_EQ(reasons.size(), 9u);
}

TEST(PluginLoader, ASecondPluginOfTheSameNameIsRefused) {
  const std::string good = find_plugin_files({ROOFBENCH_TEST_GOOD_PLUGINS}).at(0);
  const LoadResult result = load_plugins({good, good});
  EXPECT_EQ(result.plugins.size(), 1u);
  ASSERT_EQ(result.failures.size(), 1u);
  EXPECT_THAT(result.failures.front().reason, HasSubstr("a plugin named 'good' is already loaded"));
}

TEST(PluginLoader, DefaultFoldersAreBesideTheExecutableThenThePluginPath) {
  const test_support::ScopedEnv env("ROOFBENCH_PLUGIN_PATH", "/a::/b");
  EXPECT_EQ(default_plugin_folders("/opt/roofbench/bin/roofbench"),
            (std::vector<std::string>{"/opt/roofbench/lib/roofbench/plugins", "/a", "/b"}));
}

}  // namespace
}  // namespace roofbench
