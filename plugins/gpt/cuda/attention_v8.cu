// Fused causal attention with RoPE, version 8: R1's fp32 tensors (qkv, out, dout, dqkv fp32 in memory) on
// TF32 tensor cores through mma.sync m16n8k8 (tf32 operands, fp32 accumulation), with the bf16 versions'
// structure (attention_mma.cuh, attention_v9.cu): one block per (sequence, head), rows moved into shared
// memory by cp.async and prepared there once (bias added, q and k rotated in fp32, then rounded to tf32 with
// cvt.rna as the products see them), a warp's 16 query (or key) rows and all their scores in registers,
// the softmax in log2 units with exp2f and the masks only on the blocks that cross the diagonal or T, lse,
// delta and ds in fp32, and a backward without atomics (bit-reproducible). Those element-wise steps on the
// scores are attention_mma.cuh's (softmax_row_block, probabilities_and_ds: the same accumulator layout).
//
// The scores stay in registers although m16n8k8's accumulator layout (c0, c1 at row g, columns 2t, 2t+1;
// c2, c3 at row g+8) is not its tf32 A layout (a0 row g column t; a2 row g column t+4): a product sums
// over k, so k may be permuted as long as both operands agree. A's k-slot t stands for column 2t and
// slot t+4 for column 2t+1 of the 8-column tile, so a = {c0, c2, c1, c3} (rounded to tf32), no shuffles;
// the B operand takes the same permutation: b0 = B(row 2t), b1 = B(row 2t+1) of that 8-row k block.
// Likewise the output columns (n) of the products whose B is read along its rows (v, dout, q, k as the
// right-hand factor): n8 tile i of a 32-column group stands for the columns 4n + i, so one 16-byte LDS
// gives the b0 of four tiles, and a lane's accumulators hold 8 whole neighbouring columns of its rows
// (RoPE pairs and 16-byte stores stay inside the lane).
//
// Shared memory: rows of kStride = 68 floats (64 + 4). 68 = 4 mod 32 makes both read patterns
// conflict-free: B read across rows k (LDS.128 at row 2t, columns 4g: banks 8t + 4g .. + 3) and B read
// along rows n (LDS.32 at row g, column t: banks 4g + t); the latter stays 32-bit (2 loads per mma), as
// a 64- or 128-bit load along the rows would need a stride of 8 or 16 mod 32, which the 16-byte pattern
// forbids. ds^T [key][query] has rows of 132 floats: its A-operand reads (rows 2t, columns g) hit banks
// 8t + g; its 8-byte writes see two-way conflicts (fewer than the reads).
//   forward: 8 warps, warp w on query row block w (not balanced as v4's 4 warps are: the reasoning, not
//     measured against a 4-warp build, is that 16 warps per SM hide more latency than 8 balanced ones, and
//     a second block runs beside), q, k, v 3 x 34 KB = 102 KB: 2 blocks (16 warps) per SM.
//   backward: 8 warps, warp w on key block w (dv, dk over query chunks of 16 from the diagonal to T,
//     ds^T into shared memory), a barrier, then on query block w (dq = ds k); q, k, v, dout, ds^T and the
//     statistics take 203 KB, so one block per SM, and 8 warps rather than 4 (reasoned, not measured: warp
//     0's 8 query chunks bound the block at 8 chunk-times where 4 balanced warps would take 9 each). out
//     waits in the ds^T buffer until delta is taken.
//
// Registers (ptxas, sm_90, CUDA 13.0): forward 125 (launch bound 2 blocks of 256 threads: at most 128),
// backward 196 (one block per SM: 255 allowed), no spills. The forward's third block per SM is refused by
// shared memory (3 x 102 KB), not by registers.
//
// On the H200 v8 takes 143 us a layer forward + backward at batch 64 against v3's 307 (the lab's table is
// in plugins/gpt/README.md); it matches the double reference at rel L2 2.3e-4 (out) and 3.0e-4 (dqkv), v3's
// figures to the printed digits (both round the same operands to tf32), and gives the same bits twice.
// Not measured: Nsight Compute on v8 (where the 1.4 TB/s of the lab leaves the rest: the backward's
// one block per SM loads its 160 KB with nothing of its own to overlap).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "attention_common.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "roofbench/cuda.hpp"
#include "roofbench/mma_sync.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

