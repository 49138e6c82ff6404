// Fused causal attention with RoPE, version 4 (the bf16 keeper, R2 and up): the flash-attention-2 layout on
// bf16 tensor cores through mma.sync m16n8k16 (fp32 accumulation) and ldmatrix, for the training shape
// (T <= 128, head dim 64). One block of four warps owns a whole (sequence, head): its q, k, v (bias added,
// q and k rotated, rounded to bf16 as v3 does) and, in the backward, dout fit in shared memory, so every row
// is read from memory once.
//
// Where v3 (WMMA) moves every score tile through shared memory to find its rows, v4 keeps a warp's 16 query
// (or key) rows and all their scores in registers: the mma accumulator of two adjacent n8 tiles is, element
// for element, the A operand of the next product, so p (and ds) go from the score product into the value
// product without leaving the warp. With at most 128 keys a row's softmax is exact in one pass (no online
// rescaling). Warp w takes the 16-row blocks w and 7 - w, so the causal triangle's work is the same for all
// four warps.
//
//   forward: s = scale q k^T, p = softmax(s) rounded to bf16, out = p v, lse = max + log(sum) per row.
//   backward, one kernel: delta = rowsum(dout * out) at load; each warp's key blocks, query chunks of 32:
//     p^T = exp(scale k q^T - lse), dv += p^T dout, ds^T = p^T (v dout^T - delta) rounded to bf16,
//     dk += ds^T q, ds^T kept in shared memory; after a barrier each warp's query blocks: dq = ds k.
//   dq and dk are scaled and rotated back on the way out. No atomics: the results are bit-reproducible
//   (R4's recomputed backward must equal R3's bit for bit).
//
// On the H200 (2026-12-01, R3_batch b512 under --profile, 6 layers a step): forward 1322 us, backward (one
// kernel) 3262 us, against v3's 3735 us forward and 3789 + 4004 us backward; at b64 (R2) 219 + 425 us. That
// is still only ~1.2 TB/s in the forward and a small fraction of mma.sync's peak in the backward: what
// limits them has not been profiled yet (Nsight Compute is the next step; suspects: two blocks of four
// warps per SM in the backward, 238 registers, the prologue's loads not overlapping any compute).
//
// Fragment layouts: roofbench/mma_sync.cuh. RoPE's pairs are the columns (2i, 2i+1), so an accumulator's
// two adjacent columns are one pair and the rotation happens in registers.
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "attention_common.cuh"
#include "common.cuh"
#include "roofbench/cuda_check.hpp"
#include "roofbench/mma_sync.cuh"
#include "storage.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

using bf16 = __nv_bfloat16;
using namespace mma_sync;

inline constexpr int kWarpsV4 = 4;
inline constexpr int kThreadsV4 = 32 * kWarpsV4;
inline constexpr int kRows = 16;                     // mma's m: the rows one warp's block holds
inline constexpr int kRowBlocks = kMaxT / kRows;     // 8 blocks of 16 rows per head
inline constexpr int kQueryChunk = 32;              // queries per step of the dk/dv loop
// Row strides in bf16 elements: 16 bytes past a multiple of 128, so the eight rows an ldmatrix reads
// start on different banks.
inline constexpr int kRowStride = kHeadDim + 8;
inline constexpr int kDsStride = kMaxT + 8;
static_assert(kRowBlocks == 2 * kWarpsV4, "each warp takes the row blocks w and 7 - w");
static_assert(kThreadsV4 % (kHeadDim / 8) == 0 && 32 % (kHeadDim / 8) == 0);
static_assert(kHeadDim % 16 == 0 && kMaxT % kQueryChunk == 0);

// The row block warp w takes on its pass 0 and 1: w and 7 - w, which between them see as many causal
// pairs as any other warp's two.
__device__ inline int warp_row_block(int warp, int pass) { return pass == 0 ? warp : kRowBlocks - 1 - warp; }

// Two floats as the bf16 pair of one operand register (the lower column in the lower half).
__device__ inline unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&pair);
}

