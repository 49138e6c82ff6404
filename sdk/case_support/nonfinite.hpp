// The kernel behind NonfiniteScan (gate.hpp), built with the SDK's sources: not part of its interface.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace roofbench::case_support::detail {

// Counts the NaN and infinite values among data[0, n) into *device_count (zeroed first; device memory).
// Instantiated for float, __nv_bfloat16 and __half.
template <typename T>
void launch_count_nonfinite(const T* data, std::size_t n, unsigned long long* device_count, cudaStream_t stream);

}  // namespace roofbench::case_support::detail
