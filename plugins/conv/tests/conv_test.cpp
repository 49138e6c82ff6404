// Tests of the conv plugin. The first group needs no GPU (the ResNet-50 shapes and network order, the
// case list and its work counts, the choice among cuDNN's search results); the second drives cases
// through setup, poisoned outputs, run and check on a CUDA device and shows that a wrong filter fails
// the gate (skipped with the reason where no GPU is present).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cases.hpp"
#include "layers.hpp"
#include "roofbench/case_support/cuda_test_context.hpp"
#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/case_support/launch_timing_testing.hpp"
#include "roofbench/kernels/cuda_conv.hpp"

namespace roofbench::conv {
namespace {

using case_support::CandidateTiming;
using case_support::testing::CudaTestContext;
using case_support::testing::gpu_present;
using case_support::testing::run_gate_sequence;

// ---- the network (CPU) ----

TEST(ConvLayers, TwentyThreeDistinctShapesWithReadableNames) {
  const auto& layers = resnet50_layers();
  ASSERT_EQ(layers.size(), 23u);
  std::set<std::string> names;
  for (const Layer& l : layers) names.insert(l.name);
  EXPECT_EQ(names.size(), 23u);
  EXPECT_EQ(layers.front().name, "conv1_7x7s2_3to64");
  EXPECT_EQ(resnet50_layer("conv3_3x3_128").input_size, 28);
  EXPECT_EQ(resnet50_layer("conv3_3x3s2_128").input_size, 56);
  EXPECT_EQ(resnet50_layer("conv3_3x3s2_128").shape(1).out_h(), 28);
  EXPECT_EQ(resnet50_layer("conv1_7x7s2_3to64").shape(1).out_h(), 112);
  EXPECT_EQ(resnet50_layer("conv5_1x1s2_1024to2048").shape(1).out_w(), 7);
  EXPECT_THROW(resnet50_layer("conv9_3x3_1"), Error);
}

TEST(ConvLayers, NetworkHas53ConvolutionsAnd8point17GflopPerImage) {
  const auto& order = resnet50_network();
  ASSERT_EQ(order.size(), 53u);
  double flops = 0;
  std::map<std::string, int> uses;
  for (const std::size_t i : order) {
    flops += resnet50_layers()[i].shape(1).flops();
    ++uses[resnet50_layers()[i].name];
  }
  EXPECT_NEAR(flops / 1e9, 8.17, 0.01);
  EXPECT_EQ(uses.size(), 23u);  // every distinct shape is used
  EXPECT_EQ(uses["conv2_1x1_64to256"], 4);  // three expands and the stride-1 downsample
  EXPECT_EQ(uses["conv4_3x3_256"], 5);
  EXPECT_EQ(uses["conv5_3x3s2_512"], 1);
  // Each block's layers chain: a convolution reads the channels the previous one wrote, except where a
  // downsample reads the block's input (the channels its 1x1 reduce read).
  std::int64_t channels = 64;  // after the stem
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Layer& layer = resnet50_layers()[order[i]];
    const Layer& previous = resnet50_layers()[order[i - 1]];
    const bool downsample = layer.kernel == 1 && layer.out_channels == previous.out_channels && i >= 4 &&
                            resnet50_layers()[order[i - 3]].in_channels == layer.in_channels;
    EXPECT_EQ(layer.in_channels, downsample ? layer.in_channels : channels) << layer.name;
    if (!downsample) channels = layer.out_channels;
  }
}

// ---- the case list (CPU) ----

const Plugin& described() {
  static const Plugin plugin = [] {
    Plugin p;
    describe(p);
    return p;
  }();
  return plugin;
}

const CaseSpec& spec(const std::string& name) {
  for (const CaseSpec& c : described().cases)
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

Params params(std::vector<std::pair<std::string, std::string>> items) { return Params(std::move(items)); }

Params layer_point(const std::string& layer, const std::string& pass, const std::string& layout,
                   const std::string& impl, int n) {
  return params({{"layer", layer}, {"pass", pass}, {"layout", layout}, {"impl", impl}, {"n", std::to_string(n)}});
}

TEST(ConvCases, AxesAndSweep) {
  std::map<std::string, std::size_t> benchmarks;
  for (const CaseSpec& c : described().cases) {
    EXPECT_EQ(c.sweep_axis, "n") << c.name;
    EXPECT_EQ(c.axes.back().name, "n") << c.name;  // innermost, so a sweep runs its points in a row
    std::size_t points = 1;
    for (const Axis& a : c.axes) points *= a.values.size();
    benchmarks[c.name] = points;
  }
  EXPECT_EQ(benchmarks["conv_bf16"], 23u * 3 * 1 * 3 * 5);  // impl: cudnn and the two hand-written kernels
  EXPECT_EQ(benchmarks["conv_fp16"], 23u * 3 * 5);
  EXPECT_EQ(benchmarks["conv_fp32"], 23u * 3 * 2 * 5);
  EXPECT_EQ(benchmarks["resnet50"], 15u);
  EXPECT_EQ(benchmarks["resnet50_train"], 5u);
  EXPECT_EQ(spec("conv_tf32").precision, Precision::tf32);
}

TEST(ConvCases, WorkIsCountedFromTheShape) {
  // conv3_3x3_128 at N=32: 28x28 out, 128 -> 128, 3x3.
  const auto c = spec("conv_bf16").make(layer_point("conv3_3x3_128", "bwd_filter", "nhwc", "cudnn", 32));
  const Work work = c->work();
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * 32 * 28 * 28 * 128 * 128 * 9);
  EXPECT_DOUBLE_EQ(work.bytes, 2.0 * (32.0 * 28 * 28 * 128 * 2 + 128.0 * 128 * 9));
  EXPECT_DOUBLE_EQ(work.bytes_read, 2.0 * (32.0 * 28 * 28 * 128 * 2));  // x and dy read, dw written
  EXPECT_EQ(work.items, 32);
  EXPECT_EQ(work.item_name, "images");
  const auto network = spec("resnet50").make(params({{"impl", "cudnn"}, {"n", "4"}}));
  EXPECT_NEAR(network->work().flops / 4 / 1e9, 8.17, 0.01);
  EXPECT_LT(network->work().bytes_read, network->work().bytes);
  const auto training = spec("resnet50_train").make(params({{"n", "4"}}));
  const double stem = resnet50_layers().front().shape(4).flops();
  EXPECT_DOUBLE_EQ(training->work().flops, 3 * network->work().flops - stem);
}

TEST(ConvCases, HandWrittenKernelIsBf16ForwardOnly) {
  EXPECT_NO_THROW(spec("conv_bf16").make(layer_point("conv2_3x3_64", "fwd", "nhwc", "implicit_gemm", 8)));
  EXPECT_THROW(spec("conv_bf16").make(layer_point("conv2_3x3_64", "bwd_data", "nhwc", "implicit_gemm", 8)),
               NotApplicable);
  EXPECT_THROW(spec("resnet50_train").make(params({{"impl", "implicit_gemm"}, {"n", "8"}})), NotApplicable);
  EXPECT_THROW(spec("conv_bf16").make(layer_point("conv2_3x3_64", "bwd_filter", "nhwc", "implicit_gemm_wgmma", 8)),
               NotApplicable);
  EXPECT_THROW(spec("conv_bf16").make(layer_point("conv2_3x3_64", "sideways", "nhwc", "cudnn", 8)), Error);
}

// ---- choosing among cuDNN's search results (CPU) ----

cudnnConvolutionFwdAlgoPerf_t result(cudnnConvolutionFwdAlgo_t algo, cudnnStatus_t status, cudnnMathType_t math,
                                     float ms) {
  cudnnConvolutionFwdAlgoPerf_t r{};
  r.algo = algo;
  r.status = status;
  r.mathType = math;
  r.time = ms;
  r.memory = 1024;
  return r;
}

TEST(ConvSearch, KeepsTheQualifyingResultsInCudnnsOrder) {
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> results = {
      result(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DEFAULT_MATH, -1),
      result(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_TENSOR_OP_MATH, 0.5f),
      result(CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_FMA_MATH, 0.9f),
  };
  const std::span<const cudnnConvolutionFwdAlgoPerf_t> all(results);
  const SearchResults found = usable_results(all, false, "test");
  ASSERT_EQ(found.candidates.size(), 2u);
  EXPECT_EQ(found.candidates[0].label(), "IMPLICIT_PRECOMP_GEMM/TENSOR_OP_MATH");
  EXPECT_EQ(found.candidates[0].workspace_bytes, 1024u);
  EXPECT_FLOAT_EQ(found.candidates[1].search_ms, 0.9f);
  EXPECT_NE(found.text.find("FFT/DEFAULT_MATH CUDNN_STATUS_NOT_SUPPORTED; IMPLICIT_PRECOMP_GEMM"), std::string::npos)
      << found.text;
  const AlgorithmChoice first = choose_first(found);
  EXPECT_EQ(first.chosen.name, "IMPLICIT_PRECOMP_GEMM");
  EXPECT_EQ(first.chosen.math, CUDNN_TENSOR_OP_MATH);
  EXPECT_EQ(first.timed_ms, 0);
  // Pedantic fp32 skips the tensor-op result; a workspace cap skips results that need more.
  EXPECT_EQ(choose_first(usable_results(all, true, "test")).chosen.name, "GEMM");
  std::vector<cudnnConvolutionFwdAlgoPerf_t> large = results;
  large[1].memory = std::size_t{1} << 20;
  const SearchResults capped = usable_results(std::span<const cudnnConvolutionFwdAlgoPerf_t>(large), false, "test", 4096);
  ASSERT_EQ(capped.candidates.size(), 1u);
  EXPECT_EQ(capped.candidates[0].name, "GEMM");
  EXPECT_NE(capped.text.find("IMPLICIT_PRECOMP_GEMM/TENSOR_OP_MATH 0.500000 ms (1048576 B) too much workspace"),
            std::string::npos) << capped.text;
}

TEST(ConvSearch, NoUsableResultIsNotApplicableWithCudnnsReasons) {
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> results = {
      result(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DEFAULT_MATH, -1),
      result(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_TENSOR_OP_MATH, 0.5f),
  };
  try {
    usable_results(std::span<const cudnnConvolutionFwdAlgoPerf_t>(results), true, "layer X");
    FAIL() << "expected NotApplicable";
  } catch (const NotApplicable& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("layer X"), std::string::npos) << message;
    EXPECT_NE(message.find("WINOGRAD/DEFAULT_MATH CUDNN_STATUS_NOT_SUPPORTED"), std::string::npos) << message;
    EXPECT_NE(message.find("IMPLICIT_GEMM/TENSOR_OP_MATH 0.500000 ms (1024 B) not FMA math"), std::string::npos) << message;
  }
  EXPECT_THROW(usable_results(std::span<const cudnnConvolutionFwdAlgoPerf_t>(), false, "empty"), NotApplicable);
}