// The A operand of rows r0 .. r0+15, columns c0 .. c0+15 of a row-major matrix in shared memory.
__device__ inline void load_a(unsigned (&a)[4], const bf16* m, int ld, int r0, int c0, int lane) {
  ldmatrix_x4(a, m + (r0 + lane % 16) * ld + c0 + lane / 16 * 8);
}
// The same operand from the transpose: A(r, c) stored at m[c * ld + r].
__device__ inline void load_a_transposed(unsigned (&a)[4], const bf16* m, int ld, int r0, int c0, int lane) {
  ldmatrix_x4_trans(a, m + (c0 + lane % 8 + lane / 16 * 8) * ld + r0 + lane / 8 % 2 * 8);
}
// The B operands of two n8 tiles (n0 .. n0+7 in b[0], b[1]; n0+8 .. n0+15 in b[2], b[3]), k0 .. k0+15:
// from rows n of a matrix stored [n][k] (b = that matrix transposed: k^T, q^T, dout^T) ...
__device__ inline void load_b_rows_n(unsigned (&b)[4], const bf16* m, int ld, int k0, int n0, int lane) {
  ldmatrix_x4(b, m + (n0 + lane % 8 + lane / 16 * 8) * ld + k0 + lane / 8 % 2 * 8);
}
// ... or from rows k of a matrix stored [k][n] (v, dout, q, k as the right-hand factor).
__device__ inline void load_b_rows_k(unsigned (&b)[4], const bf16* m, int ld, int k0, int n0, int lane) {
  ldmatrix_x4_trans(b, m + (k0 + lane % 16) * ld + n0 + lane / 16 * 8);
}

// The A operand of k-step ks from the accumulators of n8 tiles 2 ks and 2 ks + 1 (the register reuse).
template <int kTiles>
__device__ inline void accumulators_as_a(unsigned (&a)[4], const float (&acc)[kTiles][4], int ks) {
  a[0] = pack_bf16(acc[2 * ks][0], acc[2 * ks][1]);
  a[1] = pack_bf16(acc[2 * ks][2], acc[2 * ks][3]);
  a[2] = pack_bf16(acc[2 * ks + 1][0], acc[2 * ks + 1][1]);
  a[3] = pack_bf16(acc[2 * ks + 1][2], acc[2 * ks + 1][3]);
}

// Every row 0 .. kMaxT-1 of one head's q, k or v (part 0, 1, 2, prepared as the products see them) or of an
// [N, C] tensor (part < 0), moved to shared memory [kMaxT][kRowStride] in two steps: fetch() issues all of
// a thread's 16-byte loads at once (zero from row T on, so padding adds nothing to any product), commit()
// prepares and stores them. A block fetches every tensor it needs before committing any, so the loads of
// a block travel together instead of one round trip per row.
inline constexpr int kChunk = 8;  // bf16 per 16-byte load
inline constexpr int kChunksPerRow = kHeadDim / kChunk;
inline constexpr int kChunksPerThread = kMaxT * kChunksPerRow / kThreadsV4;
static_assert(kMaxT * kChunksPerRow % kThreadsV4 == 0);

struct HeadFetch {
  uint4 raw[kChunksPerThread];

  __device__ static int row_of(int it) {
    return (static_cast<int>(threadIdx.x) + it * kThreadsV4) / kChunksPerRow;
  }
  __device__ static int column_of(int it) {
    return kChunk * ((static_cast<int>(threadIdx.x) + it * kThreadsV4) % kChunksPerRow);
  }

  __device__ void fetch(const bf16* src, const HeadRows& at, int part) {
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      const int r = row_of(it), c = column_of(it);
      raw[it] = make_uint4(0, 0, 0, 0);
      if (r < at.T) {
        const std::size_t row = part < 0 ? at.rows_at(r) : at.qkv_at(r, part);
        raw[it] = *reinterpret_cast<const uint4*>(src + row + c);
      }
    }
  }

  __device__ void commit(bf16* dst, const float* bias, RopeTable rope, const HeadRows& at, int part) const {
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      const int r = row_of(it), c = column_of(it);
      uint4 x = raw[it];
      if (part >= 0 && r < at.T) {
        const bf16* e = reinterpret_cast<const bf16*>(&x);
        const float4 lo = prepare_qkv_quad(make_float4(to_float(e[0]), to_float(e[1]), to_float(e[2]), to_float(e[3])),
                                           bias, rope, at, part, r, c);
        const float4 hi = prepare_qkv_quad(make_float4(to_float(e[4]), to_float(e[5]), to_float(e[6]), to_float(e[7])),
                                           bias, rope, at, part, r, c + 4);
        x = make_uint4(pack_bf16(lo.x, lo.y), pack_bf16(lo.z, lo.w), pack_bf16(hi.x, hi.y), pack_bf16(hi.z, hi.w));
      }
      *reinterpret_cast<uint4*>(dst + r * kRowStride + c) = x;
    }
  }

  // sum over this chunk of raw * other.raw in fp32 (delta's dout . out).
  __device__ float dot(int it, const HeadFetch& other) const {
    const bf16* a = reinterpret_cast<const bf16*>(&raw[it]);
    const bf16* b = reinterpret_cast<const bf16*>(&other.raw[it]);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) sum += to_float(a[i]) * to_float(b[i]);
    return sum;
  }
};

