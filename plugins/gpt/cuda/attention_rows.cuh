// The row movement of the bf16 mma.sync attention kernels that fetch rows by cp.async (v9, the bf16
// keeper's forward and its backward off sm_90a, attention_v9.cu; the lab's v7 backward,
// plugins/gpt/lab/attention_v7.cu): rows into shared memory, the bias and RoPE applied in place, a warp's
// finished 16 x 64 block staged and stored as 128-byte rows, and delta. Device code only, in an unnamed
// namespace as each kernel file's own helpers are.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "attention_common.cuh"
#include "attention_mma.cuh"
#include "common.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

using bf16 = __nv_bfloat16;
using namespace mma;

inline constexpr int kPairs = kHeadDim / 2;

// Rows 0 .. kMaxT-1 of one head's part of qkv (0, 1, 2 = q, k, v) or of an [N, C] tensor (part < 0) into
// shared memory [kMaxT][kRowStride], raw, by cp.async (complete at the thread's next cp_async_wait; each
// thread copies the chunks it prepares later); rows from T on are zeroed, so padding adds nothing.
__device__ void fetch_rows_async(bf16* dst, const bf16* src, const HeadRows& at, int part) {
#pragma unroll
  for (int it = 0; it < kChunksPerThread; ++it) {
    const int r = chunk_row(it), c = chunk_column(it);
    bf16* to = dst + r * kRowStride + c;
    if (r < at.T)
      cp_async16(to, src + (part < 0 ? at.rows_at(r) : at.qkv_at(r, part)) + c);
    else
      *reinterpret_cast<uint4*>(to) = make_uint4(0, 0, 0, 0);
  }
}

// x + bias, (x0, x1) rotated by (cos, sin) when given, rounded to bf16, on the eight elements of one 16-byte
// chunk (four RoPE pairs).
__device__ inline uint4 prepare_chunk(uint4 raw, const float (&bias)[kChunk], const float* cos, const float* sin) {
  unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = widen_bf16_pair(w[i]);
    float x0 = x.x + bias[2 * i], x1 = x.y + bias[2 * i + 1];
    if (cos != nullptr) {
      const float2 g = rotate(x0, x1, cos[i], sin[i]);
      x0 = g.x;
      x1 = g.y;
    }
    w[i] = pack_bf16(x0, x1);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// to[0 .. 3] from a 16-byte aligned `from` by one read-only load.
__device__ __forceinline__ void load_float4(float* to, const float* from) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(from));
  to[0] = v.x, to[1] = v.y, to[2] = v.z, to[3] = v.w;
}

// A thread's bias (q, k, v) for its chunk column c (an element index, a multiple of kChunk) and the RoPE
// factors of its rows row_of(it), it < kRows (a padding row's as row 0's: it is not prepared). kFloat4: by
// 16-byte loads (the host checks the bias and the tables 16-byte aligned; C and c/2 are multiples of 4), else
// one float at a time.
template <bool kFloat4, int kRows, typename RowOf>
__device__ __forceinline__ void load_bias_and_factors(float (&bias)[3][kChunk], float (&cos)[kRows][4],
                                                      float (&sin)[kRows][4], const float* qkv_bias, RopeTable rope,
                                                      const HeadRows& at, int c, RowOf row_of) {
#pragma unroll
  for (int part = 0; part < 3; ++part) {
    const float* from = qkv_bias + part * at.C + at.h * kHeadDim + c;
    if constexpr (kFloat4) {
      load_float4(bias[part], from);
      load_float4(bias[part] + 4, from + 4);
    } else {
#pragma unroll
      for (int e = 0; e < kChunk; ++e) bias[part][e] = __ldg(from + e);
    }
  }
#pragma unroll
  for (int it = 0; it < kRows; ++it) {
    const int r = row_of(it) < at.T ? row_of(it) : 0;
    if constexpr (kFloat4) {
      load_float4(cos[it], rope.cos + r * kPairs + c / 2);
      load_float4(sin[it], rope.sin + r * kPairs + c / 2);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        cos[it][e] = __ldg(rope.cos + r * kPairs + c / 2 + e);
        sin[it][e] = __ldg(rope.sin + r * kPairs + c / 2 + e);
      }
    }
  }
}

