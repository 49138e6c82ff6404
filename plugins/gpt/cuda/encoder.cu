// The input side: a fresh batch drawn on the device every step, the token embedding and its backward.
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

// One block: the counter is read by every thread before thread 0 advances it, which a single block can
// order with a barrier (a grid could not).
__global__ void draw_batch_kernel(std::uint8_t* inputs, std::uint8_t* targets, const std::uint8_t* corpus,
                                  std::size_t corpus_tokens, int batch, int T, std::uint64_t seed,
                                  unsigned long long* draw_counter) {
  const unsigned long long step = *draw_counter;
  __syncthreads();
  if (threadIdx.x == 0) *draw_counter = step + 1;
  const std::size_t starts = corpus_tokens - static_cast<std::size_t>(T);  // windows of T + 1 tokens
  const int n = batch * T;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int row = i / T, t = i % T;
    const std::uint64_t key = mix64(seed + 0x9e3779b97f4a7c15ull * (step + 1)) ^ (0xd1b54a32d192ed03ull * (row + 1));
    const std::size_t start = mix64(key) % starts;
    inputs[i] = corpus[start + t];
    targets[i] = corpus[start + t + 1];
  }
}

__global__ void embedding_forward_kernel(float* x, const std::uint8_t* tokens, const float* wte, int N, int C) {
  const std::size_t n = static_cast<std::size_t>(N) * C;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = i / C, col = i % C;
    x[i] = wte[static_cast<std::size_t>(tokens[row]) * C + col];
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
  draw_batch_kernel<<<1, 1024, 0, stream>>>(inputs, targets, corpus, corpus_tokens, batch, T, seed, draw_counter);
  ROOFBENCH_CUDA_LAUNCH();
}

void embedding_forward(float* x, const std::uint8_t* tokens, const float* wte, int N, int C, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(N) * C;
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