using mma::check_aligned16;
using mma::kLog2e;
using roofbench::mma_sync::cp_async16;
using roofbench::mma_sync::cp_async_commit;
using roofbench::mma_sync::cp_async_wait;
using roofbench::mma_sync::mma1688_tf32;
using roofbench::mma_sync::to_tf32;

inline constexpr int kWarps = 8;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kRows = 16;                  // mma's m: one warp's row block
inline constexpr int kRowBlocks = kMaxT / kRows;  // 8, one per warp
inline constexpr int kStride = kHeadDim + 4;      // floats per row of q, k, v, dout in shared memory
inline constexpr int kDsStride = kMaxT + 4;       // floats per row of ds^T
inline constexpr int kHeadFloats = kMaxT * kStride;
inline constexpr int kPairs = kHeadDim / 2;
inline constexpr int kTiles = kHeadDim / 8;  // n8 tiles of a 64-column output block
static_assert(kRowBlocks == kWarps && kHeadDim == 64);
static_assert(kRows == mma::kRows && kRowBlocks == mma::kRowBlocks, "mma::softmax_row_block's row blocks are ours");

// Rows move 16 bytes (4 floats, two RoPE pairs) at a time; a thread's quads share one column, its rows
// are kRowsPerPass apart, and a row's quads sit in kQuadsPerRow neighbouring lanes.
inline constexpr int kQuadsPerRow = kHeadDim / 4;
inline constexpr int kQuadsPerThread = kMaxT * kQuadsPerRow / kThreads;
inline constexpr int kRowsPerPass = kThreads / kQuadsPerRow;
static_assert(kMaxT * kQuadsPerRow % kThreads == 0 && 32 % kQuadsPerRow == 0);
__device__ inline int quad_row(int it) { return static_cast<int>(threadIdx.x) / kQuadsPerRow + it * kRowsPerPass; }
__device__ inline int quad_column() { return 4 * (static_cast<int>(threadIdx.x) % kQuadsPerRow); }

__device__ inline unsigned bits(float x) { return __float_as_uint(x); }
__device__ inline float tf32(float x) { return __uint_as_float(to_tf32(x)); }