// The bias and RoPE factors of this thread's chunks (one column, kChunksPerThread rows), fetched 16 bytes
// at a time while the rows are still in flight; apply() prepares the landed rows in place.
struct HeadPreparation {
  float bias[3][kChunk];
  float cos[kChunksPerThread][4], sin[kChunksPerThread][4];

  __device__ void load(const float* qkv_bias, RopeTable rope, const HeadRows& at) {
    load_bias_and_factors<true>(bias, cos, sin, qkv_bias, rope, at, chunk_column(0), chunk_row);
  }

  // After this thread's cp_async_wait: its own chunks of q, k, v, bias added and q, k rotated.
  __device__ void apply(bf16* q, bf16* k, bf16* v, const HeadRows& at) const {
    const int c = chunk_column(0);
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      const int r = chunk_row(it);
      if (r >= at.T) continue;
      uint4* pq = reinterpret_cast<uint4*>(q + r * kRowStride + c);
      uint4* pk = reinterpret_cast<uint4*>(k + r * kRowStride + c);
      uint4* pv = reinterpret_cast<uint4*>(v + r * kRowStride + c);
      *pq = prepare_chunk(*pq, bias[0], cos[it], sin[it]);
      *pk = prepare_chunk(*pk, bias[1], cos[it], sin[it]);
      *pv = prepare_chunk(*pv, bias[2], nullptr, nullptr);
    }
  }
};

// Where a warp stages a finished 16 x 64 block: element (r, c) at at(r, c), 16-byte aligned for c a multiple
// of 8, eight consecutive elements from there contiguous.
//   RowStage: 16 rows of a [kMaxT][kRowStride] buffer that only this warp still reads (attention_v9.cu has
//     the other, DsColumnStage).
struct RowStage {
  bf16* rows;
  __device__ bf16* at(int r, int c) const { return rows + r * kRowStride + c; }
};

// The factors that rotate a 16 x 64 accumulator block (rows row0 + lane/4 and + 8) back to the raw qkv's frame:
// this lane's pairs of both rows (pairs lane % 4, + 4, .. + 28), fetched by the read-only path (a padding row's as
// row 0's: it is not stored). kLaneOrdered: from RopeTable's lane-ordered copy, where those 8 cos and 8 sin lie
// side by side, in four 16-byte loads a row instead of sixteen 4-byte ones.
struct RopeBackFactors {
  float cos[2][kHeadDim / 8], sin[2][kHeadDim / 8];

  template <bool kLaneOrdered = false>
  __device__ void load(RopeTable rope, int row0, int T, int lane) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = row0 + lane / 4 + 8 * half, row = t < T ? t : 0;
      if constexpr (kLaneOrdered) {
        static_assert(kHeadDim / 8 == 8, "a lane's 8 cos, then its 8 sin, as two float4 each");
        const float4* at = reinterpret_cast<const float4*>(rope.lane_ordered + rope_lane_ordered_at(row, lane % 4));
        const float4 c0 = __ldg(at), c1 = __ldg(at + 1), s0 = __ldg(at + 2), s1 = __ldg(at + 3);
        const float cs[2][8] = {{c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w},
                                {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w}};
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n) {
          cos[half][n] = cs[0][n];
          sin[half][n] = cs[1][n];
        }
      } else {
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n) {
          const int pair = (8 * n + 2 * (lane % 4)) / 2;
          cos[half][n] = __ldg(rope.cos + row * kPairs + pair);
          sin[half][n] = __ldg(rope.sin + row * kPairs + pair);
        }
      }
    }
  }
};

