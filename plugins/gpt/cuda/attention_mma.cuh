// The warp-level pieces of the bf16 mma.sync attention versions (v7 in the lab, v9 the bf16 keeper's forward): bf16
// m16n8k16 tensor-core products with fp32 accumulation on q, k, v and dout held in shared memory, one warp
// per 16-row block, the scores kept in registers (the accumulator of two adjacent n8 tiles is, element for
// element, the A operand of the next product). The versions differ in how blocks are scheduled; the
// arithmetic below is theirs in common, so they compute the same values. v8 (TF32, attention_v8.cu) has its
// own products but the same m16n8 accumulator layout, so it shares the element-wise steps on the scores
// (softmax_row_block, probabilities_and_ds).
//
// Fragment layouts: roofbench/mma_sync.cuh. RoPE's pairs are the columns (2i, 2i+1), so an accumulator's
// two adjacent columns are one pair and the rotation happens in registers.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <string>

#include "attention_common.cuh"
#include "common.cuh"
#include "roofbench/mma_sync.cuh"
#include "storage.cuh"

namespace roofbench::gpt::cuda::attention::mma {

using bf16 = __nv_bfloat16;
using namespace roofbench::mma_sync;

inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kRows = 16;                  // mma's m: the rows one warp's block holds
inline constexpr int kRowBlocks = kMaxT / kRows;  // 8 blocks of 16 rows per head
inline constexpr int kQueryChunk = 32;            // queries per step of the dk/dv loop
// Row strides in bf16 elements: 16 bytes past a multiple of 128, so the eight rows an ldmatrix reads
// start on different banks.
inline constexpr int kRowStride = kHeadDim + 8;
inline constexpr int kDsStride = kMaxT + 8;
inline constexpr int kHeadElements = kMaxT * kRowStride;  // one head's rows of q, k, v or dout in shared memory
static_assert(kRowBlocks == 2 * kWarps, "each warp takes the row blocks w and 7 - w");
static_assert(kHeadDim % 16 == 0 && kMaxT % kQueryChunk == 0);

// The rows move 16 bytes at a time (cp.async, ldmatrix's rows, the 16-byte loads and stores), so every
// buffer a version reads or writes that way must be 16-byte aligned; `version` names it in the refusal.
inline void check_aligned16(const void* p, const char* version, const char* what) {
  if (!aligned16(p))
    throw Error(std::string("gpt: attention ") + version + " needs 16-byte aligned buffers (" + what + ")");
}
// What a cp.async version's forward and backward both read 16 bytes at a time: out, qkv, qkv's bias and the
// RoPE tables (v7, v8, v9).
inline void check_head_operands_aligned(const char* version, const void* out, const void* qkv, const float* qkv_bias,
                                        RopeTable rope) {
  check_aligned16(out, version, "out");
  check_aligned16(qkv, version, "qkv");
  check_aligned16(qkv_bias, version, "qkv bias");
  check_aligned16(rope.cos, version, "RoPE cos");
  check_aligned16(rope.sin, version, "RoPE sin");
}

// Rows move 16 bytes (8 bf16) at a time; a thread's chunks share one column (kThreads is a multiple of the
// chunks per row), its rows are kRowsPerPass apart.
inline constexpr int kChunk = 8;
inline constexpr int kChunksPerRow = kHeadDim / kChunk;
inline constexpr int kChunksPerThread = kMaxT * kChunksPerRow / kThreads;
inline constexpr int kRowsPerPass = kThreads / kChunksPerRow;
static_assert(kMaxT * kChunksPerRow % kThreads == 0 && kThreads % kChunksPerRow == 0 && 32 % kChunksPerRow == 0);
__device__ inline int chunk_row(int it) { return static_cast<int>(threadIdx.x) / kChunksPerRow + it * kRowsPerPass; }
__device__ inline int chunk_column(int) { return kChunk * (static_cast<int>(threadIdx.x) % kChunksPerRow); }

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

// The A operands of rows r0 .. r0+15 of a [kMaxT][kRowStride] matrix in shared memory, every k-step of the
// head dimension: a row block's q for its scores.
__device__ inline void load_row_block_a(unsigned (&a)[kHeadDim / 16][4], const bf16* m, int r0, int lane) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) load_a(a[kk], m, kRowStride, r0, 16 * kk, lane);
}

