// cuDNN for the conv plugin: one handle per GPU, descriptor ownership, and the algorithm search's
// bookkeeping (which result to take, and why none could be taken).
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <span>
#include <string>

#include "roofbench/case_support/owned_handle.hpp"
#include "roofbench/cudnn_check.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::conv {

// The handle of the context's GPU, created on first use and bound to ctx.stream() on every call.
cudnnHandle_t cudnn_handle(Context& ctx);

// "9.14.0": the cuDNN the process loaded (not the headers it was built against).
std::string cudnn_version();

using TensorDescriptor = case_support::OwnedHandle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = case_support::OwnedHandle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    case_support::OwnedHandle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

const char* algorithm_name(cudnnConvolutionFwdAlgo_t algo);
const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t algo);
const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t algo);
const char* math_type_name(cudnnMathType_t math);

// How the algorithm is chosen: cudnnFind*AlgorithmEx runs every algorithm on the benchmark's tensors and
// times it (the default); cudnnGetConvolution*Algorithm_v7 asks cuDNN's heuristics without running
// anything. ROOFBENCH_CONV_SEARCH=heuristic selects the second, for comparison.
enum class AlgorithmSearch { find, heuristic };
AlgorithmSearch algorithm_search_from_environment();
const char* search_call(AlgorithmSearch search, int pass);  // pass: 0 fwd, 1 bwd_data, 2 bwd_filter

// What the search settled on for one pass.
struct AlgorithmChoice {
  int algorithm = -1;  // the pass's cudnnConvolution*Algo_t
  std::string name;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace_bytes = 0;
  float search_ms = 0;         // cuDNN's own timing of it during the search
  std::string search_results;  // every result, in cuDNN's order: "ALGO/MATH 0.123 ms (4096 B)" or its status
};

// The fastest successful result of a cudnnFind*AlgorithmEx (results come sorted by time). `fma_only`
// (pedantic fp32) takes only results whose math type is CUDNN_FMA_MATH, so that no tf32 tensor-core
// kernel slips in. Throws NotApplicable listing every result's algorithm and status when none qualifies.
// Heuristic results (cudnnGetConvolution*Algorithm_v7) come in cuDNN's expected order with no timing;
// those needing more than `max_workspace` are skipped.
template <typename Perf>
AlgorithmChoice pick_algorithm(std::span<const Perf> results, bool fma_only, const std::string& what,
                               std::size_t max_workspace = SIZE_MAX) {
  std::string all;
  const Perf* chosen = nullptr;
  for (const Perf& r : results) {
    const bool fits = r.memory <= max_workspace, math = !fma_only || r.mathType == CUDNN_FMA_MATH;
    const bool usable = r.status == CUDNN_STATUS_SUCCESS && fits && math;
    if (usable && !chosen) chosen = &r;
    all += std::string(all.empty() ? "" : "; ") + algorithm_name(r.algo) + "/" + math_type_name(r.mathType) + " ";
    if (r.status != CUDNN_STATUS_SUCCESS)
      all += cudnnGetErrorString(r.status);
    else
      all += std::to_string(r.time) + " ms (" + std::to_string(r.memory) + " B)" + (math ? "" : " not FMA math") +
             (fits ? "" : " too much workspace");
  }
  if (!chosen)
    throw NotApplicable("cuDNN " + cudnn_version() + " has no algorithm for " + what +
                        (all.empty() ? std::string(" (the search returned none)") : " (" + all + ")"));
  return {int(chosen->algo), algorithm_name(chosen->algo), chosen->mathType, chosen->memory, chosen->time, all};
}

}  // namespace roofbench::conv
