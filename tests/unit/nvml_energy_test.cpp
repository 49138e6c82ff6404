// core/src/nvml_energy.cpp against the stand-in libnvidia-ml.so.1 (tests/support/fake_nvml.cpp), which CTest
// puts first on LD_LIBRARY_PATH: one GPU at PCI 0000:00:00.0 drawing 250 W, its counter stepping every 20 ms.
#include "nvml_energy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace roofbench {
namespace {

using ::testing::HasSubstr;

TEST(NvmlEnergyCounter, ReadsTheCounterOfTheGpuAtItsBusIdInJoules) {
  std::string why;
  const auto read = nvml_energy_counter("0000:00:00.0", why);
  ASSERT_TRUE(read) << why;
  const std::optional<double> first = read();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::optional<double> second = read();
  ASSERT_TRUE(first && second);
  EXPECT_NEAR(*second - *first, 250 * 0.2, 250 * 0.05);  // 50 J over 0.2 s, to a step or two of 5 J
}

TEST(NvmlDriverVersion, IsWhatNvmlSays) { EXPECT_EQ(nvml_driver_version(), "580.159.04"); }

TEST(NvmlEnergyCounter, AGpuNvmlDoesNotKnowSaysWhy) {
  std::string why;
  EXPECT_FALSE(nvml_energy_counter("0000:FF:1F.7", why));
  EXPECT_THAT(why, HasSubstr("NVML has no device at PCI 0000:FF:1F.7: Not Found (6)"));
}

TEST(NvmlEnergyCounter, AMigSliceGetsNoCounter) {
  ::setenv("FAKE_NVML_MIG", "1", 1);
  std::string why;
  EXPECT_FALSE(nvml_energy_counter("0000:00:00.0", why));
  EXPECT_THAT(why, HasSubstr("MIG is on"));
  ::unsetenv("FAKE_NVML_MIG");
}

}  // namespace
}  // namespace roofbench
