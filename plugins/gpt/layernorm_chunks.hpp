// How the fused LayerNorm backward (cuda/layernorm.cu) splits N rows into chunks, one block each, whose
// parameter-gradient partial sums a second pass adds: pure arithmetic, free of CUDA so the CPU tests can
// check it. At most kLayerNormMaxChunks chunks (the second pass adds that many partials per column, one
// after another), and chunks as small as one row per warp of a block, so a small batch still spreads over
// the GPU.
#pragma once

#include <algorithm>
#include <cstddef>

namespace roofbench::gpt {

inline constexpr int kLayerNormMaxChunks = 256;
inline constexpr int kLayerNormBlockWarps = 8;  // the kernel's warps, one row each at a time

struct LayerNormChunks {
  int rows = 0;   // rows per chunk, a multiple of kLayerNormBlockWarps
  int count = 0;  // chunks: ceil(N / rows), at most kLayerNormMaxChunks
};

constexpr LayerNormChunks layernorm_chunks(int N) {
  const int rows_per_chunk = std::max(1, (N + kLayerNormMaxChunks - 1) / kLayerNormMaxChunks);
  const int rows = (rows_per_chunk + kLayerNormBlockWarps - 1) / kLayerNormBlockWarps * kLayerNormBlockWarps;
  return LayerNormChunks{rows, (N + rows - 1) / rows};
}

// Floats of the partial sums: count chunks of 3C columns (C weight-gradient, C bias-gradient, C of the
// column sums of dx).
constexpr std::size_t layernorm_chunk_partials(int N, int C) {
  return static_cast<std::size_t>(layernorm_chunks(N).count) * 3 * static_cast<std::size_t>(C);
}

}  // namespace roofbench::gpt
