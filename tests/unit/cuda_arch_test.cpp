#include "cuda_arch.hpp"

#include <gtest/gtest.h>

#include <cstdio>

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

}  // namespace
}  // namespace roofbench