// Rows 0 .. kMaxT-1 of one head's part of qkv (0, 1, 2 = q, k, v) or of an [N, C] tensor (part < 0) into
// shared memory [kMaxT][kStride], raw, by cp.async (complete at this thread's cp_async_wait; each thread
// copies the quads it prepares later); rows from T on are zeroed, so padding adds nothing.
__device__ void fetch_rows_async(float* dst, const float* src, const HeadRows& at, int part) {
  const int c = quad_column();
#pragma unroll
  for (int it = 0; it < kQuadsPerThread; ++it) {
    const int r = quad_row(it);
    float* to = dst + r * kStride + c;
    if (r < at.T)
      cp_async16(to, src + (part < 0 ? at.rows_at(r) : at.qkv_at(r, part)) + c);
    else
      *reinterpret_cast<float4*>(to) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// This thread's quads of q, k or v (part 0, 1, 2) in place, after its cp_async_wait: bias added, q and k
// rotated (pairs (c, c+1), (c+2, c+3)), rounded to tf32; padding rows stay zero.
__device__ void prepare_rows(float* rows, const float* qkv_bias, RopeTable rope, const HeadRows& at, int part) {
  const int c = quad_column();
  const float4 b = __ldg(reinterpret_cast<const float4*>(qkv_bias + part * at.C + at.h * kHeadDim + c));
#pragma unroll
  for (int it = 0; it < kQuadsPerThread; ++it) {
    const int r = quad_row(it);
    if (r >= at.T) continue;
    float4* p = reinterpret_cast<float4*>(rows + r * kStride + c);
    float4 x = *p;
    x = make_float4(x.x + b.x, x.y + b.y, x.z + b.z, x.w + b.w);
    if (part < 2) {
      const float2 cs = __ldg(reinterpret_cast<const float2*>(rope.cos + r * kPairs + c / 2));
      const float2 sn = __ldg(reinterpret_cast<const float2*>(rope.sin + r * kPairs + c / 2));
      const float2 lo = rotate(x.x, x.y, cs.x, sn.x), hi = rotate(x.z, x.w, cs.y, sn.y);
      x = make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    *p = make_float4(tf32(x.x), tf32(x.y), tf32(x.z), tf32(x.w));
  }
}

// The A operand of rows r0 .. r0+15, columns c0 .. c0+7 (k-slots in natural order) of a [row][kStride]
// matrix of tf32 values.
__device__ inline void load_a(unsigned (&a)[4], const float* m, int r0, int c0, int lane) {
  const float* p = m + (r0 + lane / 4) * kStride + c0 + lane % 4;
  a[0] = bits(p[0]);
  a[1] = bits(p[8 * kStride]);
  a[2] = bits(p[4]);
  a[3] = bits(p[8 * kStride + 4]);
}

// b += a M for the 64 columns of rows k0 .. k0+7 of M ([k][kStride]), a's k-slots permuted (slot t is row
// k0 + 2t, slot t+4 row k0 + 2t + 1): tile 4 grp + i holds the columns 32 grp + 4n + i.
__device__ __forceinline__ void mma_rows_k(float (&acc)[kTiles][4], const unsigned (&a)[4], const float* m, int k0,
                                           int lane) {
  const float* row = m + (k0 + 2 * (lane % 4)) * kStride + 4 * (lane / 4);
#pragma unroll
  for (int grp = 0; grp < 2; ++grp) {
    const float4 b0 = *reinterpret_cast<const float4*>(row + 32 * grp);
    const float4 b1 = *reinterpret_cast<const float4*>(row + kStride + 32 * grp);
    mma1688_tf32(acc[4 * grp + 0], a, bits(b0.x), bits(b1.x));
    mma1688_tf32(acc[4 * grp + 1], a, bits(b0.y), bits(b1.y));
    mma1688_tf32(acc[4 * grp + 2], a, bits(b0.z), bits(b1.z));
    mma1688_tf32(acc[4 * grp + 3], a, bits(b0.w), bits(b1.w));
  }
}

// acc += a M^T for the n8 tile of rows n0 .. n0+7 of M ([n][kStride]), k = columns c0 .. c0+7 in natural
// order (as load_a).
__device__ __forceinline__ void mma_rows_n(float (&acc)[4], const unsigned (&a)[4], const float* m, int n0, int c0,
                                           int lane) {
  const float* p = m + (n0 + lane / 4) * kStride + c0 + lane % 4;
  mma1688_tf32(acc, a, bits(p[0]), bits(p[4]));
}

// The accumulator of one n8 tile as the A operand of a product over its 8 columns (k-slot t = column 2t,
// t+4 = column 2t+1), rounded to tf32.
__device__ inline void accumulator_as_a(unsigned (&a)[4], const float (&c)[4]) {
  a[0] = to_tf32(c[0]);
  a[1] = to_tf32(c[2]);
  a[2] = to_tf32(c[1]);
  a[3] = to_tf32(c[3]);
}

// Rows r and r + 8 (r = row0 + lane/4) of a 16 x 64 accumulator block from mma_rows_k to memory: times
// scale, (q, k) rotated back to the raw qkv's frame; a lane holds columns 32 grp + 8t .. + 7 of its rows
// (tile 4 grp + i: c0 column 8t + i, c1 column 8t + 4 + i). Rows at or past T are skipped.
template <typename Address>
__device__ void store_rows(float* dst, const float (&acc)[kTiles][4], float scale, bool rotate_back, RopeTable rope,
                           int row0, int T, int lane, Address address) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + lane / 4 + 8 * half;
    if (row >= T) continue;
#pragma unroll
    for (int grp = 0; grp < 2; ++grp) {
      const int c = 32 * grp + 8 * (lane % 4);
      float x[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        x[i] = scale * acc[4 * grp + i][2 * half];
        x[4 + i] = scale * acc[4 * grp + i][2 * half + 1];
      }
      if (rotate_back) {
        const float4 c0 = __ldg(reinterpret_cast<const float4*>(rope.cos + row * kPairs + c / 2));
        const float4 s0 = __ldg(reinterpret_cast<const float4*>(rope.sin + row * kPairs + c / 2));
        const float cs[4] = {c0.x, c0.y, c0.z, c0.w}, sn[4] = {s0.x, s0.y, s0.z, s0.w};
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const float2 g = rotate(x[2 * p], x[2 * p + 1], cs[p], -sn[p]);
          x[2 * p] = g.x;
          x[2 * p + 1] = g.y;
        }
      }
      float* to = dst + address(row) + c;
      *reinterpret_cast<float4*>(to) = make_float4(x[0], x[1], x[2], x[3]);
      *reinterpret_cast<float4*>(to + 4) = make_float4(x[4], x[5], x[6], x[7]);
    }
  }
}

