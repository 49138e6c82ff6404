// The MLP's fc layer with its bias and its GELU as one cuDNN backend-API operation graph (fc_gelu_cudnn.cpp
// says what is tested and why): the kernel lab's lab_fc_gelu_bf16 v2, and the GPU test that holds it
// against the double reference and against v1. Built only where cuDNN is found (ROOFBENCH_GPT_WITH_CUDNN).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda {

// The graph: ADD writes z (bf16) itself and GELU_FWD reads z, so it asks for GELU of the rounded z, which is
// what v1's GELU pass reads (fanning both outputs out of a virtual fp32 sum instead is the slower: 510 us
// against 498 at batch 512 on an H200).
extern const char* const kFcGeluGraphName;

struct FcGeluShape {
  int N = 0, C = 0, H = 0;  // rows (positions), in (the model's width), out (the MLP's hidden width)
};

class CudnnFcGelu {
 public:
  // Builds the graph on x [N, C], w [H, C] (row-major, read as w^T through its strides, no copy), bias [H],
  // z and gelu [N, H] (all bf16, 16-byte aligned; the pointers are the graph's for good), then lets
  // cudnn_backend::fastest_plan time the heuristics' plans on `stream` with these tensors (so z and gelu
  // are written). workspace(bytes) gives device memory for the plans (called at most once). Throws
  // NotApplicable with cuDNN's reason when cuDNN refuses the graph or has no plan for it, Error otherwise.
  CudnnFcGelu(const FcGeluShape& shape, cudaStream_t stream, const bf16* x, const bf16* w, const bf16* bias, bf16* z,
              bf16* gelu, const std::function<void*(std::size_t bytes)>& workspace);
  CudnnFcGelu(const CudnnFcGelu&) = delete;
  CudnnFcGelu& operator=(const CudnnFcGelu&) = delete;
  ~CudnnFcGelu();

  // Enqueues one execution of the chosen plan on `stream` (capturable: fastest_plan took only plans whose
  // launches a CUDA graph can hold).
  void run(cudaStream_t stream);
  // Releases the plan, the descriptors and the handle, every status checked (a case's teardown); the
  // destructor does the same without reporting.
  void destroy();
  // cudnn_version, cudnn_graph, cudnn_engine, engine_search (fastest_plan's text: what was timed and chosen,
  // the heuristics' counts), cudnn_workspace_bytes.
  const std::vector<Figure>& facts() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace roofbench::gpt::cuda
