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

// The same partial sums, four adjacent columns per thread (16-byte accesses) and kLanes row lanes per
// block: term(row, col) returns the float4 of columns col .. col+3 (col a multiple of 4; cols must be a
// multiple of 4). Same chunks and partials layout as above, the same fixed summation order in every run;
// a term that also writes (a fused elementwise pass whose output is being summed) splits its work into
// fetch and finish.
inline constexpr int kColumn4TileCols = 4 * kColumnTileCols;  // 128 columns per block
template <int kLanes, typename Term4>
__global__ void __launch_bounds__(kColumnTileCols* kLanes)
    column_partial_sums4_kernel(float* partials, int rows, int cols, Term4 term) {
  __shared__ float4 lanes[kLanes][kColumnTileCols];
  const int col = blockIdx.x * kColumn4TileCols + 4 * static_cast<int>(threadIdx.x);
  const int chunk = blockIdx.y;
  const int row_end = min(rows, (chunk + 1) * kColumnChunkRows);
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const auto add = [&sum](const float4& t) {
    sum.x += t.x;
    sum.y += t.y;
    sum.z += t.z;
    sum.w += t.w;
  };
  if (col < cols) {
    int row = chunk * kColumnChunkRows + static_cast<int>(threadIdx.y);
    if constexpr (requires { term.fetch(0, 0); }) {
      // A term that also writes (fetch(row, col) loads, finish(row, col, fetched) computes and stores):
      // kFetchRows rows' loads are issued before the first row's store, which they might alias as far as
      // the compiler knows and so could not move ahead of it. The same rows in the same order.
      constexpr int kFetchRows = 4;
      for (; row + (kFetchRows - 1) * kLanes < row_end; row += kFetchRows * kLanes) {
        decltype(term.fetch(0, 0)) fetched[kFetchRows];
#pragma unroll
        for (int u = 0; u < kFetchRows; ++u) fetched[u] = term.fetch(row + u * kLanes, col);
#pragma unroll
        for (int u = 0; u < kFetchRows; ++u) add(term.finish(row + u * kLanes, col, fetched[u]));
      }
      for (; row < row_end; row += kLanes) add(term.finish(row, col, term.fetch(row, col)));
    } else {
#pragma unroll 4
      for (; row < row_end; row += kLanes) add(term(row, col));
    }
  }
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int lane = 1; lane < kLanes; ++lane) {
      const float4 t = lanes[lane][threadIdx.x];
      sum.x += t.x;
      sum.y += t.y;
      sum.z += t.z;
      sum.w += t.w;
    }
    float* out = partials + static_cast<std::size_t>(chunk) * cols + col;
    out[0] = sum.x;
    out[1] = sum.y;
    out[2] = sum.z;
    out[3] = sum.w;
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

// column_sums with the four-column kernel; cols must be a multiple of 4 and term's loads 16-byte aligned.
template <int kLanes, typename Term4>
void column_sums4(float* first, float* second, int split, int rows, int cols, Term4 term, float* partials,
                  cudaStream_t stream) {
  const int chunks = column_chunks(rows);
  const dim3 grid(ceil_div(cols, kColumn4TileCols), chunks), block(kColumnTileCols, kLanes);
  column_partial_sums4_kernel<kLanes><<<grid, block, 0, stream>>>(partials, rows, cols, term);
  ROOFBENCH_CUDA_LAUNCH();
  column_finish(first, second, split, partials, chunks, cols, stream);
}

}  // namespace roofbench::gpt::cuda