struct ForwardSmem {
  float q[kHeadFloats], k[kHeadFloats], v[kHeadFloats];
};

// The forward of query rows q0 .. q0+15 (block m, key tiles 0 .. 2m+1): s = scale q k^T in log2 units,
// p = softmax(s) (exact in one pass: at most 128 keys), o = p v with p rounded to tf32, lse = max + log(sum)
// in natural units for the rows q0 + lane/4 and + 8.
__device__ __forceinline__ void attend_row_block(float (&o)[kTiles][4], float (&lse)[2], const ForwardSmem& sm,
                                                 int m, int T, float scale, int lane) {
  constexpr int kKeyTiles = kMaxT / 8;
  const int q0 = kRows * m;
  float sc[kKeyTiles][4];
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
  // k-steps outside: one q operand (4 registers) at a time, the key tiles' products independent.
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 8; ++ks) {
    unsigned qa[4];
    load_a(qa, sm.q, q0, 8 * ks, lane);
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
      if (j / 2 > m) continue;
      mma_rows_n(sc[j], qa, sm.k, 8 * j, 8 * ks, lane);
    }
  }

  float inv_sum[2];
  mma::softmax_row_block<mma::Exponent::log2>(sc, inv_sum, lse, m, T, scale, lane);

#pragma unroll
  for (int n = 0; n < kTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
    if (j / 2 > m) continue;
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[j][e] *= inv_sum[e / 2];
    unsigned pa[4];
    accumulator_as_a(pa, sc[j]);
    mma_rows_k(o, pa, sm.v, 8 * j, lane);
  }
}

__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_v8_forward_kernel(float* out, float* lse, const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  ForwardSmem& sm = *reinterpret_cast<ForwardSmem*>(smem_bytes);
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  fetch_rows_async(sm.q, qkv, at, 0);
  fetch_rows_async(sm.k, qkv, at, 1);
  fetch_rows_async(sm.v, qkv, at, 2);
  cp_async_commit();
  cp_async_wait<0>();
  prepare_rows(sm.q, bias, args.rope, at, 0);
  prepare_rows(sm.k, bias, args.rope, at, 1);
  prepare_rows(sm.v, bias, args.rope, at, 2);
  __syncthreads();

  const int lane = threadIdx.x % 32, m = threadIdx.x / 32, q0 = kRows * m;
  if (q0 >= s.T) return;
  float o[kTiles][4], row_lse[2];
  attend_row_block(o, row_lse, sm, m, s.T, args.scale, lane);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = q0 + lane / 4 + 8 * h;
    if (lane % 4 == 0 && row < s.T) lse[at.stats_at(row, s.heads)] = row_lse[h];
  }
  store_rows(out, o, 1.0f, false, args.rope, q0, s.T, lane, [&](int t) { return at.rows_at(t); });
}

