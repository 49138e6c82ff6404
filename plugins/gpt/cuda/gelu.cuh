// The GELU passes' kernels that the training library's keepers (elementwise.cu) and the kernel lab's
// versions (plugins/gpt/lab/elementwise_versions.cu) share: exact GELU and its derivative, the fused GELU
// backward term of the 16-byte column sums, the 16-byte GELU forward, and the bf16 passes through tables of
// every bf16 value's GELU and GELU' (with fc's bias added inside, R2-R4's, or without, the lab's v3). Each
// file instantiates what it launches. In an unnamed namespace as each kernel file's own helpers are.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <numeric>

#include "bf16_table.hpp"
#include "column_reduce.cuh"
#include "common.cuh"
#include "layers.hpp"
#include "roofbench/plugin.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda {
namespace {

// Exact GELU, z Phi(z), as model.hpp defines it (not the tanh approximation).
__device__ inline float gelu(float z) { return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f)); }
__device__ inline float gelu_derivative(float z) {
  const float cdf = 0.5f * (1.0f + erff(z * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * z * z);
  return cdf + z * pdf;
}

// dz = dout * GELU'(z), written kWidth columns at a time (one 16-byte access: 4 fp32 or 8 bf16), and
// returned (fp32, before any rounding) for the bias gradient's column sums.
template <typename T>
struct GeluBackwardTerm {
  static constexpr int kWidth = kPer16Bytes<T>;
  T* dz;
  const T* dout;
  const T* z;
  int cols;
  struct Fetched {
    Floats<kWidth> g, x;
  };
  __device__ std::size_t at(int row, int col) const { return static_cast<std::size_t>(row) * cols + col; }
  __device__ Fetched fetch(int row, int col) const {
    return Fetched{load_floats<kWidth>(dout + at(row, col)), load_floats<kWidth>(z + at(row, col))};
  }
  __device__ Floats<kWidth> finish(int row, int col, const Fetched& f) const {
    Floats<kWidth> d;
#pragma unroll
    for (int i = 0; i < kWidth; ++i) d.v[i] = f.g.v[i] * gelu_derivative(f.x.v[i]);
    store_floats(dz + at(row, col), d);
    return d;
  }
};

// out = GELU(z) on a pre-activation whose bias the fc GEMM's epilogue already added (linear_forward_bias):
// z read, out written, 16 bytes a vector, two vectors' loads in flight per thread before either store; the
// tail past the last whole vector by the first threads.
template <typename T>
__global__ void gelu_forward_vec_kernel(T* __restrict__ out, const T* __restrict__ z, std::size_t n) {
  constexpr int kWidth = kPer16Bytes<T>;
  const std::size_t vectors = n / kWidth, stride = std::size_t{gridDim.x} * blockDim.x;
  const auto apply = [](Floats<kWidth>& f) {
#pragma unroll
    for (int i = 0; i < kWidth; ++i) f.v[i] = gelu(f.v[i]);
  };
  std::size_t q = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (; q + stride < vectors; q += 2 * stride) {
    Floats<kWidth> a = load_floats<kWidth>(z + kWidth * q), b = load_floats<kWidth>(z + kWidth * (q + stride));
    apply(a);
    apply(b);
    store_floats(out + kWidth * q, a);
    store_floats(out + kWidth * (q + stride), b);
  }
  if (q < vectors) {
    Floats<kWidth> a = load_floats<kWidth>(z + kWidth * q);
    apply(a);
    store_floats(out + kWidth * q, a);
  }
  const std::size_t tail = kWidth * vectors + blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (tail < n) out[tail] = from_float<T>(gelu(to_float(z[tail])));
}

template <typename T>
void launch_gelu_forward_vec(T* out, const T* z, std::size_t n, cudaStream_t stream) {
  if (!aligned16(out) || !aligned16(z)) throw Error("gpt: the vectorized GELU forward needs 16-byte aligned buffers");
  gelu_forward_vec_kernel<T><<<elementwise_blocks(n / kPer16Bytes<T> + 1), kElementwiseThreads, 0, stream>>>(out, z, n);
  ROOFBENCH_CUDA_LAUNCH();
}

// ---- bf16 GELU through tables (bf16_table.hpp): R2's pre-activation is bf16, so GELU and GELU' of every
// covered value are computed once per block into shared memory, the same fp32 arithmetic as in place (the
// same bits), and each element is a lookup; erff and expf per element made these passes issue-bound
// (Nsight Compute at b512: 76% of issue slots, 3.2 TB/s) where they only need to move their bytes.

__device__ inline float bf16_table_value(int slot) {
  return __bfloat162float(__ushort_as_bfloat16(bf16_of_table_slot(slot)));
}

// Fills table[slot] = f(value of slot) with the block's threads; the caller synchronises.
template <typename T, typename F>
__device__ inline void fill_bf16_table(T* table, F f) {
  for (int slot = static_cast<int>(threadIdx.x + blockDim.x * threadIdx.y); slot < kBf16TableSize;
       slot += static_cast<int>(blockDim.x * blockDim.y))
    table[slot] = f(bf16_table_value(slot));
}

// A 16-byte vector of 8 bf16 values plus its 8 columns' biases, four bf16x2 additions (add.bf16x2, round to
// nearest even: the exact sum rounded to bf16 once, which for two bf16 operands is also what the fp32 sum rounded to bf16 gives,
// as a separate bias add computes it).
struct ColumnBias8 {
  __nv_bfloat162 pairs[4];
  __device__ static ColumnBias8 load(const bf16* bias) {  // bias[0..8): any 2-byte alignment
    ColumnBias8 b;
#pragma unroll
    for (int i = 0; i < 4; ++i) b.pairs[i] = __halves2bfloat162(bias[2 * i], bias[2 * i + 1]);
    return b;
  }
  __device__ void add_to(uint4& raw) const {
    __nv_bfloat162* v = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = __hadd2(v[i], pairs[i]);
  }
};

// out = GELU(z) in bf16, 8 elements (16 bytes) a vector; the table holds the bf16 bits of every GELU.
// kAddBias: z is the fc GEMM's x w^T without its bias, and GELU takes bf16(z + bias[col]) (cols = 8
// col_vectors); the launch makes the grid's stride a multiple of col_vectors, so that each thread's vectors
// all fall in the same 8 columns and it loads their biases once.
template <bool kAddBias>
__global__ void __launch_bounds__(kElementwiseThreads)
    gelu_forward_bf16_table_kernel(bf16* __restrict__ out, const bf16* __restrict__ z, std::size_t n,
                                   const bf16* __restrict__ bias, unsigned col_vectors) {
  __shared__ unsigned short table[kBf16TableSize];
  fill_bf16_table(table, [](float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(gelu(x))); });
  __syncthreads();
  [[maybe_unused]] ColumnBias8 column_bias;
  if constexpr (kAddBias)
    column_bias = ColumnBias8::load(bias + 8 * ((blockIdx.x * blockDim.x + threadIdx.x) % col_vectors));
  const auto apply = [&](uint4& raw) {
    if constexpr (kAddBias) column_bias.add_to(raw);
    unsigned short* e = reinterpret_cast<unsigned short*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int slot = bf16_table_slot(e[i]);
      e[i] = slot >= 0 ? table[slot]
                       : __bfloat16_as_ushort(__float2bfloat16_rn(gelu(__bfloat162float(__ushort_as_bfloat16(e[i])))));
    }
  };
  const std::size_t vectors = n / 8, stride = std::size_t{gridDim.x} * blockDim.x;
  const uint4* in = reinterpret_cast<const uint4*>(z);
  uint4* to = reinterpret_cast<uint4*>(out);
  std::size_t q = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (; q + stride < vectors; q += 2 * stride) {
    uint4 a = in[q], b = in[q + stride];
    apply(a);
    apply(b);
    to[q] = a;
    to[q + stride] = b;
  }
  if (q < vectors) {
    uint4 a = in[q];
    apply(a);
    to[q] = a;
  }
  // No tail with a bias: its rows are whole vectors.
  const std::size_t tail = 8 * vectors + blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (!kAddBias && tail < n) out[tail] = __float2bfloat16_rn(gelu(__bfloat162float(z[tail])));
}