// ---- our timing of the candidates (CPU: the choice; the timing arithmetic is tested in cuda_case_support) ----

using case_support::testing::skipped;
using case_support::testing::timed;

TEST(ConvTiming, TheChoiceSaysWhatCudnnRankedFirstAndWhatWasTimed) {
  // conv2_1x1_64 at N=32 on the H200 as Find ranked it: the kernel without tensor cores first.
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> results = {
      result(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DEFAULT_MATH, 0.12f),
      result(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_TENSOR_OP_MATH, 0.19f),
      result(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_SUCCESS, CUDNN_DEFAULT_MATH, 0.9f),
  };
  const SearchResults found = usable_results(std::span<const cudnnConvolutionFwdAlgoPerf_t>(results), false, "x");
  const std::vector<CandidateTiming> timings{timed(0.0182), timed(0.00751), skipped(0.9)};
  const AlgorithmChoice choice = choose_timed(found, timings, 5);
  EXPECT_EQ(choice.chosen.label(), "IMPLICIT_PRECOMP_GEMM/TENSOR_OP_MATH");
  EXPECT_EQ(choice.search_first, "IMPLICIT_GEMM/DEFAULT_MATH");
  EXPECT_DOUBLE_EQ(choice.timed_ms, 0.00751);
  EXPECT_EQ(choice.search_results,
            "timed per launch (median of 5 groups of up to 50 launches, CUDA graph): IMPLICIT_GEMM/DEFAULT_MATH "
            "0.0182 ms, IMPLICIT_PRECOMP_GEMM/TENSOR_OP_MATH 0.00751 ms, FFT/DEFAULT_MATH skipped (one launch 0.9 ms); "
            "chose IMPLICIT_PRECOMP_GEMM/TENSOR_OP_MATH, cuDNN's search ranked IMPLICIT_GEMM/DEFAULT_MATH first; "
            "search results: " +
                found.text);
  // When our timing agrees with cuDNN, the text says so; a candidate launched one by one is named.
  std::vector<CandidateTiming> agree{timed(0.005), timed(0.009), timed(0.02)};
  agree[1].graph = false;
  const AlgorithmChoice same = choose_timed(found, agree, 5);
  EXPECT_EQ(same.chosen.name, "IMPLICIT_GEMM");
  EXPECT_NE(same.search_results.find("some launched one by one"), std::string::npos) << same.search_results;
  EXPECT_NE(same.search_results.find("chose IMPLICIT_GEMM/DEFAULT_MATH, cuDNN's search ranked it first"),
            std::string::npos) << same.search_results;
  EXPECT_THROW(choose_timed(found, std::vector<CandidateTiming>{timed(1)}, 5), Error);
}

