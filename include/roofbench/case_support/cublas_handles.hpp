// Owned cuBLAS / cuBLASLt handles and descriptors (the error checks are in roofbench/cuda.hpp).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <string>

#include "roofbench/case_support/owned_handle.hpp"
#include "roofbench/cuda.hpp"

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

// "algo 66, tile 29, stages 35, split-k 1": what tells one cuBLASLt algorithm from another in a search's
// labels.
inline std::string describe_lt_algorithm(const cublasLtMatmulAlgo_t& algorithm) {
  std::int32_t id = 0;
  std::uint32_t tile = 0, stages = 0, split_k = 0;
  std::size_t written = 0;
  ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoConfigGetAttribute(&algorithm, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &written));
  ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoConfigGetAttribute(&algorithm, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &written));
  ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoConfigGetAttribute(&algorithm, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &written));
  ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoConfigGetAttribute(&algorithm, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k, sizeof split_k, &written));
  return "algo " + std::to_string(id) + ", tile " + std::to_string(tile) + ", stages " + std::to_string(stages) +
         ", split-k " + std::to_string(split_k);
}

}  // namespace roofbench::case_support
