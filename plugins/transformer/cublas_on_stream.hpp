// A cuBLAS handle bound to the case's stream with a workspace of the case's own, so run() never makes
// cuBLAS allocate (which a CUDA graph capture forbids).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/cuda_check.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::transformer {

class CublasOnStream {
 public:
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;  // cuBLAS's advice on Hopper

  void setup(Context& ctx) {
    ROOFBENCH_CUBLAS(cublasCreate(handle_.replace()));
    workspace_ = ctx.alloc(kWorkspaceBytes, BufferRole::scratch);
  }
  // cublasSetStream drops the user workspace, so it is set again after it; both are host-side only.
  cublasHandle_t on(Context& ctx) {
    const auto stream = static_cast<cudaStream_t>(ctx.stream());
    if (!bound_ || stream != stream_) {
      ROOFBENCH_CUBLAS(cublasSetStream(handle_.get(), stream));
      ROOFBENCH_CUBLAS(cublasSetWorkspace(handle_.get(), workspace_, kWorkspaceBytes));
      stream_ = stream;
      bound_ = true;
    }
    return handle_.get();
  }
  void teardown() { ROOFBENCH_CUBLAS(handle_.destroy()); }

 private:
  case_support::CublasHandle handle_;
  void* workspace_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool bound_ = false;
};

}  // namespace roofbench::transformer