// Rows r and r + 8 of a 16 x 64 accumulator block (8 n8 tiles) to memory: times scale, and (q, k) rotated
// back to the raw qkv's frame; rows at or past T are skipped.
template <typename Address>
__device__ void store_head_block(bf16* dst, const float (&acc)[8][4], float scale, bool rotate_back, RopeTable rope,
                                 int row0, int T, int lane, Address address) {
  constexpr int kPairs = kHeadDim / 2;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int t = row0 + lane / 4 + 8 * half;
    if (t >= T) continue;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const int c = 8 * n + 2 * (lane % 4);
      float x0 = scale * acc[n][2 * half], x1 = scale * acc[n][2 * half + 1];
      if (rotate_back) {
        const float2 g = rotate(x0, x1, rope.cos[t * kPairs + c / 2], -rope.sin[t * kPairs + c / 2]);
        x0 = g.x;
        x1 = g.y;
      }
      *reinterpret_cast<unsigned*>(dst + address(t) + c) = pack_bf16(x0, x1);
    }
  }
}

struct ForwardSmemV4 {
  bf16 q[kMaxT * kRowStride], k[kMaxT * kRowStride], v[kMaxT * kRowStride];
};
struct BackwardSmemV4 {
  bf16 q[kMaxT * kRowStride], k[kMaxT * kRowStride], v[kMaxT * kRowStride], dout[kMaxT * kRowStride];
  bf16 ds_t[kMaxT * kDsStride];  // ds^T [key][query], bf16: the dq product's operand
  float lse[kMaxT], delta[kMaxT];
};

__global__ void __launch_bounds__(kThreadsV4)
    fused_attention_v4_forward_kernel(bf16* out, float* lse, const bf16* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  ForwardSmemV4& sm = *reinterpret_cast<ForwardSmemV4*>(smem_bytes);
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  {
    HeadFetch fq, fk, fv;
    fq.fetch(qkv, at, 0);
    fk.fetch(qkv, at, 1);
    fv.fetch(qkv, at, 2);
    fq.commit(sm.q, bias, args.rope, at, 0);
    fk.commit(sm.k, bias, args.rope, at, 1);
    fv.commit(sm.v, bias, args.rope, at, 2);
  }
  __syncthreads();

  for (int pass = 0; pass < 2; ++pass) {
    const int m = warp_row_block(warp, pass), q0 = kRows * m;
    if (q0 >= s.T) continue;
    unsigned qa[kHeadDim / 16][4];
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) load_a(qa[kk], sm.q, kRowStride, q0, 16 * kk, lane);

    // Scores of the keys 0 .. q0+15 (key blocks 0 .. m), n8 tile j holding keys 8j .. 8j+7.
    float sc[2 * kRowBlocks][4];
#pragma unroll
    for (int j = 0; j < 2 * kRowBlocks; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < kRowBlocks; ++kb) {
      if (kb > m) continue;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        unsigned b[4];
        load_b_rows_n(b, sm.k, kRowStride, 16 * kk, 16 * kb, lane);
        mma16816<bf16>(sc[2 * kb], qa[kk], b[0], b[1]);
        mma16816<bf16>(sc[2 * kb + 1], qa[kk], b[2], b[3]);
      }
    }

    // Softmax per row (rows q0 + g and q0 + g + 8; a row's scores spread over the four lanes of a quad).
    const int rows[2] = {q0 + lane / 4, q0 + lane / 4 + 8};
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 2 * kRowBlocks; ++j) {
      if (j / 2 > m) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = rows[e / 2], key = 8 * j + 2 * (lane % 4) + e % 2;
        sc[j][e] = key <= i && i < s.T ? args.scale * sc[j][e] : -INFINITY;
        row_max[e / 2] = fmaxf(row_max[e / 2], sc[j][e]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(kFullWarp, row_max[h], 1));
      row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(kFullWarp, row_max[h], 2));
      if (row_max[h] == -INFINITY) row_max[h] = 0.0f;  // a padding row: every p zero
    }