struct BackwardSmem {
  float q[kHeadFloats], k[kHeadFloats], v[kHeadFloats], dout[kHeadFloats];
  float ds_t[kMaxT * kDsStride];   // ds^T [key][query], tf32: the dq product's operand
  float lse[kMaxT], delta[kMaxT];  // lse in log2 units (times log2(e))
};
static_assert(kHeadFloats <= kMaxT * kDsStride, "out's rows wait in the ds^T buffer");

// dv = p^T dout and dk = ds^T q (unscaled) of key rows key0 .. key0+15 (block kb) over the queries from
// key0 to T in chunks of 16: p^T = exp2(scale log2(e) k q^T - lse), ds^T = p^T (v dout^T - delta), both
// rounded to tf32 as operands; the same ds^T goes to sm.ds_t for dq.
__device__ __forceinline__ void key_block_gradients(float (&dv)[kTiles][4], float (&dk)[kTiles][4],
                                                    BackwardSmem& sm, int kb, int T, float scale, int lane) {
  constexpr int kChunk = 16;
  const int key0 = kRows * kb;
  unsigned ka[kHeadDim / 8][4], va[kHeadDim / 8][4];
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 8; ++ks) {
    load_a(ka[ks], sm.k, key0, 8 * ks, lane);
    load_a(va[ks], sm.v, key0, 8 * ks, lane);
  }
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dv[n][e] = dk[n][e] = 0.0f;

  const float score_scale = scale * kLog2e;
  for (int qc = key0; qc < T; qc += kChunk) {
    float pt[2][4], dst[2][4];  // keys key0 + g (+8), queries qc + 8n + 2t (+1)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) pt[n][e] = dst[n][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 8; ++ks)
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        mma_rows_n(pt[n], ka[ks], sm.q, qc + 8 * n, 8 * ks, lane);
        mma_rows_n(dst[n], va[ks], sm.dout, qc + 8 * n, 8 * ks, lane);
      }
    // Past the diagonal chunk every key precedes every query; below T no query is padding: no mask.
    const bool masked = qc == key0 || qc + kChunk > T;
    mma::probabilities_and_ds<mma::Exponent::log2>(pt, dst, sm.lse, sm.delta, key0, qc, masked, score_scale, T,
                                                   lane);
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      unsigned pa[4], dsa[4];
      accumulator_as_a(pa, pt[n]);
      accumulator_as_a(dsa, dst[n]);
      mma_rows_k(dv, pa, sm.dout, qc + 8 * n, lane);
      mma_rows_k(dk, dsa, sm.q, qc + 8 * n, lane);
      const int key = key0 + lane / 4, query = qc + 8 * n + 2 * (lane % 4);
      *reinterpret_cast<float2*>(sm.ds_t + key * kDsStride + query) =
          make_float2(__uint_as_float(dsa[0]), __uint_as_float(dsa[2]));
      *reinterpret_cast<float2*>(sm.ds_t + (key + 8) * kDsStride + query) =
          make_float2(__uint_as_float(dsa[1]), __uint_as_float(dsa[3]));
    }
  }
}