// How a version evaluates the softmax's exponentials (the retired v4 took expf of the scaled scores and
// masked every score):
//   log2 (v8): the scores scaled by scale * log2(e) and exp2f (FlashAttention-2's form, one FFMA and the
//     SFU's ex2 per element), the mask applied only to the blocks that cross the diagonal or T.
//   log2_approx (v7): log2 with the SFU's ex2.approx.ftz.f32 in place of exp2f, which wraps the same
//     instruction in a range test and two multiplications to keep subnormal results (what FlashAttention's
//     exp2f compiles to under --use_fast_math). A probability below 2^-126 flushes to 0: next to the row
//     maximum's own p (1 in the backward before the 1/sum, between 1 and 2^8 in v7's forward) it would be
//     lost anyway, in the bf16 rounding of p and in the fp32 row sum.
// The log-sum-exp leaves the forward in natural units either way; the log2 backward rescales it on load.
enum class Exponent { log2, log2_approx };
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
// v7's online softmax keeps a row's maximum until a tile's scores outgrow it by more than this (log2 units).
inline constexpr float kRescaleSlack = 8.0f;

// A head's log-sum-exp into shared memory in log2 units (times log2(e): the log2 backwards' form), rows from
// T on zero; the block's kBlockThreads threads share the rows.
template <int kBlockThreads>
__device__ inline void load_lse_log2(float* dst, const float* lse, const HeadRows& at, int heads) {
  for (int t = threadIdx.x; t < kMaxT; t += kBlockThreads)
    dst[t] = t < at.T ? kLog2e * lse[at.stats_at(t, heads)] : 0.0f;
}

__device__ inline float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
template <Exponent kExp>
__device__ inline float exp2_of(float x) {
  if constexpr (kExp == Exponent::log2_approx)
    return fast_exp2(x);
  else
    return exp2f(x);
}

// The softmax of query rows q0 .. q0+15 (block m) over their scores in registers, n8 tile j holding keys
// 8j .. 8j+7 in the m16n8 accumulator layout (rows q0 + g and q0 + g + 8, a row's scores spread over the
// four lanes of a quad), shared by the bf16 versions and v8 (TF32): sc becomes exp(score - max), not yet
// normalised; inv_sum = 1 / sum (0 for a padding row); lse = max + log(sum) in natural units. Log2: a key
// block left of the diagonal holds only keys < q0 <= i, so it needs no mask when every row of the block is
// below T.
template <Exponent kExp>
__device__ __forceinline__ void softmax_row_block(float (&sc)[2 * kRowBlocks][4], float (&inv_sum)[2],
                                                  float (&lse)[2], int m, int T, float scale, int lane) {
  const int q0 = kRows * m;
  const int rows[2] = {q0 + lane / 4, q0 + lane / 4 + 8};
  const float score_scale = scale * kLog2e;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 2 * kRowBlocks; ++j) {
    if (j / 2 > m) continue;
    const bool masked = j / 2 == m || q0 + kRows > T;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = rows[e / 2], key = 8 * j + 2 * (lane % 4) + e % 2;
      sc[j][e] = !masked || (key <= i && i < T) ? score_scale * sc[j][e] : -INFINITY;
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
      sc[j][e] = exp2_of<kExp>(sc[j][e] - row_max[e / 2]);
      row_sum[e / 2] += sc[j][e];
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(kFullWarp, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(kFullWarp, row_sum[h], 2);
    inv_sum[h] = row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
    lse[h] = row_max[h] * kLn2 + logf(row_sum[h]);
  }
}

