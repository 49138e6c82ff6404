// The base of the tests of the host's CUDA path: the GPUs the host finds, each test skipped with the
// reason when there is none.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "device.hpp"

namespace roofbench {

class CudaDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    devices_ = make_cuda_devices(why);
    if (devices_.empty()) GTEST_SKIP() << "no CUDA GPU: " << why;
  }
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace roofbench
