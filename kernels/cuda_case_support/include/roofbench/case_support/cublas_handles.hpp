// Owned cuBLAS / cuBLASLt handles and descriptors (the error checks are in roofbench/cuda_check.hpp).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include "roofbench/case_support/owned_handle.hpp"
#include "roofbench/cuda_check.hpp"

namespace roofbench::case_support {

using CublasHandle = OwnedHandle<cublasHandle_t, cublasDestroy>;
using CublasLtHandle = OwnedHandle<cublasLtHandle_t, cublasLtDestroy>;
using CublasLtMatmulDesc = OwnedHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using CublasLtLayout = OwnedHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using CublasLtPreference = OwnedHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

// What one cublasLtMatmul D = op(A) op(B) (C in place of D) needs: the handle, the operation and the three
// layouts. destroy() frees them in reverse order of creation with every status checked (teardown's job;
// the destructors only release what is left).
struct LtMatmul {
  CublasLtHandle handle;
  CublasLtMatmulDesc desc;
  CublasLtLayout a, b, c;

  void destroy() {
    ROOFBENCH_CUBLASLT(c.destroy());
    ROOFBENCH_CUBLASLT(b.destroy());
    ROOFBENCH_CUBLASLT(a.destroy());
    ROOFBENCH_CUBLASLT(desc.destroy());
    ROOFBENCH_CUBLASLT(handle.destroy());
  }
};

}  // namespace roofbench::case_support
