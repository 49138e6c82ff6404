// Column sums over many rows (bias gradients, LayerNorm weight gradients) in two deterministic passes:
// blocks of kColumnChunkRows rows write partial sums, then one pass adds the chunks in a fixed order.
// Atomics would be one pass, but then two runs of the same step would not give bit-identical gradients.
#pragma once

#include <cuda_runtime.h>

#include "common.cuh"
#include "storage.cuh"

namespace roofbench::gpt::cuda {

inline constexpr int kColumnChunkRows = 256;
inline constexpr int kColumnTileCols = 32;
inline constexpr int kColumnRowLanes = 8;

inline int column_chunks(int rows) { return static_cast<int>(ceil_div(rows, kColumnChunkRows)); }
__device__ inline int column_chunks_device(int rows) { return (rows + kColumnChunkRows - 1) / kColumnChunkRows; }

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

// The same partial sums, kWidth adjacent columns per thread (one 16-byte access: 4 fp32 or 8 bf16) and
// kLanes row lanes per block: term(row, col) returns the Floats<kWidth> of columns col .. col + kWidth - 1
// (col a multiple of kWidth; cols must be a multiple of kWidth). Same chunks and partials layout as above,
// the same fixed summation order in every run; a term that also writes (a fused elementwise pass whose
// output is being summed) splits its work into fetch and finish.
template <int kWidth, int kLanes, typename Term>
__global__ void __launch_bounds__(kColumnTileCols* kLanes)
    column_partial_sums_vec_kernel(float* partials, int rows, int cols, Term term) {
  __shared__ Floats<kWidth> lanes[kLanes][kColumnTileCols];
  const int col = blockIdx.x * (kWidth * kColumnTileCols) + kWidth * static_cast<int>(threadIdx.x);
  const int chunk = blockIdx.y;
  const int row_end = min(rows, (chunk + 1) * kColumnChunkRows);
  Floats<kWidth> sum;
#pragma unroll
  for (int i = 0; i < kWidth; ++i) sum.v[i] = 0.0f;
  const auto add = [&sum](const Floats<kWidth>& t) {
#pragma unroll
    for (int i = 0; i < kWidth; ++i) sum.v[i] += t.v[i];
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
    for (int lane = 1; lane < kLanes; ++lane) add(lanes[lane][threadIdx.x]);
    float* out = partials + static_cast<std::size_t>(chunk) * cols + col;
#pragma unroll
    for (int i = 0; i < kWidth; ++i) out[i] = sum.v[i];
  }
}

// Where the second pass puts column c of the sums: part[c / width][c % width] (LayerNorm reduces its weight
// and bias gradients and its dx's column sums, three vectors of C, in one sweep; one vector: width = cols).
struct ColumnOutputs {
  float* part[3];
  int width;
};
// Second pass: the chunks' partials of each column added in a fixed order. Defined in matmul.cu.
void column_finish(ColumnOutputs outputs, const float* partials, int chunks, int cols, cudaStream_t stream);

template <typename Term>
void column_sums(ColumnOutputs outputs, int rows, int cols, Term term, float* partials, cudaStream_t stream) {
  const int chunks = column_chunks(rows);
  const dim3 grid(ceil_div(cols, kColumnTileCols), chunks), block(kColumnTileCols, kColumnRowLanes);
  column_partial_sums_kernel<<<grid, block, 0, stream>>>(partials, rows, cols, term);
  ROOFBENCH_CUDA_LAUNCH();
  column_finish(outputs, partials, chunks, cols, stream);
}

// column_sums with the vector kernel; cols must be a multiple of kWidth and term's loads aligned to them.
template <int kWidth, int kLanes, typename Term>
void column_sums_vec(ColumnOutputs outputs, int rows, int cols, Term term, float* partials, cudaStream_t stream) {
  const int chunks = column_chunks(rows);
  const dim3 grid(ceil_div(cols, kWidth * kColumnTileCols), chunks), block(kColumnTileCols, kLanes);
  column_partial_sums_vec_kernel<kWidth, kLanes><<<grid, block, 0, stream>>>(partials, rows, cols, term);
  ROOFBENCH_CUDA_LAUNCH();
  column_finish(outputs, partials, chunks, cols, stream);
}

}  // namespace roofbench::gpt::cuda