// Asks the L1 for the lines RopeBackFactors::load reads for rows row0 .. row0 + 15 (one row's 32 cos, or its 32
// sin, lane / 16 choosing which), so that those loads, issued after a product, find them there instead of each
// waiting on the L2. A row's 128 bytes span two lines unless the table is 128-byte aligned, so both ends are asked.
__device__ inline void prefetch_rope_back_factors(RopeTable rope, int row0, int T, int lane) {
  const int t = row0 + lane % 16, row = t < T ? t : 0;
  const float* first = (lane < 16 ? rope.cos : rope.sin) + row * kPairs;
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(first));
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(first + kPairs - 1));
}

// This lane's pairs of a 16 x 64 accumulator block (rows lane/4 and + 8 of the block): times scale, (q, k)
// rotated back by `factors` where rotate_back, rounded to a bf16 pair, handed to put(r, c, pair) (row r of the
// block, columns c and c + 1).
template <typename Put>
__device__ __forceinline__ void for_each_scaled_pair(const float (&acc)[kHeadDim / 8][4], float scale,
                                                     bool rotate_back, const RopeBackFactors& factors, int lane,
                                                     Put put) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = lane / 4 + 8 * half;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      const int c = 8 * n + 2 * (lane % 4);
      float x0 = scale * acc[n][2 * half], x1 = scale * acc[n][2 * half + 1];
      if (rotate_back) {
        const float2 g = rotate(x0, x1, factors.cos[half][n], -factors.sin[half][n]);
        x0 = g.x;
        x1 = g.y;
      }
      put(r, c, pack_bf16(x0, x1));
    }
  }
}

// No column sums of a stored block (store_head_block_rotated's default).
struct NoColumnSums {
  static constexpr bool kOn = false;
  __device__ void put(const float (&)[kChunk], int, int) const {}
};

// The column sums of a stored 16 x 64 block, as stored (bf16, widened), to slot[0 .. 63] (shared memory): each
// lane adds its kChunk columns over its four rows (rows lane / 8 + 4 j, in j's order), then the lanes holding the
// same columns are added by two shuffles (8 apart, then 16), and lanes 0 .. 7 write them. A fixed order.
struct BlockColumnSums {
  static constexpr bool kOn = true;
  float* slot;
  __device__ void put(float (&sums)[kChunk], int lane, int c) const {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      sums[i] += __shfl_xor_sync(kFullWarp, sums[i], 8);
      sums[i] += __shfl_xor_sync(kFullWarp, sums[i], 16);
    }
    if (lane < kChunksPerRow) {
      float4* to = reinterpret_cast<float4*>(slot + c);
      to[0] = make_float4(sums[0], sums[1], sums[2], sums[3]);
      to[1] = make_float4(sums[4], sums[5], sums[6], sums[7]);
    }
  }
};

// sums[i] += the eight bf16 of `chunk`, widened.
__device__ __forceinline__ void add_chunk(float (&sums)[kChunk], const uint4& chunk) {
  const unsigned w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = widen_bf16_pair(w[i]);
    sums[2 * i] += x.x;
    sums[2 * i + 1] += x.y;
  }
}

