// The base of the GPU tests that run the roofbench binary: each test skipped, with the reason, where this
// process finds no CUDA GPU.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "../support/roofbench_host.hpp"

namespace roofbench::test_support {

class GpuRoofbenchTest : public RoofbenchTest {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA GPU";
  }
};

}  // namespace roofbench::test_support