// gelu_backward_bias_grad on bf16 with GELU' from the table: column_partial_sums_vec_kernel's chunks,
// partials and summation order (8 columns a thread, kLanes row lanes, kFetchRows rows' loads ahead), each
// block taking chunks blockIdx.y, blockIdx.y + gridDim.y, ... so the table is built once for several.
// kAddBias: z is x w^T without fc's bias, and GELU' takes bf16(z + bias[col]), as the forward's GELU did.
// At least four blocks per SM (64 registers a thread at 8 lanes, 24 bytes spilled with the bias): R3's grid,
// 8 column tiles x 64 block rows, then fits in one wave of 132 SMs; the bias's registers had taken the kernel
// to 76 and three blocks per SM, two waves. On the H200, inside R3: 227 us a launch against 289; at the
// 700 W limit the faster pass mostly buys a lower clock rather than a shorter step.
// dz may be dout (R4 runs it in place): each element is loaded once, by the thread whose store of that element
// depends on the load, and no thread loads what another stores, so no reordering the restrict qualifiers
// allow can read a stored value.
template <int kLanes, bool kAddBias>
__global__ void __launch_bounds__(kColumnTileCols* kLanes, 4)
    gelu_backward_bias_grad_bf16_table_kernel(float* partials, int rows, int cols, bf16* __restrict__ dz,
                                              const bf16* __restrict__ dout, const bf16* __restrict__ z,
                                              const bf16* __restrict__ bias) {
  constexpr int kWidth = 8, kFetchRows = 4;
  __shared__ float table[kBf16TableSize];
  __shared__ Floats<kWidth> lanes[kLanes][kColumnTileCols];
  fill_bf16_table(table, [](float x) { return gelu_derivative(x); });
  __syncthreads();
  const int col = blockIdx.x * (kWidth * kColumnTileCols) + kWidth * static_cast<int>(threadIdx.x);
  const int chunks = column_chunks_device(rows);
  const auto at = [cols](int row, int c) { return static_cast<std::size_t>(row) * cols + c; };
  [[maybe_unused]] ColumnBias8 column_bias;
  if constexpr (kAddBias)
    if (col < cols) column_bias = ColumnBias8::load(bias + col);
  for (int chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    Floats<kWidth> sum;
#pragma unroll
    for (int i = 0; i < kWidth; ++i) sum.v[i] = 0.0f;
    const auto finish = [&](int row, const uint4& g_raw, uint4 z_raw) {
      if constexpr (kAddBias) column_bias.add_to(z_raw);
      const unsigned short* g = reinterpret_cast<const unsigned short*>(&g_raw);
      const unsigned short* x = reinterpret_cast<const unsigned short*>(&z_raw);
      Floats<kWidth> d;
#pragma unroll
      for (int i = 0; i < kWidth; ++i) {
        const int slot = bf16_table_slot(x[i]);
        const float derivative =
            slot >= 0 ? table[slot] : gelu_derivative(__bfloat162float(__ushort_as_bfloat16(x[i])));
        d.v[i] = __bfloat162float(__ushort_as_bfloat16(g[i])) * derivative;
        sum.v[i] += d.v[i];
      }
      store_floats(dz + at(row, col), d);
    };
    if (col < cols) {
      const int row_end = min(rows, (chunk + 1) * kColumnChunkRows);
      int row = chunk * kColumnChunkRows + static_cast<int>(threadIdx.y);
      for (; row + (kFetchRows - 1) * kLanes < row_end; row += kFetchRows * kLanes) {
        uint4 g[kFetchRows], x[kFetchRows];
#pragma unroll
        for (int u = 0; u < kFetchRows; ++u) {
          g[u] = *reinterpret_cast<const uint4*>(dout + at(row + u * kLanes, col));
          x[u] = *reinterpret_cast<const uint4*>(z + at(row + u * kLanes, col));
        }
#pragma unroll
        for (int u = 0; u < kFetchRows; ++u) finish(row + u * kLanes, g[u], x[u]);
      }
      for (; row < row_end; row += kLanes)
        finish(row, *reinterpret_cast<const uint4*>(dout + at(row, col)), *reinterpret_cast<const uint4*>(z + at(row, col)));
    }
    lanes[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
      for (int lane = 1; lane < kLanes; ++lane)
#pragma unroll
        for (int i = 0; i < kWidth; ++i) sum.v[i] += lanes[lane][threadIdx.x].v[i];
      float* out = partials + static_cast<std::size_t>(chunk) * cols + col;
#pragma unroll
      for (int i = 0; i < kWidth; ++i) out[i] = sum.v[i];
    }
    __syncthreads();  // lanes is reused by the next chunk
  }
}