#pragma unroll
    for (int j = 0; j < 2 * kRowBlocks; ++j) {
      if (j / 2 > m) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[j][e] = expf(sc[j][e] - row_max[e / 2]);
        row_sum[e / 2] += sc[j][e];
      }
    }
    float inv_sum[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_sum[h] += __shfl_xor_sync(kFullWarp, row_sum[h], 1);
      row_sum[h] += __shfl_xor_sync(kFullWarp, row_sum[h], 2);
      inv_sum[h] = row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
      if (lane % 4 == 0 && rows[h] < s.T) lse[at.stats_at(rows[h], s.heads)] = row_max[h] + logf(row_sum[h]);
    }
#pragma unroll
    for (int j = 0; j < 2 * kRowBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[j][e] *= inv_sum[e / 2];

    // out = p v, p straight from the score accumulators.
    float o[kHeadDim / 8][4];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < kRowBlocks; ++kb) {
      if (kb > m) continue;
      unsigned pa[4];
      accumulators_as_a(pa, sc, kb);
#pragma unroll
      for (int dn = 0; dn < kHeadDim / 16; ++dn) {
        unsigned b[4];
        load_b_rows_k(b, sm.v, kRowStride, 16 * kb, 16 * dn, lane);
        mma16816<bf16>(o[2 * dn], pa, b[0], b[1]);
        mma16816<bf16>(o[2 * dn + 1], pa, b[2], b[3]);
      }
    }
    store_head_block(out, o, 1.0f, false, args.rope, q0, s.T, lane, [&](int t) { return at.rows_at(t); });
  }
}

__global__ void __launch_bounds__(kThreadsV4)
    fused_attention_v4_backward_kernel(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                       const bf16* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  BackwardSmemV4& sm = *reinterpret_cast<BackwardSmemV4*>(smem_bytes);
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  {
    HeadFetch fq, fk, fv, fo;
    fq.fetch(qkv, at, 0);
    fk.fetch(qkv, at, 1);
    fv.fetch(qkv, at, 2);
    fo.fetch(dout, at, -1);
    fq.commit(sm.q, bias, args.rope, at, 0);
    fk.commit(sm.k, bias, args.rope, at, 1);
    fv.commit(sm.v, bias, args.rope, at, 2);
    fo.commit(sm.dout, bias, args.rope, at, -1);
    // delta = rowsum(dout * out) in fp32: a row's chunks sit in kChunksPerRow consecutive threads (a
    // thread's chunks are kThreadsV4 apart, a multiple of kChunksPerRow), summed with shuffles among them.
    HeadFetch fout;
    fout.fetch(out, at, -1);
    for (int t = threadIdx.x; t < kMaxT; t += kThreadsV4) sm.lse[t] = t < s.T ? lse[at.stats_at(t, s.heads)] : 0.0f;
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      float dot = fo.dot(it, fout);
      for (int offset = kChunksPerRow / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullWarp, dot, offset);
      if (HeadFetch::column_of(it) == 0) sm.delta[HeadFetch::row_of(it)] = dot;
    }
  }
  __syncthreads();

  // dk and dv of the warp's key blocks; ds^T into shared memory for dq.
  const int query_end = (s.T + kQueryChunk - 1) / kQueryChunk * kQueryChunk;
  for (int pass = 0; pass < 2; ++pass) {
    const int kb = warp_row_block(warp, pass), key0 = kRows * kb;
    if (key0 >= s.T) continue;
    unsigned ka[kHeadDim / 16][4], va[kHeadDim / 16][4];
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      load_a(ka[kk], sm.k, kRowStride, key0, 16 * kk, lane);
      load_a(va[kk], sm.v, kRowStride, key0, 16 * kk, lane);
    }
    float dv[kHeadDim / 8][4], dk[kHeadDim / 8][4];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dv[n][e] = dk[n][e] = 0.0f;

    for (int qc = key0 / kQueryChunk * kQueryChunk; qc < query_end; qc += kQueryChunk) {
      constexpr int kTiles = kQueryChunk / 8;
      float pt[kTiles][4], dst[kTiles][4];  // p^T, then ds^T: keys key0 + g (+8), queries qc + 8n + 2t (+1)
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) pt[n][e] = dst[n][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
        for (int np = 0; np < kTiles / 2; ++np) {
          unsigned b[4];
          load_b_rows_n(b, sm.q, kRowStride, 16 * kk, qc + 16 * np, lane);
          mma16816<bf16>(pt[2 * np], ka[kk], b[0], b[1]);
          mma16816<bf16>(pt[2 * np + 1], ka[kk], b[2], b[3]);
          load_b_rows_n(b, sm.dout, kRowStride, 16 * kk, qc + 16 * np, lane);
          mma16816<bf16>(dst[2 * np], va[kk], b[0], b[1]);
          mma16816<bf16>(dst[2 * np + 1], va[kk], b[2], b[3]);
        }
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + lane / 4 + 8 * (e / 2), query = qc + 8 * n + 2 * (lane % 4) + e % 2;
          const float p = key <= query && query < s.T ? expf(args.scale * pt[n][e] - sm.lse[query]) : 0.0f;
          pt[n][e] = p;
          dst[n][e] = p * (dst[n][e] - sm.delta[query]);
        }
