// The best of `repetitions` timings of `launch` on `stream` between two CUDA events, after `warmups`
// untimed ones: how the ceilings time their kernels and GEMMs, and tests time a kernel against them. The
// repetitions run back to back, as a case's runs do, all enqueued behind one busy wait on the GPU long
// enough for the host to enqueue them: on an idle stream the host's own time to launch (several
// microseconds, more for a cuBLAS call) would fall between the events and lower the roof below what a case
// timed from its held stream reaches. A repetition the host fell behind on only reads longer.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "roofbench/cuda.hpp"

namespace roofbench {

// Enqueues one kernel that spins `nanoseconds` on `stream` (cuda_device.cu).
void enqueue_busy_wait(cudaStream_t stream, unsigned long long nanoseconds);

// The busy wait's length per repetition behind it: a budget for the host to enqueue a cuBLAS call and two
// events (a repetition the host overruns it on only reads longer, and the best of them is kept).
inline constexpr unsigned long long kLaunchCoverNs = 100'000;

template <typename Launch>
double best_event_seconds(cudaStream_t stream, int warmups, int repetitions, Launch&& launch) {
  std::vector<cudaEvent_t> events(2 * std::size_t(std::max(repetitions, 0)), nullptr);
  float best_ms = 1e30f;
  try {
    for (cudaEvent_t& e : events) ROOFBENCH_CUDA(cudaEventCreate(&e));
    for (int i = 0; i < warmups; ++i) launch();
    enqueue_busy_wait(stream, kLaunchCoverNs * std::max(repetitions, 1));
    for (int i = 0; i < repetitions; ++i) {
      ROOFBENCH_CUDA(cudaEventRecord(events[2 * i], stream));
      launch();
      ROOFBENCH_CUDA(cudaEventRecord(events[2 * i + 1], stream));
    }
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream));
    for (int i = 0; i < repetitions; ++i) {
      float ms = 0;
      ROOFBENCH_CUDA(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
      best_ms = std::min(best_ms, ms);
    }
  } catch (...) {
    for (cudaEvent_t e : events)
      if (e) cudaEventDestroy(e);
    throw;
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  return best_ms * 1e-3;
}

}  // namespace roofbench