// kAddBias: bias holds fc's bias (else null), added to z as gelu_backward_bias_grad_bf16_table_kernel says.
template <bool kAddBias>
void launch_gelu_backward_bias_grad_table(bf16* dz, float* dbias, const bf16* dout, const bf16* z, const bf16* bias,
                                          int rows, int cols, float* partials, cudaStream_t stream) {
  // Up to 64 block rows, each taking every 64th chunk: at b512 (256 chunks, 8 column tiles) 512 blocks of
  // 4 chunks, about four per SM, the table built once per 1024 rows.
  constexpr int kLanes = 8, kMaxBlockRows = 64;
  const int chunks = column_chunks(rows);
  const dim3 grid(ceil_div(cols, 8 * kColumnTileCols), std::min(chunks, kMaxBlockRows)), block(kColumnTileCols, kLanes);
  gelu_backward_bias_grad_bf16_table_kernel<kLanes, kAddBias>
      <<<grid, block, 0, stream>>>(partials, rows, cols, dz, dout, z, bias);
  ROOFBENCH_CUDA_LAUNCH();
  column_finish(ColumnOutputs{{dbias}, cols}, partials, chunks, cols, stream);
}

// The table is built once per block: as many blocks as the GPU holds at once (one wave), striding over the
// data, rather than one block per 2048 elements.
template <bool kAddBias>
void launch_gelu_forward_table(bf16* out, const bf16* z, std::size_t n, const bf16* bias, int cols,
                               cudaStream_t stream) {
  int device = 0, sms = 0, per_sm = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gelu_forward_bf16_table_kernel<kAddBias>,
                                                               kElementwiseThreads, 0));
  unsigned blocks = std::min(static_cast<unsigned>(std::max(1, sms * per_sm)), elementwise_blocks(n / 8 + 1));
  const unsigned col_vectors = static_cast<unsigned>(cols / 8);
  if (kAddBias) {  // the grid's stride in vectors, blocks * kElementwiseThreads, a multiple of col_vectors
    const unsigned step = col_vectors / std::gcd(col_vectors, static_cast<unsigned>(kElementwiseThreads));
    blocks = std::max(step, blocks / step * step);
  }
  gelu_forward_bf16_table_kernel<kAddBias>
      <<<blocks, kElementwiseThreads, 0, stream>>>(out, z, n, bias, col_vectors);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace
}  // namespace roofbench::gpt::cuda
