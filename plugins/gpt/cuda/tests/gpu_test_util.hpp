// Helpers of the gpt GPU tests: skip without a GPU, device buffers, copies.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include <cstdint>
#include <cstring>
#include <string>

#include "bf16.hpp"
#include "corpus.hpp"
#include "layers.hpp"
#include "roofbench/cuda.hpp"
#include "trainer.hpp"

namespace roofbench::gpt::cuda::testing {

inline bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define ROOFBENCH_GPT_REQUIRE_GPU() \
  if (!::roofbench::gpt::cuda::testing::have_gpu()) GTEST_SKIP() << "no CUDA device"

// Device copies of host vectors, freed with the arena.
class Device {
 public:
  template <typename T>
  T* upload(const std::vector<T>& host) {
    T* device = alloc<T>(host.size());
    ROOFBENCH_CUDA(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return device;
  }
  template <typename T>
  T* alloc(std::size_t count) {
    return static_cast<T*>(allocator_(count * sizeof(T), BufferRole::scratch));
  }
  template <typename T>
  static std::vector<T> download(const T* device, std::size_t count) {
    ROOFBENCH_CUDA(cudaDeviceSynchronize());
    std::vector<T> host(count);
    ROOFBENCH_CUDA(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  const DeviceAllocator& allocator() const { return allocator_; }

 private:
  DeviceArena arena_;
  DeviceAllocator allocator_ = arena_.allocator();
};

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Host vectors to and from the device's bf16 (round to nearest even), bit by bit.
inline std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint16_t bits = bf16_bits_from_float(x[i]);
    std::memcpy(static_cast<void*>(&out[i]), &bits, sizeof bits);
  }
  return out;
}
inline std::vector<float> from_bf16(const std::vector<bf16>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    out[i] = float_from_bf16_bits(bits);
  }
  return out;
}
// Exact GELU in double, as model.hpp defines it.
inline double gelu_double(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

template <typename A, typename B>
double rel_l2(const std::vector<A>& out, const std::vector<B>& ref) {
  EXPECT_EQ(out.size(), ref.size());
  return relative_l2_error(out.data(), ref.data(), std::min(out.size(), ref.size()));
}

// The small model the GPU tests train: head_dim 64 (the fused attention's shape), two blocks.
inline Config tiny_config() {
  Config cfg;
  cfg.context = 16;
  cfg.channels = 128;
  cfg.heads = 2;
  cfg.layers = 2;
  cfg.batch = 3;
  return cfg;
}

inline std::vector<std::uint8_t> tiny_corpus() {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "The quick brown fox jumps over the lazy dog; then it sleeps. ";
  return tokenize(text);
}

}  // namespace roofbench::gpt::cuda::testing
