// The best of `repetitions` timings of `launch` on `stream` between two CUDA events, after `warmups`
// untimed ones: how the ceilings time their kernels and GEMMs, and tests time a kernel against them. Each
// timed launch is enqueued behind a busy wait on the GPU, so the start event is not recorded until the host
// has enqueued the launch: on an idle stream the host's own time to launch (several microseconds, more for
// a cuBLAS call) would fall between the events and lower the roof below what a case timed from a held
// stream reaches.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "roofbench/cuda.hpp"

namespace roofbench {

// Enqueues one kernel that spins `nanoseconds` on `stream` (cuda_device.cu).
void enqueue_busy_wait(cudaStream_t stream, unsigned long long nanoseconds);

// Long enough for the host to enqueue a cuBLAS call and an event behind it.
inline constexpr unsigned long long kLaunchCoverNs = 200'000;

template <typename Launch>
double best_event_seconds(cudaStream_t stream, int warmups, int repetitions, Launch&& launch) {
  cudaEvent_t start, stop;
  ROOFBENCH_CUDA(cudaEventCreate(&start));
  ROOFBENCH_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < warmups; ++i) launch();
  float best_ms = 1e30f;
  for (int i = 0; i < repetitions; ++i) {
    enqueue_busy_wait(stream, kLaunchCoverNs);
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