TEST(ConvTiming, BackendPlansAreCandidatesBesideFindsResults) {
  const std::vector<cudnnConvolutionFwdAlgoPerf_t> results = {
      result(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_TENSOR_OP_MATH, 0.19f),
  };
  SearchResults found = usable_results(std::span<const cudnnConvolutionFwdAlgoPerf_t>(results), false, "x");
  cudnn_backend::EnginePlans plans;
  plans.plans.resize(2);
  plans.plans[0].engine = {12, {{3, 1}}, "A+B"};
  plans.plans[0].workspace_bytes = 8192;
  plans.plans[1].engine = {40, {}, "fallback"};
  for (Candidate& c : plan_candidates(plans, CUDNN_TENSOR_OP_MATH)) found.candidates.push_back(std::move(c));
  ASSERT_EQ(found.candidates.size(), 3u);
  EXPECT_EQ(found.candidates[1].label(), "backend engine 12 (knobs 3=1)");
  EXPECT_EQ(found.candidates[1].workspace_bytes, 8192u);
  EXPECT_STREQ(found.candidates[1].api(), "backend");
  EXPECT_STREQ(found.candidates[0].api(), "legacy");
  const AlgorithmChoice choice = choose_timed(found, std::vector<CandidateTiming>{timed(0.2), timed(0.15), skipped(3)}, 5);
  EXPECT_EQ(choice.chosen.label(), "backend engine 12 (knobs 3=1)");
  EXPECT_NE(choice.search_results.find("IMPLICIT_PRECOMP_GEMM/TENSOR_OP_MATH 0.2 ms, backend engine 12 (knobs 3=1) "
                                       "0.15 ms, backend engine 40 skipped (one launch 3 ms); chose backend engine 12 "
                                       "(knobs 3=1), cuDNN's search ranked IMPLICIT_PRECOMP_GEMM/TENSOR_OP_MATH first"),
            std::string::npos)
      << choice.search_results;
}