// The two products of a forward row block with key block kb (keys 16 kb .. 16 kb + 15), shared by both forms
// below: its scores q k^T accumulated into two n8 tiles (keys 16 kb .. +7 and +8 .. +15), and o += p v with
// p the A operand of that key block's probabilities.
__device__ __forceinline__ void accumulate_key_block_scores(float (&lo)[4], float (&hi)[4],
                                                            const unsigned (&qa)[kHeadDim / 16][4], const bf16* k,
                                                            int kb, int lane) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    unsigned b[4];
    load_b_rows_n(b, k, kRowStride, 16 * kk, 16 * kb, lane);
    mma16816<bf16>(lo, qa[kk], b[0], b[1]);
    mma16816<bf16>(hi, qa[kk], b[2], b[3]);
  }
}
__device__ __forceinline__ void accumulate_key_block_values(float (&o)[kHeadDim / 8][4], const unsigned (&pa)[4],
                                                            const bf16* v, int kb, int lane) {
#pragma unroll
  for (int dn = 0; dn < kHeadDim / 16; ++dn) {
    unsigned b[4];
    load_b_rows_k(b, v, kRowStride, 16 * kb, 16 * dn, lane);
    mma16816<bf16>(o[2 * dn], pa, b[0], b[1]);
    mma16816<bf16>(o[2 * dn + 1], pa, b[2], b[3]);
  }
}

// v7's forward of the same row block: the keys walked 16 at a time with FlashAttention-2's online softmax
// (a running row maximum, the output and this lane's partial row sum rescaled when it grows, one division
// at the end) in place of the retired v4 .. v6's one pass over every score. Nsight Compute on v6's forward
// inside the b512 lab counted 29 instructions per HMMA and 47% of issue slots busy: the
// one-pass form keeps 16 score tiles per lane in registers behind a run-time bound (m), so every tile
// pays a branch, its mask test and two multiplications (scale, 1/sum) whether it holds keys or not. Here
// a tile is only ever a live one, the scale rides in the exponent's FFMA, the mask is applied to the
// diagonal tile (or a block crossing T) only and 1/sum to the 16 x 64 output once; exponentials as
// Exponent::log2_approx. Same lse to fp32 rounding; p is rounded to bf16 before its normalisation
// (FlashAttention-2's order) instead of after.
__device__ __forceinline__ void attend_row_block_online(float (&o)[kHeadDim / 8][4], float (&lse)[2], const bf16* q,
                                                        const bf16* k, const bf16* v, int m, int T, float scale,
                                                        int lane) {
  const int q0 = kRows * m;
  unsigned qa[kHeadDim / 16][4];
  load_row_block_a(qa, q, q0, lane);
  const float score_scale = scale * kLog2e;
  const int rows[2] = {q0 + lane / 4, q0 + lane / 4 + 8};
  const bool block_crosses_T = q0 + kRows > T;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};  // max in log2 units; sum per lane
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  for (int kb = 0; kb <= m; ++kb) {
    float s[2][4] = {};
    accumulate_key_block_scores(s[0], s[1], qa, k, kb, lane);
    if (kb == m || block_crosses_T) {
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = rows[e / 2], key = kRows * kb + 8 * j + 2 * (lane % 4) + e % 2;
          if (!(key <= i && i < T)) s[j][e] = -INFINITY;
        }
    }
    // The running maximum moves only when some row of the warp has grown past it by more than
    // kRescaleSlack (FlashAttention-4's conditional rescaling): until then p = 2^(s - max) may reach
    // 2^kRescaleSlack, which fp32 sums and bf16 rounds (relative precision) as well as p <= 1, and the
    // final 1/sum and lse use whichever maximum was kept, so the result is the same up to rounding. A
    // row block rescales on its first live tile and then rarely, instead of 32 multiplications a tile.
    float grown[2];
    bool behind = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarp, tile_max, 2));
      grown[h] = fmaxf(row_max[h], score_scale * tile_max);
      behind = behind || grown[h] > row_max[h] + kRescaleSlack;  // always true on a row's first live tile
    }
    if (__any_sync(kFullWarp, behind)) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // every key so far masked (a padding row): the maximum stays -inf and every p 0
        const float rescale = grown[h] == -INFINITY ? 1.0f : fast_exp2(row_max[h] - grown[h]);
        row_max[h] = grown[h];
        row_sum[h] *= rescale;
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n) {
          o[n][2 * h] *= rescale;
          o[n][2 * h + 1] *= rescale;
        }
      }
    }
    const float base[2] = {row_max[0] == -INFINITY ? 0.0f : row_max[0], row_max[1] == -INFINITY ? 0.0f : row_max[1]};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = fast_exp2(fmaf(s[j][e], score_scale, -base[e / 2]));
        row_sum[e / 2] += s[j][e];
      }
    unsigned pa[4];
    accumulators_as_a(pa, s, 0);
    accumulate_key_block_values(o, pa, v, kb, lane);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(kFullWarp, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(kFullWarp, row_sum[h], 2);
    const float inv_sum = row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[n][2 * h] *= inv_sum;
      o[n][2 * h + 1] *= inv_sum;
    }
    lse[h] = (row_max[h] == -INFINITY ? 0.0f : row_max[h]) * kLn2 + logf(row_sum[h]);
  }
}

