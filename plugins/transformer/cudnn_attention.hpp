// cuDNN's fused attention through the raw backend API: a graph of operations cuDNN recognises as scaled
// dot-product attention (QK^T matmul, scale, causal mask, softmax with fp32 stats, PV matmul), built once in
// setup and executed on the case's stream. Its plan is the fastest of up to four engine configurations of
// cuDNN's heuristics (modes A, B, fallback), timed in setup (kernels/cudnn_backend). The dedicated SDPA
// operation would need cuDNN 9.21 for causal masks; this graph is accepted by 9.x's runtime-fusion
// engines, and when it is not, build() throws NotApplicable with cuDNN's own reason.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "roofbench/kernels/cuda_attention.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::transformer {

class CudnnAttention {
 public:
  CudnnAttention() = default;
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;
  ~CudnnAttention();

  // q, k, v, o: the case's own tensors (from ctx.alloc, filled), on which the candidate plans are timed.
  void build(kernels::AttentionType type, const kernels::AttentionShape& shape, Context& ctx, const void* q,
             const void* k, const void* v, void* o);
  void run(cudaStream_t stream, const void* q, const void* k, const void* v, void* o);
  void destroy();
  std::vector<Figure> facts() const { return facts_; }

  struct State;  // the handle, the graph's descriptors, the plan and the buffers (cudnn_attention.cpp)

 private:
  State* state_ = nullptr;
  std::vector<Figure> facts_;
};

}  // namespace roofbench::transformer
