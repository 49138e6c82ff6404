// Process isolation on a real GPU (label gpu; skips without one): an illegal memory access, a
// cudaDeviceReset() in run(), a cudaDeviceSynchronize() inside a graph-captured run, a kernel that never
// ends and a case leaking 10 GiB per benchmark each cost only their own benchmark; the one after each
// passes its gate. A CUDA plugin built for another GPU generation is refused in one line. Run alone:
// ctest -L gpu -R GpuIsolation --output-on-failure (or the binary). A case whose kernel runs on a stream
// of its own, which the host never times, fails as implausible, in a graph and without.
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "gpu_roofbench_test.hpp"

namespace roofbench::test_support {
namespace {

using ::testing::HasSubstr;

class GpuIsolation : public GpuRoofbenchTest {};

// The case's own launches go to the device it was given, not to cuda:0, the thread's default.
TEST_F(GpuIsolation, ASingleGpuCaseRunsOnTheDeviceItWasGiven) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "one GPU: the test needs a device other than cuda:0";
  const std::string device = "cuda:" + std::to_string(count - 1);
  const auto run = roofbench({"--device", device, "--plugin-dir", ROOFBENCH_TEST_GPU_PLUGINS,
                              "--benchmark_filter=^hostile_gpu/a_passes"});
  EXPECT_EQ(run.exit_code, 0) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  const BenchmarkEntry* b = results->find("hostile_gpu/a_passes");
  ASSERT_TRUE(b) << run;
  EXPECT_EQ(b->status, "ok") << b->error_message;
  EXPECT_EQ(b->gate, "pass");
}

TEST_F(GpuIsolation, EachWreckCostsOnlyItsBenchmark) {
  const auto run = roofbench({"--device", "cuda:0", "--plugin-dir", ROOFBENCH_TEST_GPU_PLUGINS, "--graph", "auto",
                              "--benchmark_filter=^hostile_gpu/"});
  EXPECT_EQ(run.exit_code, 1) << run;
  const auto results = read_results(latest_results());
  ASSERT_TRUE(results);
  EXPECT_EQ(results->context.at("complete"), "true");
  for (const char* name : {"hostile_gpu/a_passes", "hostile_gpu/c_passes", "hostile_gpu/e_passes", "hostile_gpu/g_passes",
                           "hostile_gpu/i_passes", "hostile_gpu/k_passes"}) {
    const BenchmarkEntry* b = results->find(name);
    ASSERT_TRUE(b) << name << run;
    EXPECT_EQ(b->status, "ok") << name << ": " << b->error_message;
    EXPECT_EQ(b->gate, "pass") << name;
  }
  for (const char* name : {"hostile_gpu/b_illegal_access", "hostile_gpu/d_device_reset", "hostile_gpu/f_synchronize_in_run"}) {
    const BenchmarkEntry* b = results->find(name);
    ASSERT_TRUE(b) << name;
    EXPECT_NE(b->status, "ok") << name;
    std::cout << name << ": " << b->status << ": " << b->error_message << "\n";
  }
  const BenchmarkEntry* hang = results->find("hostile_gpu/h_endless_kernel");
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->status, "timed_out") << hang->error_message;
  int leaks = 0;
  for (const auto& b : results->benchmarks) {
    if (b.name.rfind("hostile_gpu/j_leaks_10_gib/", 0) != 0) continue;
    ++leaks;
    EXPECT_EQ(b.status, "ok") << b.name << ": " << b.error_message;
    EXPECT_THAT(b.error_message, HasSubstr("leaked")) << b.name;
    EXPECT_TRUE(b.keys.count("leaked_mem")) << b.name;
  }
  EXPECT_EQ(leaks, 16);
}

TEST_F(GpuIsolation, PluginBuiltForAnotherArchitectureIsRefusedInOneLine) {
  cudaDeviceProp properties{};
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  if (properties.major == 8) GTEST_SKIP() << "this sm_8x device can run the sm_80 plugin";
  const auto run = roofbench({"--device", "cuda:0", "--plugin-dir", ROOFBENCH_TEST_OTHER_ARCHITECTURE_PLUGINS,
                              "--benchmark_filter=^scale_cuda/scale/n:1024/"});
  const std::string expected = "plugin scale_cuda has no code for cuda:0 (" + std::string(properties.name) + ", sm_" +
                               std::to_string(properties.major * 10 + properties.minor) + "): built for sm_80";
  // The summary wraps its lines at the console's width, where depends on the device's name: its continuation
  // lines (a line break and indentation) read as one space.
  const std::string unwrapped = std::regex_replace(run.output(), std::regex("\n +"), " ");
  EXPECT_THAT(unwrapped, HasSubstr(expected)) << run;
  EXPECT_EQ(run.exit_code, 1) << "a build that cannot measure this GPU fails the run\n" << run;
  EXPECT_THAT(run.output(), HasSubstr("1 benchmark was not run because their plugin has no code for this GPU"));
  std::cout << run.output();
  // Not run, so not among the results' benchmarks: under roofbench.not_run with its reason.
  ASSERT_TRUE(read_results(latest_results()));
  std::ifstream file(latest_results());
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("\"case\": \"scale_cuda/scale/n:1024\"")) << text;
  EXPECT_THAT(text, HasSubstr(expected)) << text;
}

// The kernel on the case's own stream is timed at next to nothing: a failure naming the likely cause,
// never a result at millions of percent of the roof; the same kernel on the given stream passes.
TEST_F(GpuIsolation, WorkOffTheGivenStreamIsImplausibleWithAndWithoutGraphs) {
  for (const char* graph : {"on", "off"}) {
    const auto run = roofbench({"--device", "cuda:0", "--plugin-dir", ROOFBENCH_TEST_OFF_STREAM_PLUGINS, "--graph", graph,
                                "--benchmark_filter=^off_stream/"});
    EXPECT_EQ(run.exit_code, 1) << run;
    const auto results = read_results(latest_results());
    ASSERT_TRUE(results);
    const BenchmarkEntry* own = results->find("off_stream/on_own_stream");
    ASSERT_TRUE(own) << run;
    EXPECT_EQ(own->status, "implausible") << "--graph " << graph << ": " << own->error_message;
    EXPECT_THAT(own->error_message, HasSubstr("work not on the stream the host gives")) << "--graph " << graph;
    const BenchmarkEntry* given = results->find("off_stream/on_given_stream");
    ASSERT_TRUE(given) << run;
    EXPECT_EQ(given->status, "ok") << "--graph " << graph << ": " << given->error_message;
  }
}

}  // namespace
}  // namespace roofbench::test_support
