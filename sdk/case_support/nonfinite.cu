// The device-side scan behind NonfiniteScan (gate.hpp): counts NaN and infinite values of a whole output
// with one atomic per warp, so that even multi-GiB outputs are checked without copying them to the host.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>

#include "nonfinite.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench::case_support::detail {
namespace {

constexpr int kThreads = 256;
// A few waves of blocks is enough for a scan; fewer blocks mean fewer atomics.
constexpr std::size_t kScanBlocks = 4096;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__global__ void count_nonfinite_kernel(const T* __restrict__ data, std::size_t n,
                                       unsigned long long* __restrict__ count) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  unsigned local = 0;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    local += isfinite(to_float(data[i])) ? 0u : 1u;
  // One atomic per warp rather than per thread; every lane reaches this point (no early return).
  local = __reduce_add_sync(0xffffffffu, local);
  if (threadIdx.x % 32 == 0 && local != 0) atomicAdd(count, static_cast<unsigned long long>(local));
}

}  // namespace

template <typename T>
void launch_count_nonfinite(const T* data, std::size_t n, unsigned long long* device_count, cudaStream_t stream) {
  ROOFBENCH_CUDA(cudaMemsetAsync(device_count, 0, sizeof(*device_count), stream));
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::clamp<std::size_t>((n + kThreads - 1) / kThreads, 1, kScanBlocks));
  count_nonfinite_kernel<T><<<blocks, kThreads, 0, stream>>>(data, n, device_count);
  ROOFBENCH_CUDA_LAUNCH();
}

template void launch_count_nonfinite<float>(const float*, std::size_t, unsigned long long*, cudaStream_t);
template void launch_count_nonfinite<__nv_bfloat16>(const __nv_bfloat16*, std::size_t, unsigned long long*,
                                                    cudaStream_t);
template void launch_count_nonfinite<__half>(const __half*, std::size_t, unsigned long long*, cudaStream_t);

}  // namespace roofbench::case_support::detail
