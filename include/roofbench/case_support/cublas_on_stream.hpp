// A cuBLAS handle bound to the case's stream with a workspace of the case's own, so run() never makes
// cuBLAS allocate (which a CUDA graph capture forbids).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::case_support {

// cuBLAS's recommended workspace on Hopper; given explicitly so run() never allocates (graph capture).
inline constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

class CublasOnStream {
 public:
  void setup(Context& ctx) {
    ROOFBENCH_CUBLAS(cublasCreate(handle_.replace()));
    workspace_ = ctx.alloc(kCublasWorkspaceBytes, BufferRole::scratch);
  }
  // cublasSetStream drops the user workspace (back to cuBLAS's own pool, which allocates), so the
  // workspace is set again after it. Checked on every call in case the host hands out another stream,
  // e.g. one it captures on; both calls are host-side only.
  cublasHandle_t on(Context& ctx) {
    const auto stream = cuda::stream(ctx);
    if (!bound_ || stream != stream_) {
      ROOFBENCH_CUBLAS(cublasSetStream(handle_.get(), stream));
      ROOFBENCH_CUBLAS(cublasSetWorkspace(handle_.get(), workspace_, kCublasWorkspaceBytes));
      stream_ = stream;
      bound_ = true;
    }
    return handle_.get();
  }
  void teardown() { ROOFBENCH_CUBLAS(handle_.destroy()); }

 private:
  CublasHandle handle_;
  void* workspace_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool bound_ = false;
};

}  // namespace roofbench::case_support