TEST(ConvCudnnVersion, LibrariesAreGroupedByFolder) {
  EXPECT_EQ(describe_cudnn_libraries({"/usr/lib/libc.so.6", "/opt/t/cudnn/lib/libcudnn.so.9",
                                      "/opt/t/cudnn/lib/libcudnn_cnn.so.9", "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9"}),
            "/opt/t/cudnn/lib: libcudnn.so.9 libcudnn_cnn.so.9; /usr/lib/x86_64-linux-gnu: libcudnn_ops.so.9");
  EXPECT_EQ(describe_cudnn_libraries({"/usr/lib/libc.so.6"}), "no libcudnn loaded");
  EXPECT_EQ(cudnn_header_version(), std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." +
                                        std::to_string(CUDNN_PATCHLEVEL));
}

// What a status check threw: NotApplicable is an Error, so it is caught first.
template <typename Call>
std::string thrown_by(Call call) {
  try {
    call();
  } catch (const NotApplicable&) {
    return "NotApplicable";
  } catch (const Error&) {
    return "Error";
  }
  return "nothing";
}

// cuDNN's Find orders by its own timing in the process, so ROOFBENCH_ALGORITHM_CHOICE=first asks the _v7
// heuristic instead; ROOFBENCH_CONV_SEARCH, where set, wins.
TEST(ConvSearch, TheFirstAlgorithmChoiceAsksTheHeuristic) {
  unsetenv("ROOFBENCH_CONV_SEARCH");
  unsetenv("ROOFBENCH_ALGORITHM_CHOICE");
  EXPECT_EQ(algorithm_search_from_environment(), AlgorithmSearch::find);
  setenv("ROOFBENCH_ALGORITHM_CHOICE", "first", 1);
  EXPECT_EQ(algorithm_search_from_environment(), AlgorithmSearch::heuristic);
  setenv("ROOFBENCH_CONV_SEARCH", "find", 1);
  EXPECT_EQ(algorithm_search_from_environment(), AlgorithmSearch::find);
  unsetenv("ROOFBENCH_CONV_SEARCH");
  unsetenv("ROOFBENCH_ALGORITHM_CHOICE");
}

