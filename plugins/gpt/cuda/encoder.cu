// The input side: a fresh batch drawn on the device every step, the token embedding and its backward.
#include <cstdint>

#include "column_reduce.cuh"
#include "common.cuh"
#include "layers.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda {
namespace {

// splitmix64's finaliser: a counter-based generator, so a window start is a pure function of
// (seed, step, row) and needs no generator state beyond the step counter.
__device__ inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A block a window (row): every thread hashes the row's start from (seed, *draw_counter, row) and copies its
// tokens. The counter is advanced by advance_draw_counter, launched after on the same stream, so every block
// of the draw reads the same step; one block hashing each token's start took 66 us a step on an H200 at batch 512.
__global__ void draw_batch_kernel(std::uint8_t* inputs, std::uint8_t* targets, const std::uint8_t* corpus,
                                  std::size_t corpus_tokens, int T, std::uint64_t seed,
                                  const unsigned long long* draw_counter) {
  const unsigned long long step = *draw_counter;
  const int row = static_cast<int>(blockIdx.x);
  const std::size_t starts = corpus_tokens - static_cast<std::size_t>(T);  // windows of T + 1 tokens
  const std::uint64_t key = mix64(seed + 0x9e3779b97f4a7c15ull * (step + 1)) ^ (0xd1b54a32d192ed03ull * (row + 1));
  const std::uint8_t* window = corpus + mix64(key) % starts;
  const std::size_t first = static_cast<std::size_t>(row) * T;
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    inputs[first + t] = window[t];
    targets[first + t] = window[t + 1];
  }
}

__global__ void advance_draw_counter(unsigned long long* draw_counter) { *draw_counter += 1; }

// x[n, :] = wte[tokens[n], :], a Piece of `width` per row (float4 where C is a multiple of 4, else float).
template <typename Piece>
__global__ void embedding_forward_kernel(Piece* x, const std::uint8_t* tokens, const Piece* wte, int N, int width) {
  const std::size_t n = static_cast<std::size_t>(N) * width;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = i / width, col = i % width;
    x[i] = wte[static_cast<std::size_t>(tokens[row]) * width + col];
  }
}

__global__ void one_hot_kernel(float* onehot, const std::uint8_t* tokens, int N, int V) {
  const std::size_t n = static_cast<std::size_t>(N) * V;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    onehot[i] = tokens[i / V] == static_cast<int>(i % V) ? 1.0f : 0.0f;
}

// The gathered embedding backward: a block takes kEmbeddingChunkRows rows and kEmbeddingGroupPieces pieces of 4
// columns (a thread each), so its sums are V x 1 KB of shared memory.
inline constexpr int kEmbeddingChunkRows = 256;
inline constexpr int kEmbeddingGroupPieces = 64;
inline constexpr int kEmbeddingRowsInFlight = 8;  // rows whose loads a thread issues before it adds them
inline constexpr std::size_t kSharedBytesWithoutOptIn = 48 * 1024;

int embedding_chunks(int N) { return static_cast<int>(ceil_div(N, kEmbeddingChunkRows)); }

__device__ inline void add_to(float4& sum, const float4& x) {
  sum.x += x.x;
  sum.y += x.y;
  sum.z += x.z;
  sum.w += x.w;
}

// Block (chunk, group): rows [chunk R, chunk R + R) of dx, pieces [group G, group G + G) of each row, each row added
// into its token's row of sums (a thread's own slot of each), then sums[v][piece] to partials[chunk][v][piece].
__global__ void __launch_bounds__(kEmbeddingGroupPieces)
    embedding_partials_kernel(float4* partials, const float4* dx, const std::uint8_t* tokens, int N, int width,
                              int V) {
  extern __shared__ float4 sums[];  // [V][kEmbeddingGroupPieces]
  const int slot = static_cast<int>(threadIdx.x);
  const int piece = static_cast<int>(blockIdx.y) * kEmbeddingGroupPieces + slot;
  for (int v = 0; v < V; ++v) sums[v * kEmbeddingGroupPieces + slot] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int begin = static_cast<int>(blockIdx.x) * kEmbeddingChunkRows;
  const int end = min(N, begin + kEmbeddingChunkRows);
  if (piece >= width) return;
  int row = begin;
  for (; row + kEmbeddingRowsInFlight <= end; row += kEmbeddingRowsInFlight) {
    float4 x[kEmbeddingRowsInFlight];
    int token[kEmbeddingRowsInFlight];
#pragma unroll
    for (int i = 0; i < kEmbeddingRowsInFlight; ++i) {
      x[i] = dx[static_cast<std::size_t>(row + i) * width + piece];
      token[i] = tokens[row + i];
    }
#pragma unroll
    for (int i = 0; i < kEmbeddingRowsInFlight; ++i) add_to(sums[token[i] * kEmbeddingGroupPieces + slot], x[i]);
  }
  for (; row < end; ++row)
    add_to(sums[tokens[row] * kEmbeddingGroupPieces + slot], dx[static_cast<std::size_t>(row) * width + piece]);
  float4* out = partials + static_cast<std::size_t>(blockIdx.x) * V * width + piece;
  for (int v = 0; v < V; ++v) out[static_cast<std::size_t>(v) * width] = sums[v * kEmbeddingGroupPieces + slot];
}

}  // namespace