// One head's backward operands in shared memory, prepared as the products see them.
struct BackwardSmem {
  bf16 q[kHeadElements], k[kHeadElements], v[kHeadElements], dout[kHeadElements];
  bf16 ds_t[kMaxT * kDsStride];  // ds^T [key][query], bf16: the dq product's operand
  float lse[kMaxT], delta[kMaxT];  // lse in log2 units (times log2(e)) for Exponent::log2 and log2_approx
};

// The log2 backward's element-wise step (kExp log2 or log2_approx) on the n8 tiles of p^T and
// dp^T = v dout^T (keys key0 + g and + 8, queries qc + 8n + 2t and + 1, the m16n8 accumulator layout), shared
// by the bf16 versions and v8 (TF32): p^T = exp2(score_scale k q^T - lse) and ds^T = p^T (dp^T - delta) in
// place, lse (in log2 units) and delta per query; masked: the causal and T masks applied (else every pair
// is kept). kSelectMasked (the lab's v39): a masked chunk's exponents computed for every pair and the masked ones
// dropped by a select, straight-line code; else the compiler branches around each masked pair's exponent, about
// four times an unmasked pair's instructions. The same values either way.
template <Exponent kExp, int kTiles, bool kSelectMasked = false>
__device__ __forceinline__ void probabilities_and_ds(float (&pt)[kTiles][4], float (&dst)[kTiles][4],
                                                     const float* lse, const float* delta, int key0, int qc,
                                                     bool masked, float score_scale, int T, int lane) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    const int query = qc + 8 * n + 2 * (lane % 4);  // and query + 1: adjacent statistics
    const float2 lse2 = *reinterpret_cast<const float2*>(lse + query);
    const float2 delta2 = *reinterpret_cast<const float2*>(delta + query);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + lane / 4 + 8 * (e / 2), q = query + e % 2;
      const bool keep = !masked || (key <= q && q < T);
      float p;
      if constexpr (kSelectMasked) {
        const float x = exp2_of<kExp>(score_scale * pt[n][e] - (e % 2 ? lse2.y : lse2.x));
        p = keep ? x : 0.0f;
      } else {
        p = keep ? exp2_of<kExp>(score_scale * pt[n][e] - (e % 2 ? lse2.y : lse2.x)) : 0.0f;
      }
      pt[n][e] = p;
      dst[n][e] = p * (dst[n][e] - (e % 2 ? delta2.y : delta2.x));
    }
  }
}

