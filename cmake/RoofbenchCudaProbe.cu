// Compiled into every CUDA plugin by roofbench_add_plugin(... CUDA): lets the host ask, before any case
// runs, whether this plugin's kernels have code the current device can run, and which architectures
// they were built for (core/src/cuda_arch.hpp reads the answer).
#include <cuda_runtime.h>

#include <cstdio>

namespace {
__global__ void roofbench_probe_kernel() {}

#define ROOFBENCH_STRINGIFY_LIST(...) #__VA_ARGS__
#define ROOFBENCH_STRINGIFY(list) ROOFBENCH_STRINGIFY_LIST(list)
#ifdef __CUDA_ARCH_LIST__
constexpr const char kArchitectures[] = ROOFBENCH_STRINGIFY(__CUDA_ARCH_LIST__);
#else
constexpr const char kArchitectures[] = "";
#endif
}  // namespace

// Writes the architectures the plugin was compiled for ("800,900": __CUDA_ARCH_LIST__) into
// `architectures` and returns the cudaError_t of cudaFuncGetAttributes on a kernel of this plugin for
// the current device: cudaSuccess when the device can run the plugin's code (a binary image or PTX it
// can compile), cudaErrorNoKernelImageForDevice when it cannot.
extern "C" __attribute__((visibility("default"))) int roofbench_cuda_probe(char* architectures, int capacity) {
  if (architectures && capacity > 0) std::snprintf(architectures, static_cast<std::size_t>(capacity), "%s", kArchitectures);
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, roofbench_probe_kernel);
  if (status != cudaSuccess) static_cast<void>(cudaGetLastError());  // not sticky: clear it for the host
  return static_cast<int>(status);
}
