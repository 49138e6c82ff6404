#include "cuda_arch.hpp"

#include <gtest/gtest.h>

#include <cstdio>

#include "cpu_backed_device.hpp"
#include "device.hpp"
#include "measure.hpp"

namespace roofbench {
namespace {

// Fake probes standing in for cmake/RoofbenchCudaProbe.cu on devices that can and cannot run a plugin.
int hopper_only_on_an_a100(char* architectures, int capacity) {
  std::snprintf(architectures, static_cast<std::size_t>(capacity), "900");
  return 209;  // cudaErrorNoKernelImageForDevice
}
int hopper_on_an_h200(char* architectures, int capacity) {
  std::snprintf(architectures, static_cast<std::size_t>(capacity), "900");
  return 0;
}
int no_driver(char* architectures, int capacity) {
  std::snprintf(architectures, static_cast<std::size_t>(capacity), "900");
  return 35;  // cudaErrorInsufficientDriver: the host's device checks report that, not this
}

TEST(CudaArch, NamesTheArchitecturesOfTheList) {
  EXPECT_EQ(cuda_architecture_names("900"), "sm_90");
  EXPECT_EQ(cuda_architecture_names("800,860,900"), "sm_80, sm_86, sm_90");
  EXPECT_EQ(cuda_architecture_names(""), "unknown architectures");
}

TEST(CudaArch, APluginWithoutCodeForTheDeviceIsRefusedInOneLine) {
  const auto refusal = cuda_architecture_refusal(hopper_only_on_an_a100, "micro", "cuda:0", "NVIDIA A100-SXM4-80GB", 80);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(*refusal,
            "plugin micro has no code for cuda:0 (NVIDIA A100-SXM4-80GB, sm_80): built for sm_90; rebuild with "
            "-DCMAKE_CUDA_ARCHITECTURES=80 (or \"80;90\" for all of them)");
  EXPECT_EQ(refusal->find('\n'), std::string::npos);
}

TEST(CudaArch, APluginThatCanRunIsNotRefused) {
  EXPECT_FALSE(cuda_architecture_refusal(hopper_on_an_h200, "micro", "cuda:0", "NVIDIA H200", 90));
}

TEST(CudaArch, OtherErrorsAndPluginsWithoutAProbeAreLeftToTheHost) {
  EXPECT_FALSE(cuda_architecture_refusal(no_driver, "micro", "cuda:0", "NVIDIA H200", 90));
  EXPECT_FALSE(cuda_architecture_refusal(nullptr, "cpu", "cuda:0", "NVIDIA H200", 90));
}


// measure() asks each rank through the plugin's probe before the case is made: a plugin without code for
// the device is not applicable there, with the one line, and none of its code runs.
class FakeA100 final : public CpuBackedDevice {
 public:
  FakeA100() : CpuBackedDevice("fake-a100") {}
  std::optional<std::string> architecture_refusal(CudaProbe probe, std::string_view plugin) override {
    return cuda_architecture_refusal(probe, plugin, "cuda:0", "NVIDIA A100-SXM4-80GB", 80);
  }
};

TEST(CudaArch, MeasureRefusesThePluginBeforeMakingTheCase) {
  bool made = false;
  CaseSpec spec;
  spec.name = "c";
  spec.make = [&](const Params&) -> std::unique_ptr<Case> {
    made = true;
    return nullptr;
  };
  BenchmarkSpec b{"micro/c", "micro", &spec, Params{}, hopper_only_on_an_a100};
  FakeA100 gpu;
  const Result r = measure(b, {&gpu}, Ceilings{}, MeasureOptions{});
  EXPECT_EQ(r.status, Status::refused);  // not run, and a failure of the run (SessionTest)
  EXPECT_NE(r.message.find("plugin micro has no code for cuda:0 (NVIDIA A100-SXM4-80GB, sm_80): built for sm_90"),
            std::string::npos)
      << r.message;
  EXPECT_FALSE(made);
  b.cuda_probe = hopper_on_an_h200;
  EXPECT_NE(measure(b, {&gpu}, Ceilings{}, MeasureOptions{}).message.find("make() returned no case"), std::string::npos);
  EXPECT_TRUE(made);
}

}  // namespace
}  // namespace roofbench