#pragma unroll
      for (int ks = 0; ks < kTiles / 2; ++ks) {
        unsigned pa[4], dsa[4];
        accumulators_as_a(pa, pt, ks);
        accumulators_as_a(dsa, dst, ks);
#pragma unroll
        for (int dn = 0; dn < kHeadDim / 16; ++dn) {
          unsigned b[4];
          load_b_rows_k(b, sm.dout, kRowStride, qc + 16 * ks, 16 * dn, lane);
          mma16816<bf16>(dv[2 * dn], pa, b[0], b[1]);
          mma16816<bf16>(dv[2 * dn + 1], pa, b[2], b[3]);
          load_b_rows_k(b, sm.q, kRowStride, qc + 16 * ks, 16 * dn, lane);
          mma16816<bf16>(dk[2 * dn], dsa, b[0], b[1]);
          mma16816<bf16>(dk[2 * dn + 1], dsa, b[2], b[3]);
        }
      }
      // The same bf16 ds^T the dk product used, for dq.
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int key = key0 + lane / 4 + 8 * half, query = qc + 8 * n + 2 * (lane % 4);
          *reinterpret_cast<unsigned*>(sm.ds_t + key * kDsStride + query) =
              pack_bf16(dst[n][2 * half], dst[n][2 * half + 1]);
        }
    }
    store_head_block(dqkv, dv, 1.0f, false, args.rope, key0, s.T, lane, [&](int t) { return at.qkv_at(t, 2); });
    store_head_block(dqkv, dk, args.scale, true, args.rope, key0, s.T, lane,
                     [&](int t) { return at.qkv_at(t, 1); });
  }
  __syncthreads();

  // dq = scale ds k for the warp's query blocks: query block m needs key blocks 0 .. m, whose ds^T the
  // loop above wrote for every query from the key block's chunk on.
  for (int pass = 0; pass < 2; ++pass) {
    const int m = warp_row_block(warp, pass), q0 = kRows * m;
    if (q0 >= s.T) continue;
    float dq[kHeadDim / 8][4];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
#pragma unroll
    for (int kb = 0; kb < kRowBlocks; ++kb) {
      if (kb > m) continue;
      unsigned dsa[4];
      load_a_transposed(dsa, sm.ds_t, kDsStride, q0, kRows * kb, lane);
#pragma unroll
      for (int dn = 0; dn < kHeadDim / 16; ++dn) {
        unsigned b[4];
        load_b_rows_k(b, sm.k, kRowStride, kRows * kb, 16 * dn, lane);
        mma16816<bf16>(dq[2 * dn], dsa, b[0], b[1]);
        mma16816<bf16>(dq[2 * dn + 1], dsa, b[2], b[3]);
      }
    }
    store_head_block(dqkv, dq, args.scale, true, args.rope, q0, s.T, lane, [&](int t) { return at.qkv_at(t, 0); });
  }
}

dim3 grid_v4(const AttentionShape& s) {
  return dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
}

// Rows move 16 bytes at a time.
void check_aligned_v4(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    throw Error(std::string("gpt: attention v4 needs 16-byte aligned buffers (") + what + ")");
}

}  // namespace

void configure_v4() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v4_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(ForwardSmemV4))));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v4_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmemV4))));
}

void forward_v4(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  check_aligned_v4(out, "out");
  check_aligned_v4(qkv, "qkv");
  fused_attention_v4_forward_kernel<<<grid_v4(args.s), kThreadsV4, sizeof(ForwardSmemV4), stream>>>(
      out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

void backward_v4(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_aligned_v4(dqkv, "dqkv");
  check_aligned_v4(dout, "dout");
  check_aligned_v4(out, "out");
  check_aligned_v4(qkv, "qkv");
  fused_attention_v4_backward_kernel<<<grid_v4(args.s), kThreadsV4, sizeof(BackwardSmemV4), stream>>>(
      dqkv, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::attention
