// One convolution of ResNet-50 at batch N in one data format, in the passes a case asks for: owns its
// tensors (from ctx.alloc), its cuDNN descriptors and the algorithm cuDNN's search chose per pass, and
// checks its outputs against the fp64 reference on a spread sample.
#pragma once

#include <cudnn.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudnn_support.hpp"
#include "layers.hpp"
#include "roofbench/case_support/gate.hpp"
#include "roofbench/case_support/input_copies.hpp"
#include "roofbench/kernels/conv_reference.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::conv {

enum class Pass { fwd, bwd_data, bwd_filter };
inline constexpr std::array<Pass, 3> kPasses = {Pass::fwd, Pass::bwd_data, Pass::bwd_filter};
const char* to_string(Pass pass);
Pass parse_pass(const std::string& text);

// cuDNN, or a hand-written kernel of kernels/cuda_conv: WMMA (any GPU) or wgmma (sm_90a).
enum class Implementation { cudnn, implicit_gemm, implicit_gemm_wgmma };

// The storage and arithmetic of one precision value of the plugin.
struct DataFormat {
  const char* name;  // bf16, fp16, tf32, fp32
  Precision precision;
  ElementType element;
  cudnnDataType_t cudnn_type;
  cudnnMathType_t math;  // asked of cuDNN before its search
  bool fma_only;         // pedantic fp32: only FMA-math results are taken
  std::vector<kernels::ConvLayout> layouts;
  const char* description;
};
const std::vector<DataFormat>& data_formats();

const char* to_string(kernels::ConvLayout layout);
kernels::ConvLayout parse_layout(const std::string& text);

// Samples a gate compares per pass (see spread_samples): backward filter costs N Ho Wo multiply-adds per
// sample, the others C R S or K R S.
struct SampleCounts {
  std::size_t fwd = 1024, bwd_data = 1024, bwd_filter = 128;
  std::size_t of(Pass pass) const { return pass == Pass::fwd ? fwd : pass == Pass::bwd_data ? bwd_data : bwd_filter; }
};

// What check() found for one pass.
struct PassCheck {
  double rel_l2_error = 0;
  std::string detail;
  std::uint64_t nonfinite = 0;
};

class Convolution {
 public:
  Convolution(const Layer& layer, std::int64_t batch, const DataFormat& format, kernels::ConvLayout layout,
              Implementation implementation, std::vector<Pass> passes);

  // Allocates every tensor the passes use (x, w and dy are inputs; y, dx and dw outputs) and fills the
  // inputs with random values; with cuDNN, also describes them.
  void allocate(Context& ctx);
  // Names every tensor allocate() made to `copies`, so that cold runs can read copies of them in turn.
  void add_tensors_to(case_support::InputCopies& copies);
  // The largest workspace any algorithm of any pass asks for, at most `cap`: what the search is given.
  std::size_t search_workspace_bytes(cudnnHandle_t handle, std::size_t cap) const;
  // For every pass: cudnnFind*AlgorithmEx on this convolution's own tensors with `workspace`, and for
  // bf16 and fp16 the execution plans of the backend API's heuristics for the same convolution
  // (cudnn_backend/engine_plans.hpp: modes A, B and fallback, at most kMaxBackendPlans, none reducing in
  // reduced precision, and as backend_plans_from_environment says); then our own timing of every qualifying candidate of
  // both (case_support/launch_timing.hpp), the fastest taken. For AlgorithmSearch::heuristic, the _v7
  // heuristics' first qualifying result, untimed.
  void choose_algorithms(cudnnHandle_t handle, void* workspace, std::size_t workspace_bytes, AlgorithmSearch search);
  // Takes another convolution's choices (same layer and format): the network searches each shape once.
  void copy_algorithms(const Convolution& same_shape);

  bool has(Pass pass) const;
  // Enqueues one pass on the handle's stream (cuDNN) or `stream` (the hand-written kernel).
  void enqueue(Pass pass, cudnnHandle_t handle, void* workspace, std::size_t workspace_bytes, cudaStream_t stream) const;

  PassCheck check(Context& ctx, Pass pass, std::size_t samples, std::uint64_t seed,
                  const case_support::NonfiniteScan& scan) const;

  // The pass's minimum traffic: its two operands read once and its result written once. The forward and
  // the filter gradient read only the input a window covers; the data gradient writes all of dx.
  double pass_bytes(Pass pass) const;
  // Of pass_bytes, the reads: all but the one tensor the pass writes (y, dx or dw).
  double pass_bytes_read(Pass pass) const;
  const kernels::ConvShape& shape() const { return shape_; }
  const Layer& layer() const { return layer_; }
  const std::optional<AlgorithmChoice>& choice(Pass pass) const { return choices_[std::size_t(pass)]; }
  std::size_t workspace_bytes() const;  // the most any chosen algorithm needs
  void* filter() const { return w_; }    // for tests that corrupt it

 private:
  void enqueue_algorithm(Pass pass, int algorithm, cudnnHandle_t handle, void* workspace,
                         std::size_t workspace_bytes) const;
  void enqueue_candidate(Pass pass, const Candidate& candidate, cudnnHandle_t handle, void* workspace,
                         std::size_t workspace_bytes) const;
  // The pass as a backend operation graph and its engine plans; none (and the reason in the text) when
  // the backend refuses the graph or the format keeps to the legacy API.
  cudnn_backend::EnginePlans backend_plans(Pass pass, cudnnHandle_t handle, std::size_t workspace_bytes) const;
  AlgorithmChoice time_candidates(Pass pass, cudnnHandle_t handle, void* workspace, std::size_t workspace_bytes,
                                  const SearchResults& found) const;

  const Layer& layer_;
  kernels::ConvShape shape_;
  const DataFormat& format_;
  kernels::ConvLayout layout_;
  Implementation implementation_;
  std::vector<Pass> passes_;
  void *x_ = nullptr, *w_ = nullptr, *y_ = nullptr, *dy_ = nullptr, *dx_ = nullptr, *dw_ = nullptr;
  TensorDescriptor x_desc_, y_desc_;
  FilterDescriptor w_desc_;
  std::array<ConvolutionDescriptor, 3> conv_desc_;  // per pass: each carries its chosen math type
  std::array<std::optional<AlgorithmChoice>, 3> choices_;
  // Per pass, the variant pack of this convolution's tensors and the pointers it was built for: x, w, y
  // and the workspace (built on the first backend execution, again when any of them moves: a workspace
  // given anew, tensors rotated through their copies).
  mutable std::array<std::unique_ptr<cudnn_backend::Descriptor>, 3> packs_;
  mutable std::array<std::array<void*, 4>, 3> pack_pointers_{};
};

// Which backend plans join the search, from ROOFBENCH_CONV_BACKEND: on (the default; engines whose
// kernels are precompiled), off (legacy algorithms only, for comparison), all (also engines that compile
// at finalize, seconds each).
enum class BackendPlans { none, precompiled, all };
BackendPlans backend_plans_from_environment();

// Backend plans timed per pass at most: each costs a finalize and about ten launches in setup.
inline constexpr std::size_t kMaxBackendPlans = 16;

}  // namespace roofbench::conv
