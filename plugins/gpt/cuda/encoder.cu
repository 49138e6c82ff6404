// The input side: a fresh batch drawn on the device every step, the token embedding and its backward.
#include <cstdint>

#include "common.cuh"
#include "layers.hpp"

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
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (C % 4 == 0 && aligned(x) && aligned(wte))  // rows of 16-byte pieces
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

}  // namespace roofbench::gpt::cuda