TEST(ConvSearch, StatusErrorsNameTheCall) {
  try {
    ROOFBENCH_CUDNN(CUDNN_STATUS_BAD_PARAM);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDNN_STATUS_BAD_PARAM"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in CUDNN_STATUS_BAD_PARAM"), std::string::npos) << e.what();
  }
  EXPECT_EQ(thrown_by([] { ROOFBENCH_CUDNN(CUDNN_STATUS_SUCCESS); }), "nothing");
  // A bad parameter is an error, not a point cuDNN cannot run, whichever check sees it.
  EXPECT_EQ(thrown_by([] { ROOFBENCH_CUDNN(CUDNN_STATUS_BAD_PARAM); }), "Error");
  EXPECT_EQ(thrown_by([] { ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(CUDNN_STATUS_BAD_PARAM); }), "Error");
  // Only _OR_NOT_APPLICABLE turns NOT_SUPPORTED and its sub-codes into NotApplicable.
  EXPECT_EQ(thrown_by([] { ROOFBENCH_CUDNN(CUDNN_STATUS_NOT_SUPPORTED); }), "Error");
  EXPECT_EQ(thrown_by([] { ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(CUDNN_STATUS_NOT_SUPPORTED); }), "NotApplicable");
  EXPECT_EQ(thrown_by([] { ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(CUDNN_STATUS_NOT_SUPPORTED_SHAPE); }), "NotApplicable");
}

// ---- on the GPU: the gate the host runs ----

struct Gated {
  double error = 0, tolerance = 0;
  std::string detail;
  std::vector<Figure> figures;
};

// setup, poison every output, run once, check: what the host does before timing. `between` runs after
// the run and before the check.
Gated run_gate(const std::string& case_name, const Params& p,
               const std::function<void(Case&, CudaTestContext&)>& between = {}) {
  const CaseSpec& s = spec(case_name);
  CudaTestContext ctx(p);
  auto c = s.make(p);
  const auto [check, figures] = run_gate_sequence(*c, ctx, {.before_check = between});
  return {check.rel_l2_error, s.tolerance > 0 ? s.tolerance : default_tolerance(s.precision), check.detail, figures};
}

