// A Device that does its work on the CPU device, for tests that need a device to say something the CPU does
// not (another GPU's architecture, an energy counter): derive and override just that.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "device.hpp"

namespace roofbench {

class CpuBackedDevice : public Device {
 public:
  explicit CpuBackedDevice(std::string key) : cpu_(make_cpu_device()), key_(std::move(key)) {}
  const DeviceInfo& info() const override { return cpu_->info(); }
  std::string key() const override { return key_; }
  void* stream() override { return nullptr; }
  void* allocate(std::size_t bytes) override { return cpu_->allocate(bytes); }
  void release(void* data) noexcept override { cpu_->release(data); }
  void fill_random(void* d, std::size_t n, ElementType t, double lo, double hi, std::uint64_t seed) override {
    cpu_->fill_random(d, n, t, lo, hi, seed);
  }
  void poison(void* data, std::size_t bytes) override { cpu_->poison(data, bytes); }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override { cpu_->copy_to_host(dst, src, bytes); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override { cpu_->copy_to_device(dst, src, bytes); }
  void synchronize() override {}
  double driver_used_bytes() override { return 0; }
  Ceilings measure_ceilings(std::vector<std::string>&) override { return {}; }

 private:
  std::unique_ptr<Device> cpu_;
  std::string key_;
};

}  // namespace roofbench
