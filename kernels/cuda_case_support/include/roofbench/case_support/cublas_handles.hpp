// Owned cuBLAS / cuBLASLt handles and descriptors (the error checks are in roofbench/cuda_check.hpp).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include "roofbench/case_support/owned_handle.hpp"

namespace roofbench::case_support {

using CublasHandle = OwnedHandle<cublasHandle_t, cublasDestroy>;
using CublasLtHandle = OwnedHandle<cublasLtHandle_t, cublasLtDestroy>;
using CublasLtMatmulDesc = OwnedHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using CublasLtLayout = OwnedHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using CublasLtPreference = OwnedHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

}  // namespace roofbench::case_support