struct GatePoint {
  std::string case_name;
  std::vector<std::pair<std::string, std::string>> params;
};

// Read by GoogleTest (and so by CTest's test names): "conv_bf16 conv2_3x3_64 fwd nhwc cudnn 8".
void PrintTo(const GatePoint& p, std::ostream* out) {
  *out << p.case_name;
  for (const auto& [axis, value] : p.params) *out << " " << value;
}

class ConvGate : public ::testing::TestWithParam<GatePoint> {};

TEST_P(ConvGate, Passes) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  const Params p = params(GetParam().params);
  if (p.has("impl") && p.str("impl") == "implicit_gemm_wgmma" && !kernels::conv2d_implicit_gemm_wgmma_available(0))
    GTEST_SKIP() << "device 0 does not run the wgmma kernel (sm_90a code on compute capability 9.0)";
  const Gated g = run_gate(GetParam().case_name, p);
  std::string facts;
  for (const Figure& f : g.figures)
    if (f.is_text) facts += f.name + "=" + f.text + " ";
  EXPECT_LE(g.error, g.tolerance) << g.detail << " [" << facts << "]";
  RecordProperty("facts", facts);
  std::printf("    error %.3g (tolerance %.3g); %s\n", g.error, g.tolerance, facts.c_str());
}

std::vector<std::pair<std::string, std::string>> point(const std::string& layer, const std::string& pass,
                                                       const std::string& layout, const std::string& impl, int n) {
  return layer_point(layer, pass, layout, impl, n).items();
}

INSTANTIATE_TEST_SUITE_P(
    Points, ConvGate,
    ::testing::Values(
        GatePoint{"conv_bf16", point("conv1_7x7s2_3to64", "fwd", "nhwc", "cudnn", 2)},
        GatePoint{"conv_bf16", point("conv3_3x3s2_128", "fwd", "nhwc", "cudnn", 8)},
        GatePoint{"conv_bf16", point("conv3_3x3s2_128", "bwd_data", "nhwc", "cudnn", 8)},
        GatePoint{"conv_bf16", point("conv3_3x3s2_128", "bwd_filter", "nhwc", "cudnn", 8)},
        GatePoint{"conv_bf16", point("conv4_1x1s2_512to1024", "bwd_data", "nhwc", "cudnn", 8)},
        GatePoint{"conv_bf16", point("conv1_7x7s2_3to64", "fwd", "nhwc", "implicit_gemm", 2)},
        GatePoint{"conv_bf16", point("conv2_3x3_64", "fwd", "nhwc", "implicit_gemm", 8)},
        GatePoint{"conv_bf16", point("conv5_3x3s2_512", "fwd", "nhwc", "implicit_gemm", 8)},
        GatePoint{"conv_bf16", point("conv1_7x7s2_3to64", "fwd", "nhwc", "implicit_gemm_wgmma", 2)},
        GatePoint{"conv_bf16", point("conv2_3x3_64", "fwd", "nhwc", "implicit_gemm_wgmma", 8)},
        GatePoint{"conv_bf16", point("conv4_1x1s2_512to1024", "fwd", "nhwc", "implicit_gemm_wgmma", 8)},
        GatePoint{"conv_bf16", point("conv5_3x3s2_512", "fwd", "nhwc", "implicit_gemm_wgmma", 8)},
        GatePoint{"conv_fp16", point("conv2_3x3_64", "bwd_filter", "nhwc", "cudnn", 8)},
        GatePoint{"conv_tf32", point("conv4_3x3_256", "fwd", "nchw", "cudnn", 8)},
        GatePoint{"conv_tf32", point("conv2_1x1_256to64", "bwd_filter", "nhwc", "cudnn", 8)},
        GatePoint{"conv_fp32", point("conv4_3x3_256", "fwd", "nhwc", "cudnn", 8)},
        GatePoint{"conv_fp32", point("conv2_3x3_64", "bwd_data", "nchw", "cudnn", 8)},
        GatePoint{"conv_fp32", point("conv3_3x3_128", "bwd_filter", "nchw", "cudnn", 32)},
        GatePoint{"resnet50", {{"impl", "cudnn"}, {"n", "2"}}},
        GatePoint{"resnet50", {{"impl", "implicit_gemm"}, {"n", "2"}}},
        GatePoint{"resnet50", {{"impl", "implicit_gemm_wgmma"}, {"n", "2"}}},
        GatePoint{"resnet50_train", {{"n", "2"}}}));

