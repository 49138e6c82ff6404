// cuDNN for the conv plugin: one handle per GPU, descriptor ownership, and the algorithm search's
// bookkeeping (which result to take, and why none could be taken).
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/case_support/owned_handle.hpp"
#include "roofbench/cudnn_backend/engine_plans.hpp"
#include "roofbench/cudnn_check.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::conv {

// The handle of the context's GPU, created on first use and bound to ctx.stream() on every call.
cudnnHandle_t cudnn_handle(Context& ctx);

// "9.14.0": the cuDNN the process loaded (not the headers it was built against).
std::string cudnn_version();
// "9.19.0": the cuDNN headers this plugin was built against.
std::string cudnn_header_version();
// Where the process's cuDNN libraries were loaded from, one group per folder:
// "/usr/lib/x86_64-linux-gnu: libcudnn.so.9 libcudnn_cnn.so.9". The dispatcher libcudnn.so.9 loads its
// sub-libraries by name when first needed, so two folders here mean two cuDNN builds in one process.
std::string cudnn_loaded_from();
// The same text from a list of loaded objects' paths (those not named libcudnn* are left out).
std::string describe_cudnn_libraries(const std::vector<std::string>& loaded_paths);

using TensorDescriptor = case_support::OwnedHandle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = case_support::OwnedHandle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    case_support::OwnedHandle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

const char* algorithm_name(cudnnConvolutionFwdAlgo_t algo);
const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t algo);
const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t algo);
const char* math_type_name(cudnnMathType_t math);

// How the algorithm is chosen: cudnnFind*AlgorithmEx runs every algorithm on the benchmark's tensors, and
// roofbench times the ones that succeeded and takes the fastest (the default); cudnnGetConvolution*Algorithm_v7
// asks cuDNN's heuristics without running anything and its first result is taken.
// ROOFBENCH_CONV_SEARCH=heuristic selects the second, for comparison, and so does ROOFBENCH_ALGORITHM_CHOICE=first
// where ROOFBENCH_CONV_SEARCH is not set (cuDNN's Find orders its results by its own timing in the process).
enum class AlgorithmSearch { find, heuristic };
AlgorithmSearch algorithm_search_from_environment();
const char* search_call(AlgorithmSearch search, int pass);  // pass: 0 fwd, 1 bwd_data, 2 bwd_filter

// One way to run a pass: a successful result of the legacy API's search (an algorithm with the math type
// it ran under), or an execution plan of the backend API's heuristics.
struct Candidate {
  int algorithm = -1;  // the pass's cudnnConvolution*Algo_t; -1 for a backend plan
  std::string name;    // "IMPLICIT_GEMM", or "engine 12 (knobs 3=1)" for a backend plan
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace_bytes = 0;
  float search_ms = 0;  // cuDNN's own timing of it during the legacy search
  std::shared_ptr<const cudnn_backend::EnginePlan> plan;  // set for a backend plan
  // "IMPLICIT_GEMM/DEFAULT_MATH", or "backend engine 12 (knobs 3=1)".
  std::string label() const { return plan ? "backend " + name : name + "/" + math_type_name(math); }
  // The API that runs it, for the results: "legacy" (cudnnConvolution*) or "backend" (cudnnBackendExecute).
  const char* api() const { return plan ? "backend" : "legacy"; }
};

// The backend plans as candidates beside the legacy results (math: the format's, for the record).
std::vector<Candidate> plan_candidates(const cudnn_backend::EnginePlans& plans, cudnnMathType_t math);

// What the search returned for one pass: the results that qualify, in cuDNN's order, and every result as
// text ("ALGO/MATH 0.123 ms (4096 B)" or its status).
struct SearchResults {
  std::vector<Candidate> candidates;
  std::string text;
};

// The results of a cudnnFind*AlgorithmEx (sorted by cuDNN's timing) or of cudnnGetConvolution*Algorithm_v7
// (in cuDNN's expected order, untimed) that succeeded, need at most `max_workspace` and, for `fma_only`
// (pedantic fp32), have math type CUDNN_FMA_MATH, so that no tf32 tensor-core kernel slips in. Throws
// NotApplicable listing every result's algorithm and status when none qualifies.
template <typename Perf>
SearchResults usable_results(std::span<const Perf> results, bool fma_only, const std::string& what,
                             std::size_t max_workspace = SIZE_MAX) {
  SearchResults found;
  for (const Perf& r : results) {
    const bool fits = r.memory <= max_workspace, math = !fma_only || r.mathType == CUDNN_FMA_MATH;
    const Candidate candidate{int(r.algo), algorithm_name(r.algo), r.mathType, r.memory, r.time};
    if (r.status == CUDNN_STATUS_SUCCESS && fits && math) found.candidates.push_back(candidate);
    found.text += (found.text.empty() ? "" : "; ") + candidate.label() + " ";
    if (r.status != CUDNN_STATUS_SUCCESS)
      found.text += cudnnGetErrorString(r.status);
    else
      found.text += std::to_string(r.time) + " ms (" + std::to_string(r.memory) + " B)" + (math ? "" : " not FMA math") +
                    (fits ? "" : " too much workspace");
  }
  if (found.candidates.empty())
    throw NotApplicable("cuDNN " + cudnn_version() + " has no algorithm for " + what +
                        (found.text.empty() ? std::string(" (the search returned none)") : " (" + found.text + ")"));
  return found;
}

// What was settled on for one pass.
struct AlgorithmChoice {
  Candidate chosen;
  std::string search_first;    // the label of cuDNN's first qualifying result
  double timed_ms = 0;         // our per-launch median of the chosen one; 0 when not timed
  std::string search_results;  // how it was chosen, the timed candidates, then every result of the search
};

using case_support::CandidateTiming;
// The fastest of `candidates` by `timings` (one per candidate, in the same order), with the text
// "timed per launch (median of 5 groups of up to 50 launches, CUDA graph): A/M 0.0101 ms, B/M 0.0152 ms;
// chose A/M, cuDNN's search ranked B/M first; search results: <search.text>".
AlgorithmChoice choose_timed(const SearchResults& search, std::span<const CandidateTiming> timings, int groups);
// cuDNN's first qualifying result, untimed (the heuristic mode).
AlgorithmChoice choose_first(const SearchResults& search);

}  // namespace roofbench::conv
