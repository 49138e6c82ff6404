// The best of `repetitions` timings of `launch` on `stream` between two CUDA events, after `warmups`
// untimed ones: how the ceilings time their kernels and GEMMs, and tests time a kernel against them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "roofbench/cuda.hpp"

namespace roofbench {

template <typename Launch>
double best_event_seconds(cudaStream_t stream, int warmups, int repetitions, Launch&& launch) {
  cudaEvent_t start, stop;
  ROOFBENCH_CUDA(cudaEventCreate(&start));
  ROOFBENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < warmups; ++i) launch();
  float best_ms = 1e30f;
  for (int i = 0; i < repetitions; ++i) {
    ROOFBENCH_CUDA(cudaEventRecord(start, stream));
    launch();
    ROOFBENCH_CUDA(cudaEventRecord(stop, stream));
    ROOFBENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    ROOFBENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    best_ms = std::min(best_ms, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best_ms * 1e-3;
}

}  // namespace roofbench
