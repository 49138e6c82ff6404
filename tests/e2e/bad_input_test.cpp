// The real roofbench executable against inputs a hostile user would give it: results faster than the
// machine can go, corrupt or unwritable ceilings caches, plugins that fail to load, terminal escapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../support/roofbench_host.hpp"

namespace roofbench::test_support {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs roofbench with its ceilings cache in `cache_dir` (not the shared one, which these tests change).
class OwnCeilingsCache : public RoofbenchTest {
 protected:
  // A copy of the shared, freshly measured cache.
  void copy_shared_cache() {
    fs::create_directories(cache_dir_);
    for (const auto& entry : fs::directory_iterator(BuildPaths::ceilings_cache))
      fs::copy_file(entry.path(), cache_dir_ / entry.path().filename(), fs::copy_options::overwrite_existing);
  }
  fs::path cache_file() const {
    for (const auto& entry : fs::directory_iterator(cache_dir_))
      if (entry.path().extension() == ".ceilings") return entry.path();
    return {};
  }
  ProcessResult run_with_cache(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{BuildPaths::roofbench, "--device", "cpu", "--max-time", "0.05",
                                  "--results-dir", results_dir().string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, {{"ROOFBENCH_CACHE_DIR", cache_dir_.string()}}, {"ROOFBENCH_PLUGIN_PATH"});
  }
  fs::path cache_dir_ = scratch_ / "cache";
};

// A run that had to measure the ceilings on a machine too busy to let them settle is refused (exit 1,
// said in one line); the test cannot judge the rest then.
#define SKIP_IF_TOO_BUSY_TO_MEASURE(run)                                                       \
  if ((run).exit_code == 1 && (run).err.find("the machine is too busy to measure") != std::string::npos) \
  GTEST_SKIP() << "this machine was too busy to measure its ceilings: " << (run).err

using Implausible = OwnCeilingsCache;
using CeilingsCache = OwnCeilingsCache;

// The console's text with its wrapped lines joined again: a line break and the indent under it read as a space.
std::string unwrapped(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' || i + 1 >= text.size() || text[i + 1] != ' ') {
      out += text[i];
      continue;
    }
    while (i + 1 < text.size() && text[i + 1] == ' ') ++i;
    out += ' ';
  }
  return out;
}

// A case whose run() does nothing while its work claims 1e9 FLOP is a failure naming the likely cause;
// the honest case beside it is still measured and kept; the cache is marked stale and measured again.
TEST_F(Implausible, AResultBeyondTheCeilingsFailsAndMarksThemStale) {
  copy_shared_cache();
  const auto run = run_with_cache({"--plugin-dir", BuildPaths::hostile_plugins, "--benchmark_filter=^hostile/(idle|honest)/"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.out, HasSubstr("FAIL (implausible)")) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  const BenchmarkEntry* idle = results->find("hostile/idle/n:1024");
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->status, "implausible");
  EXPECT_THAT(idle->error_message, AllOf(HasSubstr("implausible: FLOP/s"), HasSubstr("fp32 roof"),
                                         HasSubstr("likely cause: work() counts that do not match what run() does")));
  EXPECT_THAT(idle->counters, Not(::testing::Contains("roof_pct"))) << "not reported as a measurement";
  const BenchmarkEntry* honest = results->find("hostile/honest/n:1024");
  ASSERT_TRUE(honest);
  EXPECT_EQ(honest->status, "ok");

  EXPECT_THAT(read_text(cache_file()), HasSubstr("stale hostile/idle/n:1024: implausible"));
  const auto again = run_with_cache({"--plugin-dir", BuildPaths::hostile_plugins, "--benchmark_filter=^hostile/honest/"});
  EXPECT_THAT(unwrapped(again.err), HasSubstr("are not used: marked stale: hostile/idle/n:1024")) << again;
  EXPECT_THAT(again.err, HasSubstr("measuring the ceilings")) << again;
  SKIP_IF_TOO_BUSY_TO_MEASURE(again);
  EXPECT_EQ(again.exit_code, 0) << again;
  EXPECT_THAT(read_text(cache_file()), Not(HasSubstr("stale"))) << "measured again and rewritten";
}

