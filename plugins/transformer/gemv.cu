#include "gemv.hpp"

#include <cuda_bf16.h>

#include <stdexcept>

#include "roofbench/cuda_check.hpp"

namespace roofbench::transformer {
namespace {

constexpr int kRowsPerBlock = 4;  // a warp per row: 192 blocks for 768 rows, so every SM reads
constexpr int kThreads = 32 * kRowsPerBlock;

// A read-once 16-byte load that is not kept in L1.
__device__ __forceinline__ uint4 load_once(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

__device__ __forceinline__ void unpack8(const uint4& raw, float (&out)[8]) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// kChunks 16-byte pieces of a row per lane (in = 256 kChunks). The row's loads go out first; x is staged in
// shared memory meanwhile (it is read by every row of the block).
template <int kChunks, int kTokens>
__global__ __launch_bounds__(kThreads) void gemv_kernel(const uint4* w, const uint4* x, __nv_bfloat16* y, int out) {
  constexpr int kRowChunks = 32 * kChunks;  // 16-byte pieces per row of W and of x
  __shared__ uint4 xs[kTokens * kRowChunks];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * kRowsPerBlock + warp;
  uint4 raw[kChunks];
  if (row < out) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) raw[c] = load_once(w + std::int64_t(row) * kRowChunks + c * 32 + lane);
  }
  for (int i = threadIdx.x; i < kTokens * kRowChunks; i += kThreads) xs[i] = __ldg(x + i);
  __syncthreads();
  if (row >= out) return;
  float acc[kTokens] = {};
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    float wf[8];
    unpack8(raw[c], wf);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      float xf[8];
      unpack8(xs[t * kRowChunks + c * 32 + lane], xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[t] += wf[i] * xf[i];
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    float s = acc[t];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) y[std::int64_t(t) * out + row] = __float2bfloat16_rn(s);
  }
}

template <int kChunks>
void launch_for_tokens(const uint4* w, const uint4* x, __nv_bfloat16* y, int out, int tokens, cudaStream_t stream) {
  const dim3 grid(unsigned((out + kRowsPerBlock - 1) / kRowsPerBlock));
  switch (tokens) {
    case 1: gemv_kernel<kChunks, 1><<<grid, kThreads, 0, stream>>>(w, x, y, out); break;
    case 2: gemv_kernel<kChunks, 2><<<grid, kThreads, 0, stream>>>(w, x, y, out); break;
    case 4: gemv_kernel<kChunks, 4><<<grid, kThreads, 0, stream>>>(w, x, y, out); break;
    case 8: gemv_kernel<kChunks, 8><<<grid, kThreads, 0, stream>>>(w, x, y, out); break;
    default: throw std::invalid_argument("gemv: tokens must be 1, 2, 4 or 8");
  }
}

}  // namespace

std::string gemv_refusal(std::int64_t in, std::int64_t out, std::int64_t tokens) {
  if (in != 768 && in != 3072) return "the hand GEMV is built for in = 768 or 3072 only";
  if (tokens != 1 && tokens != 2 && tokens != 4 && tokens != 8) return "the hand GEMV takes 1, 2, 4 or 8 tokens";
  if (out < 1 || out > (std::int64_t(1) << 30)) return "the hand GEMV takes 1 to 2^30 output rows";
  return {};
}

void gemv_bf16(const void* w, const void* x, void* y, std::int64_t in, std::int64_t out, std::int64_t tokens,
               cudaStream_t stream) {
  if (const std::string why = gemv_refusal(in, out, tokens); !why.empty()) throw std::invalid_argument(why);
  const auto* wv = static_cast<const uint4*>(w);
  const auto* xv = static_cast<const uint4*>(x);
  auto* yv = static_cast<__nv_bfloat16*>(y);
  if (in == 768) launch_for_tokens<3>(wv, xv, yv, int(out), int(tokens), stream);
  else launch_for_tokens<12>(wv, xv, yv, int(out), int(tokens), stream);
  ROOFBENCH_CUDA(cudaGetLastError());
}

}  // namespace roofbench::transformer
