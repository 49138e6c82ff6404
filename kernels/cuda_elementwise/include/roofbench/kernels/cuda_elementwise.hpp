// Elementwise CUDA kernels: c = a + b, the simplest memory-bound workload (1 FLOP per 3 elements moved),
// in two forms whose difference is the point of the benchmark:
//   scalar: one element per thread per step of a grid-stride loop;
//   vec16:  16-byte loads and stores (float4, 8 x bf16) with several loads in flight per thread, plus a
//           scalar head and tail for pointers that are not 16-byte aligned and sizes that are not a
//           multiple of the vector width.
// copy_vec16 is vec16 without the add (c = a): a copy that runs as a kernel of its own, where
// cudaMemcpyAsync may run on the copy engine or in the driver's kernel.
// Instantiated for float and __nv_bfloat16. Launch functions only enqueue on `stream` and throw
// roofbench::Error when the launch is rejected.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace roofbench::kernels {

template <typename T>
void launch_add_scalar(const T* a, const T* b, T* c, std::size_t n, cudaStream_t stream);

template <typename T>
void launch_add_vec16(const T* a, const T* b, T* c, std::size_t n, cudaStream_t stream);

template <typename T>
void launch_copy_vec16(const T* a, T* c, std::size_t n, cudaStream_t stream);

}  // namespace roofbench::kernels
