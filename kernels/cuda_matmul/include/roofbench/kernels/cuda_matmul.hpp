// Hand-written fp32 matmuls for CUDA: C (m x n) = A (m x k) * B (k x n), all row-major and unpadded.
// They are the reference rungs of the matmul ladder (naive, then shared-memory tiled) that cuBLAS is
// measured against, so they favour clarity over the last few percent.
//
// Every launch function only enqueues on `stream` (graph-capturable), accepts any m, n, k >= 0 and
// throws roofbench::Error when the launch is rejected.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace roofbench::kernels {

// One thread per output element, reading A and B straight from global memory.
void launch_matmul_naive_fp32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
                              cudaStream_t stream);

// 64x64 output tiles per block staged through shared memory, 4x4 outputs per thread held in registers.
void launch_matmul_tiled_fp32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
                              cudaStream_t stream);

}  // namespace roofbench::kernels