// dq = ds k (unscaled) of query rows q0 .. q0+15 (block m): key blocks 0 .. m, whose ds^T
// key_block_gradients wrote for every query from the key block on. A's k-slots: slot t is key k0 + 2t.
__device__ __forceinline__ void query_block_dq(float (&dq)[kTiles][4], const BackwardSmem& sm, int m, int lane) {
  const int q0 = kRows * m;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
#pragma unroll
  for (int kb = 0; kb < kRowBlocks; ++kb) {
    if (kb > m) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int k0 = kRows * kb + 8 * half;
      const float* p = sm.ds_t + (k0 + 2 * (lane % 4)) * kDsStride + q0 + lane / 4;
      const unsigned a[4] = {bits(p[0]), bits(p[8]), bits(p[kDsStride]), bits(p[kDsStride + 8])};
      mma_rows_k(dq, a, sm.k, k0, lane);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    fused_attention_v8_backward_kernel(float* dqkv, const float* dout, const float* out, const float* lse,
                                       const float* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  BackwardSmem& sm = *reinterpret_cast<BackwardSmem*>(smem_bytes);
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  {
    float* out_rows = sm.ds_t;  // until delta is taken; ds^T is first written after the barrier below
    fetch_rows_async(sm.q, qkv, at, 0);
    fetch_rows_async(sm.k, qkv, at, 1);
    fetch_rows_async(sm.v, qkv, at, 2);
    fetch_rows_async(sm.dout, dout, at, -1);
    fetch_rows_async(out_rows, out, at, -1);
    cp_async_commit();
    mma::load_lse_log2<kThreads>(sm.lse, lse, at, s.heads);
    cp_async_wait<0>();
    prepare_rows(sm.q, bias, args.rope, at, 0);
    prepare_rows(sm.k, bias, args.rope, at, 1);
    prepare_rows(sm.v, bias, args.rope, at, 2);
    // delta = rowsum(dout * out) on the fp32 values, then dout rounded to tf32 for the products.
    const int c = quad_column();
#pragma unroll
    for (int it = 0; it < kQuadsPerThread; ++it) {
      const int r = quad_row(it);
      float4* pd = reinterpret_cast<float4*>(sm.dout + r * kStride + c);
      const float4 a = *pd, b = *reinterpret_cast<const float4*>(out_rows + r * kStride + c);
      float dot = a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      for (int offset = kQuadsPerRow / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullWarp, dot, offset);
      if (c == 0) sm.delta[r] = dot;
      *pd = make_float4(tf32(a.x), tf32(a.y), tf32(a.z), tf32(a.w));
    }
  }
  __syncthreads();

  const auto qkv_rows = [&](int part) { return [&at, part](int t) { return at.qkv_at(t, part); }; };
  const int row0 = kRows * warp;
  if (row0 < s.T) {
    float dv[kTiles][4], dk[kTiles][4];
    key_block_gradients(dv, dk, sm, warp, s.T, args.scale, lane);
    store_rows(dqkv, dv, 1.0f, false, args.rope, row0, s.T, lane, qkv_rows(2));
    store_rows(dqkv, dk, args.scale, true, args.rope, row0, s.T, lane, qkv_rows(1));
  }
  __syncthreads();
  if (row0 < s.T) {
    float dq[kTiles][4];
    query_block_dq(dq, sm, warp, lane);
    store_rows(dqkv, dq, args.scale, true, args.rope, row0, s.T, lane, qkv_rows(0));
  }
}

bool g_configured = false;

// What every v8 launch needs: the kernels configured (both take more than the default 48 KB of dynamic
// shared memory), and 16-byte aligned rows and tables.
void check_launch(const float* out, const float* qkv, const float* qkv_bias, const FusedArgs& args) {
  if (!g_configured) throw Error("gpt: attention v8 runs after fused_attention_configure()");
  mma::check_head_operands_aligned("v8", out, qkv, qkv_bias, args.rope);
}

}  // namespace

void configure_v8() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v8_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(ForwardSmem))));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v8_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmem))));
  g_configured = true;
}

void forward_v8(float* out, float* lse, const float* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  check_launch(out, qkv, qkv_bias, args);
  fused_attention_v8_forward_kernel<<<head_grid(args.s), kThreads, sizeof(ForwardSmem), stream>>>(out, lse, qkv,
                                                                                                 qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

void backward_v8(float* dqkv, const float* dout, const float* out, const float* lse, const float* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_launch(out, qkv, qkv_bias, args);
  check_aligned16(dqkv, "v8", "dqkv");
  check_aligned16(dout, "v8", "dout");
  fused_attention_v8_backward_kernel<<<head_grid(args.s), kThreads, sizeof(BackwardSmem), stream>>>(
      dqkv, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::attention