void draw_batch(std::uint8_t* inputs, std::uint8_t* targets, const std::uint8_t* corpus, std::size_t corpus_tokens,
                int batch, int T, std::uint64_t seed, unsigned long long* draw_counter, cudaStream_t stream) {
  if (corpus_tokens <= static_cast<std::size_t>(T)) throw Error("gpt: the corpus is shorter than one window");
  if (batch < 1) throw Error("gpt: a batch draws at least one window");
  draw_batch_kernel<<<batch, 128, 0, stream>>>(inputs, targets, corpus, corpus_tokens, T, seed, draw_counter);
  ROOFBENCH_CUDA_LAUNCH();
  advance_draw_counter<<<1, 1, 0, stream>>>(draw_counter);
  ROOFBENCH_CUDA_LAUNCH();
}

void embedding_forward(float* x, const std::uint8_t* tokens, const float* wte, int N, int C, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(N) * C;
  if (C % 4 == 0 && aligned16(x) && aligned16(wte))  // rows of 16-byte pieces
    embedding_forward_kernel<<<elementwise_blocks(n / 4), kElementwiseThreads, 0, stream>>>(
        reinterpret_cast<float4*>(x), tokens, reinterpret_cast<const float4*>(wte), N, C / 4);
  else
    embedding_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, tokens, wte, N, C);
  ROOFBENCH_CUDA_LAUNCH();
}

void embedding_backward(cublasHandle_t handle, float* dwte, const float* dx, const std::uint8_t* tokens,
                        float* onehot, int N, int C, int V, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(N) * V;
  one_hot_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(onehot, tokens, N, V);
  ROOFBENCH_CUDA_LAUNCH();
  RowMajorGemm g;  // dwte[V, C] += onehot[N, V]^T dx[N, C]
  g.trans_a = true;
  g.M = V, g.N = C, g.K = N;
  g.A = onehot, g.lda = V;
  g.B = dx, g.ldb = C;
  g.C = dwte, g.ldc = C;
  g.beta = 1;
  g.tf32 = false;  // a scatter-add in disguise: keep the fp32 sums exact like PyTorch's embedding backward
  gemm(handle, g);
}

bool embedding_gather_fits(int C, int V) {
  return C >= 4 && C % 4 == 0 && V >= 1 &&
         static_cast<std::size_t>(V) * kEmbeddingGroupPieces * sizeof(float4) <= kSharedBytesWithoutOptIn;
}

std::size_t embedding_gather_partials_floats(int N, int C, int V) {
  return static_cast<std::size_t>(embedding_chunks(N) + 1) * static_cast<std::size_t>(V) * C;
}

void embedding_backward_gather(float* dwte, const float* dx, const std::uint8_t* tokens, float* partials, int N,
                               int C, int V, cudaStream_t stream) {
  if (N < 1 || !embedding_gather_fits(C, V))
    throw Error("gpt: the gathered embedding backward takes rows, C a multiple of 4 and V sums rows a block holds");
  if (!aligned16(dwte) || !aligned16(dx) || !aligned16(partials))
    throw Error("gpt: the gathered embedding backward needs dwte, dx and partials 16-byte aligned");
  // Row 0 of the partials is dwte as it stands (the head's share); the chunks' sums follow, and column_finish adds
  // all of them into dwte in its fixed order.
  const std::size_t table = static_cast<std::size_t>(V) * C;
  ROOFBENCH_CUDA(cudaMemcpyAsync(partials, dwte, table * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  const int width = C / 4, chunks = embedding_chunks(N);
  const dim3 grid(chunks, ceil_div(width, kEmbeddingGroupPieces));
  const std::size_t sums_bytes = static_cast<std::size_t>(V) * kEmbeddingGroupPieces * sizeof(float4);
  embedding_partials_kernel<<<grid, kEmbeddingGroupPieces, sums_bytes, stream>>>(
      reinterpret_cast<float4*>(partials + table), reinterpret_cast<const float4*>(dx), tokens, N, width, V);
  ROOFBENCH_CUDA_LAUNCH();
  column_finish(ColumnOutputs{{dwte}, static_cast<int>(table)}, partials, chunks + 1, static_cast<int>(table), stream);
}

}  // namespace roofbench::gpt::cuda
