// Column sums over many rows (bias gradients, LayerNorm weight gradients) in two deterministic passes:
// blocks of kColumnChunkRows rows write partial sums, then one pass adds the chunks in a fixed order.
// Atomics would be one pass, but then two runs of the same step would not give bit-identical gradients.
#pragma once

#include <cuda_runtime.h>

#include "common.cuh"

namespace roofbench::gpt::cuda {

inline constexpr int kColumnChunkRows = 256;
inline constexpr int kColumnTileCols = 32;
inline constexpr int kColumnRowLanes = 8;

inline int column_chunks(int rows) { return static_cast<int>(ceil_div(rows, kColumnChunkRows)); }

// partials[chunk, col] = sum of term(row, col) over the chunk's rows. term covers `cols` columns.
template <typename Term>
__global__ void column_partial_sums_kernel(float* partials, int rows, int cols, Term term) {
  __shared__ float lanes[kColumnRowLanes][kColumnTileCols + 1];
  const int col = blockIdx.x * kColumnTileCols + threadIdx.x;
  const int chunk = blockIdx.y;
  const int row_end = min(rows, (chunk + 1) * kColumnChunkRows);
  float sum = 0;
  if (col < cols)
    for (int row = chunk * kColumnChunkRows + threadIdx.y; row < row_end; row += kColumnRowLanes)
      sum += term(row, col);
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int lane = 1; lane < kColumnRowLanes; ++lane) sum += lanes[lane][threadIdx.x];
    partials[static_cast<std::size_t>(chunk) * cols + col] = sum;
  }
}

// Second pass: columns [0, split) go to first[], [split, cols) to second[] (LayerNorm reduces its weight and
// bias gradients in one sweep). Defined in matmul.cu.
void column_finish(float* first, float* second, int split, const float* partials, int chunks, int cols,
                   cudaStream_t stream);

template <typename Term>
void column_sums(float* first, float* second, int split, int rows, int cols, Term term, float* partials,
                 cudaStream_t stream) {
  const int chunks = column_chunks(rows);
  const dim3 grid(ceil_div(cols, kColumnTileCols), chunks), block(kColumnTileCols, kColumnRowLanes);
  column_partial_sums_kernel<<<grid, block, 0, stream>>>(partials, rows, cols, term);
  ROOFBENCH_CUDA_LAUNCH();
  column_finish(first, second, split, partials, chunks, cols, stream);
}

}  // namespace roofbench::gpt::cuda
