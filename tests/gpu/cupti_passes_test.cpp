// --profile, --kernel-time and --counters together through the real roofbench on a real GPU (label gpu;
// skips without one): two micro cases measured one after the other in one worker, so the second case's
// traces follow the first case's counters pass and each case's counters pass follows its traces. Every
// case gets every pass's figures: a kernel_time, a profile naming its kernel, counters of its kernel (both
// cases run the micro plugin's vec16_kernel).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "gpu_roofbench_test.hpp"

namespace {

using namespace roofbench::test_support;
using ::testing::HasSubstr;
using ::testing::Not;

class CuptiPasses : public GpuRoofbenchTest {};

// What the passes left in one benchmark's entry.
struct Passes {
  std::string status;
  bool kernel_time = false;  // a finite kernel_time
  std::string profile_error, profile_kernels;    // the profile's error and its kernels' names, ';'-joined
  std::string counters_error, counters_kernels;  // likewise the counters'
};

// name -> what its passes left, read from a results file by Python's JSON parser.
std::map<std::string, Passes> passes_in(const std::string& file) {
  const char* script =
      "import json, math, sys\n"
      "for b in json.load(open(sys.argv[1]))['benchmarks']:\n"
      "    r = b['roofbench']\n"
      "    t = b.get('kernel_time')\n"
      "    p, c = r.get('profile', {}), r.get('counters', {})\n"
      "    names = lambda part: ';'.join(k['name'] for k in part.get('kernels', []))\n"
      "    print(b['name'], r['status'], int(isinstance(t, float) and math.isfinite(t)), p.get('error', ''), names(p),\n"
      "          c.get('error', ''), names(c), sep='\\t')\n";
  std::map<std::string, Passes> out;
  for (const std::vector<std::string>& f : python_rows(script, file))
    if (f.size() == 7) out[f[0]] = {f[1], f[2] == "1", f[3], f[4], f[5], f[6]};
  return out;
}

TEST_F(CuptiPasses, AllThreeTogetherGiveEveryCaseTheirFigures) {
  const auto run = roofbench({"--device", "cuda:0", "--plugin-dir", ROOFBENCH_TEST_PLUGIN_DIR, "--max-time", "0.2",
                              "--profile", "--kernel-time", "--counters",
                              "--benchmark_filter=^micro/(add_fp32_vec16/n:1048576|copy_kernel/bytes:16777216)$"});
  ASSERT_EQ(run.exit_code, 0) << run;
  EXPECT_THAT(run.output(), Not(HasSubstr("CUPTI_ERROR_NOT_INITIALIZED"))) << run;
  const auto found = passes_in(latest_results().string());
  ASSERT_EQ(found.size(), 2u) << run;
  for (const auto& [name, p] : found) {
    EXPECT_EQ(p.status, "ok") << name;
    if (p.counters_error.find("INSUFFICIENT_PRIVILEGES") != std::string::npos)
      GTEST_SKIP() << "no counters on this machine: " << p.counters_error;
    EXPECT_TRUE(p.kernel_time) << name << "\n" << run;
    EXPECT_EQ(p.profile_error, "") << name;
    EXPECT_THAT(p.profile_kernels, HasSubstr("vec16_kernel")) << name;
    EXPECT_EQ(p.counters_error, "") << name;
    EXPECT_THAT(p.counters_kernels, HasSubstr("vec16_kernel")) << name;
  }
}

}  // namespace