TEST(ConvGateFailures, AWrongFilterFailsTheGate) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  for (const char* impl : {"cudnn", "implicit_gemm"}) {
    // The output was computed from one filter; the reference is given fresh random values instead.
    const Gated g = run_gate("conv_bf16", layer_point("conv3_3x3_128", "fwd", "nhwc", impl, 4),
                             [](Case& c, CudaTestContext& ctx) {
                               const Convolution& conv = dynamic_cast<LayerCase&>(c).convolution();
                               ctx.fill_random(conv.filter(), std::size_t(conv.shape().filter_elements()),
                                               ElementType::bf16, -1, 1, 0);
                             });
    EXPECT_GT(g.error, g.tolerance) << impl << ": " << g.detail;
  }
}

TEST(ConvGateFailures, AnOutputLeftPoisonedFailsTheGate) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  const Gated g = run_gate("conv_bf16", layer_point("conv2_1x1_64", "fwd", "nhwc", "cudnn", 2),
                           [](Case&, CudaTestContext& ctx) { ctx.fill_outputs(0xFF); });
  EXPECT_TRUE(std::isnan(g.error)) << g.detail;
}

// Cold by rotation: each pass reads its inputs and writes its output in the copy selected, and every copy
// passes the gate, through cuDNN's legacy algorithms, its backend plans (whose variant packs follow the
// pointers) and the hand-written kernel.
TEST(ConvRotation, EveryCopyPassesTheGate) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  const std::pair<const char*, Params> points[] = {
      {"conv_bf16", layer_point("conv3_3x3s2_128", "fwd", "nhwc", "cudnn", 4)},
      {"conv_bf16", layer_point("conv3_3x3s2_128", "bwd_data", "nhwc", "cudnn", 4)},
      {"conv_bf16", layer_point("conv3_3x3s2_128", "bwd_filter", "nhwc", "cudnn", 4)},
      {"conv_fp32", layer_point("conv2_3x3_64", "fwd", "nchw", "cudnn", 4)},
      {"conv_bf16", layer_point("conv2_3x3_64", "fwd", "nhwc", "implicit_gemm", 4)}};
  for (const auto& [name, point] : points) {
    const std::string case_name = name;  // a named string: spec() returns a reference into the registry
    const CaseSpec& of = spec(case_name);
    CudaTestContext ctx(point);
    const auto made = of.make(point);
    const std::vector<Check> checks = case_support::testing::gate_on_every_copy(*made, ctx, 3);
    ASSERT_EQ(checks.size(), 3u) << name;
    const double tolerance = of.tolerance > 0 ? of.tolerance : default_tolerance(of.precision);
    for (std::size_t copy = 0; copy < checks.size(); ++copy)
      EXPECT_LE(checks[copy].rel_l2_error, tolerance) << name << " " << point.str("pass") << " copy " << copy << ": "
                                                      << checks[copy].detail;
  }
}

TEST(ConvNotApplicable, ImpossiblePointsSaySo) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  // The hand-written kernel has no backward pass: refused before anything is allocated.
  EXPECT_THROW(run_gate("conv_bf16", layer_point("conv2_3x3_64", "bwd_filter", "nhwc", "implicit_gemm", 2)),
               NotApplicable);
}

}  // namespace
}  // namespace roofbench::conv
