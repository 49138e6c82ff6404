// Small device helpers every layer file uses.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "roofbench/cuda.hpp"

namespace roofbench::gpt::cuda {

inline constexpr unsigned kFullWarp = 0xffffffffu;

__device__ inline float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullWarp, x, offset);
  return x;
}

__device__ inline float warp_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, offset));
  return x;
}

inline unsigned ceil_div(std::size_t n, std::size_t d) { return static_cast<unsigned>((n + d - 1) / d); }

// Elementwise kernels: a grid-stride loop over a grid no larger than needed to fill the GPU.
inline constexpr int kElementwiseThreads = 256;
inline unsigned elementwise_blocks(std::size_t n) {
  const unsigned needed = ceil_div(n, kElementwiseThreads);
  return needed < 8192u ? (needed > 0 ? needed : 1u) : 8192u;
}

// Row kernels (LayerNorm, softmax over a vocabulary): one warp per row, this many rows per block.
inline constexpr int kRowsPerBlock = 8;

}  // namespace roofbench::gpt::cuda
