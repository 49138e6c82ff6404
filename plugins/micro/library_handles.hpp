// Ownership of cuBLAS / cuBLASLt handles (the error checks are in roofbench/cuda_check.hpp).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <utility>

#include "roofbench/cuda_check.hpp"

namespace roofbench::micro {

// A library handle (an opaque pointer) with its destroy function. Cases destroy handles in teardown()
// through destroy(), whose status they check; the destructor is only the fallback for a setup that threw
// half-way, and drops the status because a destructor has no way to report it.
template <typename Handle, auto destroy_function>
class OwnedHandle {
 public:
  OwnedHandle() = default;
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() {
    if (handle_) (void)destroy_function(handle_);
  }

  Handle get() const { return handle_; }
  // For the library's create(&handle) functions.
  Handle* replace() {
    if (handle_) throw Error("micro: library handle created twice");
    return &handle_;
  }
  cublasStatus_t destroy() {
    const Handle handle = std::exchange(handle_, nullptr);
    return handle ? destroy_function(handle) : CUBLAS_STATUS_SUCCESS;
  }

 private:
  Handle handle_ = nullptr;
};

using CublasHandle = OwnedHandle<cublasHandle_t, cublasDestroy>;
using CublasLtHandle = OwnedHandle<cublasLtHandle_t, cublasLtDestroy>;
using CublasLtMatmulDesc = OwnedHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using CublasLtLayout = OwnedHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using CublasLtPreference = OwnedHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

}  // namespace roofbench::micro
