// Ownership of a CUDA library's opaque handle or descriptor (cuBLAS, cuBLASLt, cuDNN) with its destroy
// function; the error checks are in roofbench/cuda.hpp and roofbench/cudnn_check.hpp.
#pragma once

#include <utility>

#include "roofbench/plugin.hpp"

namespace roofbench::case_support {

// Cases destroy handles in teardown() through destroy(), whose status they check; the destructor is only
// the fallback for a setup that threw half-way, and drops the status because a destructor has no way to
// report it. destroy() returns what the destroy function returns (cublasStatus_t, cudnnStatus_t, ...).
template <typename Handle, auto destroy_function>
class OwnedHandle {
 public:
  using Status = decltype(destroy_function(Handle{}));

  OwnedHandle() = default;
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() {
    if (handle_) (void)destroy_function(handle_);
  }

  Handle get() const { return handle_; }
  // For the library's create(&handle) functions.
  Handle* replace() {
    if (handle_) throw Error("a library handle created twice (replace() on a live handle)");
    return &handle_;
  }
  // Nothing to destroy is success: every CUDA library's success status is the enum's zero
  // (cudaSuccess, CUBLAS_STATUS_SUCCESS, CUDNN_STATUS_SUCCESS).
  Status destroy() {
    const Handle handle = std::exchange(handle_, nullptr);
    return handle ? destroy_function(handle) : Status{};
  }

 private:
  Handle handle_ = nullptr;
};

}  // namespace roofbench::case_support
