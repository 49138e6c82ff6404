#include <string>

#include "roofbench/cuda.hpp"
#include "roofbench/kernels/cuda_matmul.hpp"

namespace roofbench::kernels {
namespace {

// Naive: a warp spans 32 consecutive columns, so its reads of B and writes of C are coalesced and its
// reads of A are one broadcast.
constexpr int kNaiveBlockX = 32;
constexpr int kNaiveBlockY = 8;

__global__ void matmul_naive_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                    std::int64_t m, std::int64_t n, std::int64_t k) {
  const std::int64_t col = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t row = std::int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (std::int64_t p = 0; p < k; ++p) acc = fmaf(a[row * k + p], b[p * n + col], acc);
  c[row * n + col] = acc;
}

// Tiled: each block owns a kTile x kTile tile of C and walks k in slabs of kTileK, staging the A and B
// slabs in shared memory so that every global element is read once per block instead of once per thread.
constexpr int kTile = 64;
constexpr int kTileK = 16;
constexpr int kThreadsPerSide = 16;
constexpr int kThreads = kThreadsPerSide * kThreadsPerSide;
constexpr int kOutputsPerSide = kTile / kThreadsPerSide;  // each thread: kOutputsPerSide^2 outputs
static_assert(kTile % kThreadsPerSide == 0);
static_assert((kTile * kTileK) % kThreads == 0);

__global__ void __launch_bounds__(kThreads)
    matmul_tiled_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, std::int64_t m,
                        std::int64_t n, std::int64_t k) {
  // A's slab is stored k-major so the inner loop reads one k-row of it; the extra column staggers the
  // banks of the transposing store (otherwise 16 threads would hit one bank).
  __shared__ float a_slab[kTileK][kTile + 1];
  __shared__ float b_slab[kTileK][kTile];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int thread = ty * kThreadsPerSide + tx;
  const std::int64_t row0 = std::int64_t(blockIdx.y) * kTile;
  const std::int64_t col0 = std::int64_t(blockIdx.x) * kTile;

  // Thread (ty, tx) owns rows ty + 16i and columns tx + 16j: strided ownership keeps a warp's shared
  // reads of B on distinct banks and its stores to C coalesced.
  float acc[kOutputsPerSide][kOutputsPerSide] = {};

  for (std::int64_t k0 = 0; k0 < k; k0 += kTileK) {
#pragma unroll
    for (int load = 0; load < kTile * kTileK / kThreads; ++load) {
      const int index = thread + load * kThreads;
      // Consecutive threads take consecutive k of one A row and consecutive columns of one B row.
      const int a_row = index / kTileK, a_k = index % kTileK;
      const std::int64_t global_a_row = row0 + a_row, global_a_k = k0 + a_k;
      a_slab[a_k][a_row] = (global_a_row < m && global_a_k < k) ? a[global_a_row * k + global_a_k] : 0.0f;
      const int b_k = index / kTile, b_col = index % kTile;
      const std::int64_t global_b_k = k0 + b_k, global_b_col = col0 + b_col;
      b_slab[b_k][b_col] = (global_b_k < k && global_b_col < n) ? b[global_b_k * n + global_b_col] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kTileK; ++p) {
      float a_values[kOutputsPerSide], b_values[kOutputsPerSide];
#pragma unroll
      for (int i = 0; i < kOutputsPerSide; ++i) a_values[i] = a_slab[p][ty + i * kThreadsPerSide];
#pragma unroll
      for (int j = 0; j < kOutputsPerSide; ++j) b_values[j] = b_slab[p][tx + j * kThreadsPerSide];
#pragma unroll
      for (int i = 0; i < kOutputsPerSide; ++i)
#pragma unroll
        for (int j = 0; j < kOutputsPerSide; ++j) acc[i][j] = fmaf(a_values[i], b_values[j], acc[i][j]);
    }
    __syncthreads();  // the next slab overwrites what other threads may still be reading
  }

#pragma unroll
  for (int i = 0; i < kOutputsPerSide; ++i) {
    const std::int64_t row = row0 + ty + i * kThreadsPerSide;
    if (row >= m) continue;
#pragma unroll
    for (int j = 0; j < kOutputsPerSide; ++j) {
      const std::int64_t col = col0 + tx + j * kThreadsPerSide;
      if (col < n) c[row * n + col] = acc[i][j];
    }
  }
}

// Columns map onto gridDim.x and rows onto gridDim.y, whose limits differ.
constexpr std::int64_t kMaxGridX = 2147483647;
constexpr std::int64_t kMaxGridY = 65535;

unsigned blocks_for(std::int64_t extent, int per_block, std::int64_t limit, const char* what) {
  const std::int64_t blocks = (extent + per_block - 1) / per_block;
  if (blocks > limit)
    throw Error(std::string("cuda_matmul: ") + what + " = " + std::to_string(extent) + " needs " +
                std::to_string(blocks) + " blocks along one grid dimension, which holds " + std::to_string(limit));
  return static_cast<unsigned>(blocks);
}

void check_shape(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m < 0 || n < 0 || k < 0)
    throw Error("cuda_matmul: negative shape " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
}

}  // namespace

void launch_matmul_naive_fp32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
                              cudaStream_t stream) {
  check_shape(m, n, k);
  if (m == 0 || n == 0) return;  // a zero-sized grid is a launch error, and there is nothing to write
  const dim3 block(kNaiveBlockX, kNaiveBlockY);
  const dim3 grid(blocks_for(n, kNaiveBlockX, kMaxGridX, "n"), blocks_for(m, kNaiveBlockY, kMaxGridY, "m"));
  matmul_naive_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  ROOFBENCH_CUDA_LAUNCH();
}

void launch_matmul_tiled_fp32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
                              cudaStream_t stream) {
  check_shape(m, n, k);
  if (m == 0 || n == 0) return;
  const dim3 block(kThreadsPerSide, kThreadsPerSide);
  const dim3 grid(blocks_for(n, kTile, kMaxGridX, "n"), blocks_for(m, kTile, kMaxGridY, "m"));
  matmul_tiled_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::kernels