// dv = p^T dout and dk = ds^T q (unscaled) of the key rows key0 .. key0+15 (block kb), over the queries from
// the key block's chunk of 32 to T: p^T = exp(scale k q^T - lse), ds^T = p^T (v dout^T - delta) rounded to
// bf16; the same bf16 ds^T goes to sm.ds_t for the dq product.
template <Exponent kExp>
__device__ __forceinline__ void key_block_gradients(float (&dv)[kHeadDim / 8][4], float (&dk)[kHeadDim / 8][4],
                                                    BackwardSmem& sm, int kb, int T, float scale, int lane) {
  const int key0 = kRows * kb;
  const int query_end = (T + kQueryChunk - 1) / kQueryChunk * kQueryChunk;
  unsigned ka[kHeadDim / 16][4], va[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    load_a(ka[kk], sm.k, kRowStride, key0, 16 * kk, lane);
    load_a(va[kk], sm.v, kRowStride, key0, 16 * kk, lane);
  }
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
    // Every key of the block precedes every query of the chunk, and every query is below T: no mask.
    const bool masked = qc < key0 + kRows || qc + kQueryChunk > T;
    probabilities_and_ds<kExp>(pt, dst, sm.lse, sm.delta, key0, qc, masked, scale * kLog2e, T, lane);
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
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int key = key0 + lane / 4 + 8 * half, query = qc + 8 * n + 2 * (lane % 4);
        *reinterpret_cast<unsigned*>(sm.ds_t + key * kDsStride + query) =
            pack_bf16(dst[n][2 * half], dst[n][2 * half + 1]);
      }
  }
}

// dq = ds k (unscaled) of query rows q0 .. q0+15 (block m): key blocks 0 .. m, whose ds^T key_block_gradients
// wrote for every query from the key block's chunk on.
__device__ __forceinline__ void query_block_dq(float (&dq)[kHeadDim / 8][4], const BackwardSmem& sm, int m,
                                               int lane) {
  const int q0 = kRows * m;
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
}

// The backward once its prologue has filled sm (q, k, v prepared, dout, lse, delta), in two phases split by a
// barrier. store(acc, scale, rotate_back, row0, part, stage) writes a finished 16-row block of part 0, 1, 2
// (dq, dk, dv): times scale, rotated back for dq and dk; stage is where it may stage the block (16 rows of
// shared memory, or v9's DsColumnStage).
// Key phase: each warp's key blocks (dv, dk, and ds^T into shared memory), staged in the key block's v rows,
// which only this warp read. It reads q, v, dout, lse and delta; nothing after it does.
template <Exponent kExp, typename Store>
__device__ __forceinline__ void backward_key_blocks(BackwardSmem& sm, int T, float scale, Store store) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int pass = 0; pass < 2; ++pass) {
    const int kb = warp_row_block(warp, pass), key0 = kRows * kb;
    if (key0 >= T) continue;
    float dv[kHeadDim / 8][4], dk[kHeadDim / 8][4];
    key_block_gradients<kExp>(dv, dk, sm, kb, T, scale, lane);
    __syncwarp();
    bf16* stage = sm.v + key0 * kRowStride;
    store(dv, 1.0f, false, key0, 2, stage);
    store(dk, scale, true, key0, 1, stage);
  }
}
// Query phase, after the barrier: each warp's query blocks (dq = ds k), reading ds^T and k only; block q0's
// stage is stage_of(q0).
template <typename Store, typename StageOf>
__device__ __forceinline__ void backward_query_blocks(const BackwardSmem& sm, int T, float scale, Store store,
                                                      StageOf stage_of) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int pass = 0; pass < 2; ++pass) {
    const int m = warp_row_block(warp, pass), q0 = kRows * m;
    if (q0 >= T) continue;
    float dq[kHeadDim / 8][4];
    query_block_dq(dq, sm, m, lane);
    __syncwarp();
    store(dq, scale, true, q0, 0, stage_of(q0));
  }
}
// Both phases, dq staged in the query block's q rows (no product reads q after the barrier).
template <Exponent kExp, typename Store>
__device__ __forceinline__ void backward_row_blocks(BackwardSmem& sm, int T, float scale, Store store) {
  backward_key_blocks<kExp>(sm, T, scale, store);
  __syncthreads();
  backward_query_blocks(sm, T, scale, store, [&](int q0) { return sm.q + q0 * kRowStride; });
}

}  // namespace roofbench::gpt::cuda::attention::mma
