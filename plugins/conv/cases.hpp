// The conv plugin's cases: one ResNet-50 convolution per benchmark (conv_<precision>), and the whole
// network's convolutions in sequence (resnet50: forward; resnet50_train: forward and both backward passes).
#pragma once

#include <memory>

#include "convolution.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::conv {

// Workspace the algorithm search may use per benchmark (cuDNN's FFT algorithms ask for several GiB at
// N=256; what it is given, up to this, is allocated through ctx.alloc and counts in peak memory).
inline constexpr std::size_t kSearchWorkspaceCap = std::size_t{1} << 30;

// Gate samples per pass: a single convolution, and each of the network's 53 (the same spread, thinner).
inline constexpr SampleCounts kLayerSamples{};
inline constexpr SampleCounts kNetworkSamples{.fwd = 96, .bwd_data = 96, .bwd_filter = 16};

class LayerCase final : public Case {
 public:
  LayerCase(const Params& params, const DataFormat& format);
  void setup(Context& ctx) override;
  void run(Context& ctx) override;
  Work work() const override;
  Check check(Context& ctx) override;
  std::vector<Counter> counters() const override;
  std::vector<Fact> facts() const override;
  const Convolution& convolution() const { return conv_; }

 private:
  Pass pass_;
  Implementation implementation_;
  Convolution conv_;
  micro::NonfiniteScan scan_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

class NetworkCase final : public Case {
 public:
  NetworkCase(const Params& params, bool training);
  void setup(Context& ctx) override;
  void run(Context& ctx) override;
  Work work() const override;
  Check check(Context& ctx) override;
  std::vector<Counter> counters() const override;
  std::vector<Fact> facts() const override;

 private:
  bool training_;
  Implementation implementation_;
  std::int64_t batch_;
  std::vector<std::unique_ptr<Convolution>> convs_;  // network order
  micro::NonfiniteScan scan_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

void describe(Plugin& plugin);

}  // namespace roofbench::conv
