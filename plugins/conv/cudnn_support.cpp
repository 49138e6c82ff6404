#include "cudnn_support.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <map>

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
  ROOFBENCH_CUDNN(cudnnSetStream(it->second, static_cast<cudaStream_t>(ctx.stream())));
  return it->second;
}

AlgorithmSearch algorithm_search_from_environment() {
  const char* value = std::getenv("ROOFBENCH_CONV_SEARCH");
  if (!value || std::string(value).empty() || std::string(value) == "find") return AlgorithmSearch::find;
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

}  // namespace roofbench::conv
