#include "cudnn_support.hpp"

#include <cuda_runtime_api.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench::conv {

cudnnHandle_t cudnn_handle(Context& ctx) {
  // Kept for the life of the process and never destroyed: a static destructor could run after the
  // CUDA runtime has shut down, and the driver reclaims the handle at exit anyway.
  static std::map<int, cudnnHandle_t> handles;
  const int device = ctx.device().index;
  auto [it, created] = handles.try_emplace(device, nullptr);
  if (created) {
    const cudnnStatus_t status = cudnnCreate(&it->second);
    if (status != CUDNN_STATUS_SUCCESS) {
      handles.erase(it);
      throw_cudnn_error(status, "cudnnCreate", __FILE__, __LINE__, CudnnUnsupported::is_error);
    }
  }
  ROOFBENCH_CUDNN(cudnnSetStream(it->second, cuda::stream(ctx)));
  return it->second;
}

AlgorithmSearch algorithm_search_from_environment() {
  const char* value = std::getenv("ROOFBENCH_CONV_SEARCH");
  if (!value || std::string(value).empty())
    return case_support::first_candidate_only() ? AlgorithmSearch::heuristic : AlgorithmSearch::find;
  if (std::string(value) == "find") return AlgorithmSearch::find;
  if (std::string(value) == "heuristic") return AlgorithmSearch::heuristic;
  throw Error(std::string("conv: ROOFBENCH_CONV_SEARCH must be find or heuristic, got '") + value + "'");
}

const char* search_call(AlgorithmSearch search, int pass) {
  static const char* const find[] = {"cudnnFindConvolutionForwardAlgorithmEx", "cudnnFindConvolutionBackwardDataAlgorithmEx",
                                     "cudnnFindConvolutionBackwardFilterAlgorithmEx"};
  static const char* const heuristic[] = {"cudnnGetConvolutionForwardAlgorithm_v7",
                                          "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                                          "cudnnGetConvolutionBackwardFilterAlgorithm_v7"};
  return (search == AlgorithmSearch::find ? find : heuristic)[pass];
}

std::string cudnn_version() {
  const std::size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since 9.0
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string cudnn_header_version() {
  return std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." + std::to_string(CUDNN_PATCHLEVEL);
}

std::string describe_cudnn_libraries(const std::vector<std::string>& loaded_paths) {
  std::map<std::string, std::set<std::string>> by_folder;
  for (const std::string& path : loaded_paths) {
    const std::filesystem::path p(path);
    if (p.filename().string().starts_with("libcudnn")) by_folder[p.parent_path().string()].insert(p.filename().string());
  }
  std::string text;
  for (const auto& [folder, names] : by_folder) {
    text += (text.empty() ? "" : "; ") + folder + ":";
    for (const std::string& name : names) text += " " + name;
  }
  return text.empty() ? "no libcudnn loaded" : text;
}

std::string cudnn_loaded_from() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name && info->dlpi_name[0]) static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return describe_cudnn_libraries(paths);
}

const char* algorithm_name(cudnnConvolutionFwdAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "UNKNOWN_FWD_ALGO";
  }
}

const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "BWD_DATA_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "BWD_DATA_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "BWD_DATA_FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "BWD_DATA_FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "BWD_DATA_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "BWD_DATA_WINOGRAD_NONFUSED";
    default: return "UNKNOWN_BWD_DATA_ALGO";
  }
}

const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "BWD_FILTER_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "BWD_FILTER_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "BWD_FILTER_FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "BWD_FILTER_ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD: return "BWD_FILTER_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "BWD_FILTER_WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "BWD_FILTER_FFT_TILING";
    default: return "UNKNOWN_BWD_FILTER_ALGO";
  }
}

const char* math_type_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA_MATH";
    default: return "UNKNOWN_MATH";
  }
}

std::vector<Candidate> plan_candidates(const cudnn_backend::EnginePlans& plans, cudnnMathType_t math) {
  std::vector<Candidate> candidates;
  for (const cudnn_backend::EnginePlan& plan : plans.plans)
    candidates.push_back({-1, plan.engine.label(), math, std::size_t(plan.workspace_bytes), 0,
                          std::make_shared<const cudnn_backend::EnginePlan>(plan)});
  return candidates;
}

AlgorithmChoice choose_first(const SearchResults& search) {
  const Candidate& first = search.candidates.front();
  return {first, first.label(), 0, "first qualifying result; search results: " + search.text};
}

AlgorithmChoice choose_timed(const SearchResults& search, std::span<const CandidateTiming> timings, int groups) {
  if (timings.size() != search.candidates.size())
    throw Error("conv: " + std::to_string(timings.size()) + " timings for " + std::to_string(search.candidates.size()) +
                " algorithm candidates");
  std::vector<std::string> labels;
  for (const Candidate& candidate : search.candidates) labels.push_back(candidate.label());
  const std::size_t best = case_support::fastest(timings, labels);
  const Candidate& chosen = search.candidates[best];
  const std::string first = search.candidates.front().label();
  std::string text = case_support::describe_timings(labels, timings, groups) + "; chose " + chosen.label() +
                     ", cuDNN's search ranked " + (best == 0 ? "it" : first) + " first; search results: " + search.text;
  return {chosen, first, timings[best].per_launch_ms, std::move(text)};
}

}  // namespace roofbench::conv