// An absurd figure in the cache is named, and the ceilings are measured again and rewritten.
TEST_F(CeilingsCache, AnAbsurdCacheIsMeasuredAgainWithANote) {
  copy_shared_cache();
  std::string text = read_text(cache_file());
  const auto at = text.find("\nbandwidth ");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, text.find('\n', at + 1) - at, "\nbandwidth 14");
  std::ofstream(cache_file()) << text;
  const auto run = run_with_cache({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/n:1024/"});
  EXPECT_THAT(unwrapped(run.err), HasSubstr("are not used: bandwidth 14 B/s is outside")) << run;
  SKIP_IF_TOO_BUSY_TO_MEASURE(run);
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(read_text(cache_file()), Not(HasSubstr("bandwidth 14\n")));
}

// A cache folder that cannot be created is said once; the run still measures and passes.
TEST_F(CeilingsCache, ACacheThatCannotBeWrittenIsSaidOnce) {
  scratch_.write("not-a-folder", "x");
  cache_dir_ = scratch_ / "not-a-folder" / "cache";
  const auto run = run_with_cache({"--plugin-dir", BuildPaths::good_plugins, "--benchmark_filter=^good/scale/"});
  SKIP_IF_TOO_BUSY_TO_MEASURE(run);
  EXPECT_EQ(run.exit_code, 0) << run;
  const std::string said = "could not cache the ceilings (every run will measure them again)";
  EXPECT_THAT(run.err, HasSubstr(said)) << run;
  EXPECT_EQ(run.err.find(said), run.err.rfind(said)) << run;
}

using PluginFailures = RoofbenchTest;

TEST_F(PluginFailures, AFilterNamingAPluginThatFailedIsAFailedRunNotAUsageError) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::killer_plugins, "--benchmark_filter=^segfault_in_describe/"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("3 plugins could not be loaded (see above), which may hold them")) << run;
}

// A library without roofbench's entry point beside the plugins is a warning only.
TEST_F(PluginFailures, AStrayLibraryIsAWarning) {
  fs::create_directories(scratch_ / "stray");
  fs::copy_file(fs::path(BuildPaths::broken_plugins) / "no_entry_point.so", scratch_ / "stray" / "libhelper.so");
  const auto run = roofbench({"--plugin-dir", (scratch_ / "stray").string(), "--plugin-dir", BuildPaths::good_plugins,
                              "--benchmark_filter=^good/scale/n:1024/"});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.err, HasSubstr("libhelper.so not loaded: no entry point 'roofbench_plugin' (not a roofbench plugin?) "
                                 "(a warning: it is not a plugin)")) << run;
}

TEST_F(PluginFailures, JunkInThePluginPathIsNamed) {
  const auto file = scratch_.write("a-file", "x");
  const auto run = run_process({BuildPaths::roofbench, "--list"},
                               {{"ROOFBENCH_PLUGIN_PATH", "/no/such/folder::" + file.string()},
                                {"ROOFBENCH_CACHE_DIR", BuildPaths::ceilings_cache}});
  EXPECT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.err, HasSubstr("ROOFBENCH_PLUGIN_PATH entry '/no/such/folder': no such folder; skipped")) << run;
  EXPECT_THAT(run.err, HasSubstr("ROOFBENCH_PLUGIN_PATH entry '" + file.string() + "': not a folder; skipped")) << run;
}

using Escapes = RoofbenchTest;

// Control bytes from a plugin never reach the terminal or the results file raw; a newline in an item
// name does not break the console row.
TEST_F(Escapes, ControlBytesFromAPluginAreShownEscaped) {
  const auto run = roofbench({"--plugin-dir", BuildPaths::hostile_plugins, "--benchmark_filter=^hostile/(escapes|newline_items)/"});
  EXPECT_EQ(run.exit_code, 1) << run;
  EXPECT_THAT(run.output(), Not(HasSubstr("\x1b"))) << run;
  EXPECT_THAT(run.output(), Not(HasSubstr("\a"))) << run;
  EXPECT_THAT(run.output(), Not(HasSubstr("\r"))) << run;
  EXPECT_THAT(run.out, HasSubstr("\\x1b[2J\\x1b[31mred")) << run;
  EXPECT_THAT(run.out, Not(HasSubstr("rows\nbroken"))) << run;
  const std::string results = read_text(latest_results());
  EXPECT_THAT(results, Not(HasSubstr("\\u001b"))) << results;
  EXPECT_THAT(results, HasSubstr("rows\\\\x0abroken"));
}

}  // namespace
}  // namespace roofbench::test_support
