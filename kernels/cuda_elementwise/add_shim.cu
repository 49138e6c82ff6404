// The micro plugin's add kernels and its copy as a C library, for timers outside roofbench: scripts/
// like_for_like.py loads it with ctypes and passes torch tensors' data pointers and a stream, so triton's
// do_bench, do_bench_cudagraph and torch.profiler time the kernels micro/add_fp32_* and micro/copy time,
// compiled from the same source (cuda_elementwise.cu).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <exception>

#include "roofbench/kernels/cuda_elementwise.hpp"
#include "roofbench/cuda.hpp"

namespace {

// 0 when `launch` enqueued its work; else 1, the reason on stderr (a C caller gets no exception).
template <typename Launch>
int launched(const char* what, Launch&& launch) {
  try {
    launch();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    return 1;
  }
}

}  // namespace

extern "C" {

int roofbench_add_fp32_vec16(const float* a, const float* b, float* c, std::size_t n, void* stream) {
  return launched("add_fp32_vec16", [&] { roofbench::kernels::launch_add_vec16(a, b, c, n, static_cast<cudaStream_t>(stream)); });
}

int roofbench_add_fp32_scalar(const float* a, const float* b, float* c, std::size_t n, void* stream) {
  return launched("add_fp32_scalar", [&] { roofbench::kernels::launch_add_scalar(a, b, c, n, static_cast<cudaStream_t>(stream)); });
}

// micro/copy's run: one device-to-device cudaMemcpyAsync.
int roofbench_copy(void* destination, const void* source, std::size_t bytes, void* stream) {
  return launched("copy", [&] {
    ROOFBENCH_CUDA(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
  });
}

}  // extern "C"
