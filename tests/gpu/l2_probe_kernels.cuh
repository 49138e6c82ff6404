// What the L2 probes (l2_clean_probe.cu, counters_probe.cu) share: the error check, the launch shape and the
// kernels that read, copy and write a buffer, each a grid-stride loop over 16-byte words.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace roofbench::l2_probe {

inline void check(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", call, cudaGetErrorString(status));
  std::exit(1);
}
#define L2_PROBE_CHECK(call) ::roofbench::l2_probe::check((call), #call)

constexpr int kBlocks = 1024, kThreads = 256;

__device__ inline std::size_t first_index() { return blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; }
__device__ inline std::size_t stride() { return std::size_t(gridDim.x) * blockDim.x; }

// Reads every 16-byte word; writes only should their XOR be one value (which keeps the reads). A read sweep
// over four times the L2 is the counters pass's clean (Timer::clean_caches).
__device__ inline void read_words(const uint4* data, std::size_t words, unsigned* sink) {
  unsigned x = 0;
  for (std::size_t i = first_index(); i < words; i += stride()) x ^= data[i].x ^ data[i].y ^ data[i].z ^ data[i].w;
  if (x == 0x9e3779b9u) *sink = x;
}

// out[i] from in[3i .. 3i+2]: reads three words for each it writes.
__device__ inline void copy_words(const uint4* in, uint4* out, std::size_t out_words) {
  for (std::size_t i = first_index(); i < out_words; i += stride()) {
    const uint4 a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2];
    out[i] = make_uint4(a.x ^ b.x ^ c.x, a.y ^ b.y ^ c.y, a.z ^ b.z ^ c.z, a.w ^ b.w ^ c.w);
  }
}

__device__ inline void write_words(uint4* data, std::size_t words) {
  for (std::size_t i = first_index(); i < words; i += stride()) data[i] = make_uint4(unsigned(i), 1, 2, 3);
}

}  // namespace roofbench::l2_probe
