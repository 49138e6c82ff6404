// The memory roof each micro case is placed under on a real GPU (label gpu; skips without one): a hot case
// whose bytes fit in L2 under the cache roof, the add that streams DRAM under the mixed roof of its 2/3
// reads, and none of them over 100% of the roof it was placed under.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "gpu_roofbench_test.hpp"

namespace {

using namespace roofbench::test_support;

class RoofPlacement : public GpuRoofbenchTest {};

struct Placed {
  std::string roof;
  double roof_pct = 0;
};

// name -> its memory roof and roof_pct, read from a results file by Python's JSON parser.
std::map<std::string, Placed> placements(const std::string& file) {
  const char* script =
      "import json, sys\n"
      "for b in json.load(open(sys.argv[1]))['benchmarks']:\n"
      "    print(b['name'], b.get('roofbench', {}).get('memory_roof', ''), b.get('roof_pct', -1), sep='\\t')\n";
  std::map<std::string, Placed> out;
  for (const std::vector<std::string>& f : python_rows(script, file))
    if (f.size() == 3) out[f[0]] = {f[1], std::stod(f[2])};
  return out;
}

TEST_F(RoofPlacement, DataInL2IsUnderTheCacheRoofAndTheAddUnderItsMixedRoof) {
  const auto run = roofbench({"--device", "cuda:0", "--plugin-dir", ROOFBENCH_TEST_PLUGIN_DIR, "--max-time", "0.5",
                              "--benchmark_filter=^micro/(copy/bytes:16777216|add_fp32_vec16/n:(1048576|1073741824))$"});
  ASSERT_EQ(run.exit_code, 0) << run;
  const auto placed = placements(latest_results().string());
  ASSERT_EQ(placed.size(), 3u) << run;
  EXPECT_EQ(placed.at("micro/copy/bytes:16777216").roof, "cache");
  EXPECT_EQ(placed.at("micro/add_fp32_vec16/n:1048576").roof, "cache");
  EXPECT_EQ(placed.at("micro/add_fp32_vec16/n:1073741824").roof, "dram mixed 67% read");
  // The DRAM add runs within a few tenths of a percent of its roof on an H200: 1% for a short run's median.
  for (const auto& [name, p] : placed) EXPECT_LE(p.roof_pct, 101.0) << name << " under " << p.roof;
}

}  // namespace
