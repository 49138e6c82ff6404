// The conv plugin's cases: one ResNet-50 convolution per benchmark (conv_<precision>), and the whole
// network's convolutions in sequence (resnet50: forward; resnet50_train: forward and both backward passes).
#pragma once

#include <memory>

#include "convolution.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::conv {

// Workspace the algorithm search is given per benchmark: what the algorithms say they need, at least the
// floor and at most the cap, allocated through ctx.alloc (it counts in peak memory) and reused by the
// chosen algorithm. The floor matters: on an H200 with cuDNN 9.14 the per-algorithm workspace queries for
// bf16 NHWC answered 0 bytes (or failed) for every algorithm, yet the tensor-core IMPLICIT_PRECOMP_GEMM
// kernels need 131-272 bytes; a search given no workspace could not run them and picked IMPLICIT_GEMM
// with default math (about 20 TFLOP/s) for most layers at N=256.
inline constexpr std::size_t kSearchWorkspaceFloor = std::size_t{256} << 20;
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
  std::vector<Figure> figures() const override;
  // Cold, runs read the tensors' copies in turn (input_copies.hpp).
  Rotation* rotation() override { return &copies_; }
  const Convolution& convolution() const { return conv_; }

 private:
  std::vector<Figure> texts() const;
  std::vector<Figure> gate_figures_;  // check()'s counts, returned by figures()
  Pass pass_;
  Implementation implementation_;
  Convolution conv_;
  case_support::InputCopies copies_;
  case_support::NonfiniteScan scan_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  AlgorithmSearch search_ = AlgorithmSearch::find;
};

class NetworkCase final : public Case {
 public:
  NetworkCase(const Params& params, bool training);
  void setup(Context& ctx) override;
  void run(Context& ctx) override;
  Work work() const override;
  Check check(Context& ctx) override;
  std::vector<Figure> figures() const override;

 private:
  std::vector<Figure> texts() const;
  std::vector<Figure> gate_figures_;  // check()'s counts, returned by figures()
  bool training_;
  Implementation implementation_;
  std::int64_t batch_;
  std::vector<std::unique_ptr<Convolution>> convs_;  // network order
  case_support::NonfiniteScan scan_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  AlgorithmSearch search_ = AlgorithmSearch::find;
};

void describe(Plugin& plugin);

}  // namespace roofbench::conv