// A 16 x 64 accumulator block (rows row0 + lane/4 and + 8) to rows row0 .. row0+15 of dst: for_each_scaled_pair
// into the warp's own stage (free to overwrite), then copied out as 16-byte chunks, a row's eight chunks in eight
// neighbouring lanes; rows at or past T are not written. Sums (BlockColumnSums) also takes the block's column sums
// of the rows written.
template <typename Stage, typename Address, typename Sums = NoColumnSums>
__device__ void store_head_block_rotated(bf16* dst, Stage stage, const float (&acc)[kHeadDim / 8][4], float scale,
                                         bool rotate_back, const RopeBackFactors& factors, int row0, int T, int lane,
                                         Address address, Sums column_sums = {}) {
  for_each_scaled_pair(acc, scale, rotate_back, factors, lane,
                       [&](int r, int c, unsigned pair) { *reinterpret_cast<unsigned*>(stage.at(r, c)) = pair; });
  __syncwarp();
  constexpr int kChunksPerLane = kRows * kChunksPerRow / 32;
  static_assert(kChunksPerRow == 8 && kChunksPerLane == 4, "BlockColumnSums: a lane's column, rows 4 apart");
  const int c = kChunk * (lane % kChunksPerRow);
  [[maybe_unused]] float sums[kChunk] = {};
#pragma unroll
  for (int j = 0; j < kChunksPerLane; ++j) {
    const int r = (lane + 32 * j) / kChunksPerRow;
    if (row0 + r < T) {
      const uint4 chunk = *reinterpret_cast<const uint4*>(stage.at(r, c));
      *reinterpret_cast<uint4*>(dst + address(row0 + r) + c) = chunk;
      if constexpr (Sums::kOn) add_chunk(sums, chunk);
    }
  }
  if constexpr (Sums::kOn) column_sums.put(sums, lane, c);
  __syncwarp();  // the stage may be written again
}

// The same block straight from the registers, no stage: each pair a 4-byte store (a warp's store writes 16
// bytes of each of 8 rows, against the staged copy's whole rows), for a kernel whose stage tile is wanted for
// the next head's rows (the lab's v25).
template <typename Address>
__device__ void store_head_block_direct(bf16* dst, const float (&acc)[kHeadDim / 8][4], float scale,
                                        bool rotate_back, const RopeBackFactors& factors, int row0, int T, int lane,
                                        Address address) {
  for_each_scaled_pair(acc, scale, rotate_back, factors, lane, [&](int r, int c, unsigned pair) {
    if (row0 + r < T) *reinterpret_cast<unsigned*>(dst + address(row0 + r) + c) = pair;
  });
}

// store_head_block_rotated with the factors fetched here, all before the first staging store, so their round
// trips overlap instead of queueing behind the stores (a caller that can fetch them earlier, under a product,
// calls store_head_block_rotated itself).
template <typename Stage, typename Address, typename Sums = NoColumnSums>
__device__ void store_head_block_staged(bf16* dst, Stage stage, const float (&acc)[kHeadDim / 8][4], float scale,
                                        bool rotate_back, RopeTable rope, int row0, int T, int lane,
                                        Address address, Sums column_sums = {}) {
  RopeBackFactors factors;
  if (rotate_back) factors.load(rope, row0, T, lane);
  store_head_block_rotated(dst, stage, acc, scale, rotate_back, factors, row0, T, lane, address, column_sums);
}

// One row's delta = rowsum(dout * out) in fp32: this thread's 16-byte chunks of dout and out (eight elements
// summed in order), then the row's kChunksPerRow chunks, held by that many neighbouring threads, summed by
// shuffles. Every thread of the warp calls it at once.
__device__ inline float chunk_row_dot(uint4 dout_chunk, uint4 out_chunk) {
  const bf16* x = reinterpret_cast<const bf16*>(&dout_chunk);
  const bf16* y = reinterpret_cast<const bf16*>(&out_chunk);
  float dot = 0.0f;
#pragma unroll
  for (int e = 0; e < kChunk; ++e) dot += __bfloat162float(x[e]) * __bfloat162float(y[e]);
  for (int offset = kChunksPerRow / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullWarp, dot, offset);
  return dot;
}

// delta = rowsum(dout * out) over this thread's chunks of dout (in shared memory, landed by its own copies)
// and of out (out_chunk(it), its chunk it).
template <typename OutChunk>
__device__ __forceinline__ void store_delta(float* delta, const bf16* dout_rows, OutChunk out_chunk) {
#pragma unroll
  for (int it = 0; it < kChunksPerThread; ++it) {
    const int r = chunk_row(it), c = chunk_column(it);
    const float dot = chunk_row_dot(*reinterpret_cast<const uint4*>(dout_rows + r * kRowStride + c), out_chunk(it));
    if (c == 0) delta[r] = dot;
  }
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
