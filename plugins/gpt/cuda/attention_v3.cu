// Fused causal attention with RoPE, version 3 (a lab version; v8 is faster on fp32): WMMA tensor-core
// tiles with one block per (sequence, head), instead of one per (sequence, head, 32-row tile) as the
// retired v2 had. The block walks its 32-row tiles in turn and keeps what they share in shared memory: the
// forward and dq load each k and v row once (tile i adds keys 32i .. 32i+31 to those already there) instead
// of once per query tile; the dk/dv kernel walks its key tiles from the last to the first and so loads each
// q and dout row once. The next tile's rows are fetched into registers before the current tile's products
// and written to shared memory (bias and RoPE applied) after them, so the loads overlap the tensor-core
// work.
//
// One template, two element types (Elem): fp32 (R1: qkv, out, dout and dqkv fp32 in memory, the products
// on TF32) and bf16 (R2, what autocast's scaled_dot_product_attention runs: those tensors bf16 in memory,
// q, k, v, dout and the probabilities rounded to bf16 for the products). Bias and RoPE are applied, and
// the softmax, its log-sum-exp, delta and ds computed, in fp32 either way; every product accumulates in
// fp32. With bf16 the probabilities get a bf16 copy for the products and the fp32 results a staging tile
// of their own (a WMMA accumulator stores only to fp32 memory).
//
// WMMA's fragment element order is unspecified, so fragments go through shared memory
// (store_matrix_sync) before any row-dependent work; only order-independent element-wise operations (the
// TF32 rounding) touch a fragment's elements directly. Row counts are padded to the 16-row WMMA tile with
// zero rows in shared memory; the masks below keep padding out of every result.
#include <mma.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "attention_common.cuh"
#include "attention_tensor_core.cuh"
#include "common.cuh"
#include "roofbench/cuda.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

using namespace tensor_core;

// One 32-row tile of q, k or v (part 0, 1, 2 of qkv) or of an [N, C] tensor's head slice (part < 0: dout),
// moved in two steps: fetch() issues the 16-byte loads of rows t0 .. t0+count-1 into registers (zero past
// count), commit() writes them to shared memory [padded][kHeadStride] (qkv: bias added, q and k rotated;
// rows count .. padded-1 zero; padded <= 32). Between the two the block computes with the loads in flight.
inline constexpr int kQuads = kHeadDim / 4;
inline constexpr int kFetchPerThread = kTile * kQuads / kThreads;
static_assert(kTile * kQuads % kThreads == 0);
static_assert(kQuads == 16 && 32 % kQuads == 0);  // dq's delta: a row's quads fill half a warp

template <typename Elem>
struct HeadStride {
  static constexpr int value = std::is_same_v<Elem, float> ? kHeadStride : kHeadStride16;
};

template <typename Elem>
struct RowFetch {
  float4 raw[kFetchPerThread];

  __device__ void fetch(const Elem* src, const HeadRows& at, int part, int t0, int count) {
#pragma unroll
    for (int it = 0; it < kFetchPerThread; ++it) {
      const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
      raw[it] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (r < count) {
        const std::size_t row = part < 0 ? at.rows_at(t0 + r) : at.qkv_at(t0 + r, part);
        raw[it] = load4(src + row + c);
      }
    }
  }

  // bias: qkv's bias, read only for part >= 0. dst rows are HeadStride<Elem> apart.
  __device__ void commit(Elem* dst, const float* bias, RopeTable rope, const HeadRows& at, int part, int t0,
                         int count, int padded) const {
#pragma unroll
    for (int it = 0; it < kFetchPerThread; ++it) {
      const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads, c = 4 * (idx % kQuads);
      const int t = t0 + r;
      if (r >= padded) continue;
      float4 x = raw[it];
      if (r < count && part >= 0) x = prepare_qkv_quad(x, bias, rope, at, part, t, c);
      store4(dst + r * HeadStride<Elem>::value + c, x);
    }
  }
};

// scale times the gradient rows of rotated q or k (or of v) from shared memory to dqkv, rotated back: the
// gradient of the raw qkv, which is also that of its bias.
template <typename Elem>
__device__ void store_qkv_gradient_rows(Elem* dqkv, const float* src, float scale, RopeTable rope,
                                        const HeadRows& at, int part, int t0, int count) {
  constexpr int kPairs = kHeadDim / 2;
  for (int idx = threadIdx.x; idx < count * kQuads; idx += blockDim.x) {
    const int r = idx / kQuads, c = 4 * (idx % kQuads), t = t0 + r;
    const float* row = src + r * kHeadStride + c;
    float4 g = make_float4(scale * row[0], scale * row[1], scale * row[2], scale * row[3]);
    if (part < 2) {
      const int i = c / 2;
      const float2 lo = rotate(g.x, g.y, rope.cos[t * kPairs + i], -rope.sin[t * kPairs + i]);
      const float2 hi = rotate(g.z, g.w, rope.cos[t * kPairs + i + 1], -rope.sin[t * kPairs + i + 1]);
      g = make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    store4(dqkv + at.qkv_at(t, part) + c, g);
  }
}

// Shared memory of each kernel, carved in order, every buffer at a multiple of 128 bytes (WMMA wants 32);
// sized for the largest T so the opt-in happens once. With fp32 (kSplit false) the probabilities' operand
// is the score buffer itself and the results are staged in a head buffer the product no longer reads, as
// before; with bf16 both get buffers of their own.
struct Carve {
  std::size_t bytes = 0;
  template <typename T>
  constexpr std::size_t take(std::size_t count) {
    const std::size_t at = bytes;
    bytes = (bytes + count * sizeof(T) + 127) / 128 * 128;
    return at;
  }
};

template <typename Elem>
struct SmemGeometry {
  static constexpr bool kSplit = !std::is_same_v<Elem, float>;
  static constexpr int kHead = HeadStride<Elem>::value;          // head rows, Elem
  static constexpr int kP = kSplit ? kScoreStride16 : kScoreStride;  // the probabilities' operand, Elem
  static constexpr int kStage = kHeadStride;                      // staged results, fp32
};

template <typename Elem>
struct ForwardSmem : SmemGeometry<Elem> {
  using G = SmemGeometry<Elem>;
  std::size_t q = 0, k = 0, v = 0, scores = 0, p = 0, stage = 0, total = 0;
  constexpr ForwardSmem() {
    Carve c;
    q = c.take<Elem>(kTile * G::kHead);
    k = c.take<Elem>(kMaxT * G::kHead);
    v = c.take<Elem>(kMaxT * G::kHead);
    scores = c.take<float>(kTile * kScoreStride);
    p = G::kSplit ? c.take<Elem>(kTile * G::kP) : scores;
    stage = G::kSplit ? c.take<float>(kTile * G::kStage) : q;
    total = c.bytes;
  }
};

template <typename Elem>
struct BackwardDqSmem : SmemGeometry<Elem> {
  using G = SmemGeometry<Elem>;
  std::size_t q = 0, dO = 0, k = 0, v = 0, scores = 0, p = 0, scratch = 0, lse = 0, delta = 0, stage = 0, total = 0;
  constexpr BackwardDqSmem() {
    Carve c;
    q = c.take<Elem>(kTile * G::kHead);
    dO = c.take<Elem>(kTile * G::kHead);
    k = c.take<Elem>(kMaxT * G::kHead);
    v = c.take<Elem>(kMaxT * G::kHead);
    scores = c.take<float>(kTile * kScoreStride);
    p = G::kSplit ? c.take<Elem>(kTile * G::kP) : scores;
    scratch = c.take<float>(kWarps * kScratch);
    lse = c.take<float>(kTile);
    delta = c.take<float>(kTile);
    stage = G::kSplit ? c.take<float>(kTile * G::kStage) : q;
    total = c.bytes;
  }
};

template <typename Elem>
struct BackwardDkvSmem : SmemGeometry<Elem> {
  using G = SmemGeometry<Elem>;
  std::size_t k = 0, v = 0, q_all = 0, dO_all = 0, probs = 0, p = 0, scratch = 0, lse = 0, delta = 0, stage_dv = 0,
              stage_dk = 0, total = 0;
  constexpr BackwardDkvSmem() {
    Carve c;
    k = c.take<Elem>(kTile * G::kHead);
    v = c.take<Elem>(kTile * G::kHead);
    q_all = c.take<Elem>(kMaxT * G::kHead);
    dO_all = c.take<Elem>(kMaxT * G::kHead);
    probs = c.take<float>(kTile * kScoreStride);
    p = G::kSplit ? c.take<Elem>(kTile * G::kP) : probs;
    scratch = c.take<float>(kWarps * kScratch);
    lse = c.take<float>(kMaxT);
    delta = c.take<float>(kMaxT);
    // dv is stored out before dk's product starts (a barrier between): bf16 stages both in one buffer.
    stage_dv = G::kSplit ? c.take<float>(kTile * G::kStage) : k;
    stage_dk = G::kSplit ? stage_dv : v;
    total = c.bytes;
  }
};

template <typename T>
__device__ T* smem_at(unsigned char* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

// Two blocks per SM (the shared memory allows two): registers capped at 128 per thread to keep it so.
inline constexpr int kBlocksPerSm = 2;
static_assert(ForwardSmem<float>().total <= 113 * 1024 && BackwardDqSmem<__nv_bfloat16>().total <= 113 * 1024 &&
              BackwardDkvSmem<float>().total <= 113 * 1024 && BackwardDkvSmem<__nv_bfloat16>().total <= 113 * 1024);

// One block per (sequence, head): the query tiles in turn, keys and values accumulating in shared memory.
template <typename Elem>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fused_attention_v3_forward_kernel(Elem* out, float* lse, const Elem* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem[];
  using L = ForwardSmem<Elem>;
  constexpr L layout;
  constexpr int kHs = L::kHead, kPs = L::kP;
  Elem* q = smem_at<Elem>(smem, layout.q);            // [32][kHs]: the tile's queries
  Elem* k = smem_at<Elem>(smem, layout.k);            // [128][kHs]: keys 0 .. the tile's last
  Elem* v = smem_at<Elem>(smem, layout.v);            // [128][kHs]
  float* scores = smem_at<float>(smem, layout.scores);  // [32][kScoreStride]: scores (fp32: then probabilities)
  Elem* p = smem_at<Elem>(smem, layout.p);            // [32][kPs]: the probabilities, p v's operand
  float* stage = smem_at<float>(smem, layout.stage);  // [32][kHeadStride]: the tile's output (fp32: in q)
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  RowFetch<Elem> fq, fk, fv;  // the next tile's rows of q, k and v
  fq.fetch(qkv, at, 0, 0, min(kTile, s.T));
  fk.fetch(qkv, at, 1, 0, min(kTile, s.T));
  fv.fetch(qkv, at, 2, 0, min(kTile, s.T));
  for (int q0 = 0; q0 < s.T; q0 += kTile) {
    const int rows = min(kTile, s.T - q0), keys = q0 + rows;  // causal: keys < keys
    const int rows_pad = pad16(rows), keys_pad = pad16(keys);
    // The previous tile is done with q and the scores (the barrier that closed it); its keys and values stay,
    // this tile's join them at rows q0 .. q0+rows-1 (zero up to keys_pad = q0 + rows_pad).
    fq.commit(q, bias, args.rope, at, 0, q0, rows, rows_pad);
    fk.commit(k + q0 * kHs, bias, args.rope, at, 1, q0, rows, rows_pad);
    fv.commit(v + q0 * kHs, bias, args.rope, at, 2, q0, rows, rows_pad);
    __syncthreads();
    if (const int next = q0 + kTile; next < s.T) {  // the next tile's loads fly while this one computes
      const int next_rows = min(kTile, s.T - next);
      fq.fetch(qkv, at, 0, next, next_rows);
      fk.fetch(qkv, at, 1, next, next_rows);
      fv.fetch(qkv, at, 2, next, next_rows);
    }

    // scores = q k^T: k's rows read as the columns of a column-major k^T.
    tensor_core_matmul<RowMajor, ColMajor>(rows_pad, keys_pad, kHeadDim, q, kHs, k, kHs,
                                           StoreTile{scores, kScoreStride});
    __syncthreads();

    // A warp per row: softmax over the keys j <= q0 + i; zero above the diagonal, in the padding columns
    // and in the padding rows (p v then adds nothing from them).
    for (int i = warp; i < rows_pad; i += kWarps) {
      const float* row = scores + i * kScoreStride;
      Elem* p_row = p + i * kPs;  // fp32: row itself
      if (i >= rows) {
        for (int j = lane; j < keys_pad; j += 32) p_row[j] = from_float<Elem>(0.0f);
        continue;
      }
      const int last = q0 + i;  // the last key this query sees
      float max = -INFINITY;
      for (int j = lane; j <= last; j += 32) max = fmaxf(max, args.scale * row[j]);
      max = warp_max(max);
      float sum = 0;
      for (int j = lane; j <= last; j += 32) sum += expf(args.scale * row[j] - max);
      sum = warp_sum(sum);
      const float inv_sum = 1.0f / sum;
      for (int j = lane; j < keys_pad; j += 32)
        p_row[j] = from_float<Elem>(j <= last ? expf(args.scale * row[j] - max) * inv_sum : 0.0f);
      if (lane == 0) lse[at.stats_at(q0 + i, s.heads)] = max + logf(sum);
    }
    __syncthreads();

    // out = p v into the staging tile (fp32: q's buffer, last read by the score product), then to memory.
    tensor_core_matmul<RowMajor, RowMajor>(rows_pad, kHeadDim, keys_pad, p, kPs, v, kHs,
                                           StoreTile{stage, kHeadStride});
    __syncthreads();
    for (int idx = threadIdx.x; idx < rows * kQuads; idx += blockDim.x) {
      const int r = idx / kQuads, c = 4 * (idx % kQuads);
      store4(out + at.rows_at(q0 + r) + c, load4(stage + r * kHeadStride + c));
    }
    __syncthreads();  // the output has left q before the next tile's queries land there
  }
}

// dq, one block per (sequence, head), the query tiles in turn (keys and values accumulating as in the
// forward): p = exp(scale q.k - lse), ds = p (dout.v - delta), dq = scale ds k. Also writes
// delta = rowsum(dout * out) for the dk/dv kernel that runs next (from out's rows, fetched with the rest).
template <typename Elem>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fused_attention_v3_backward_dq_kernel(Elem* dqkv, float* delta, const Elem* dout, const Elem* out,
                                          const float* lse, const Elem* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem[];
  using L = BackwardDqSmem<Elem>;
  constexpr L layout;
  constexpr int kHs = L::kHead, kPs = L::kP;
  Elem* q = smem_at<Elem>(smem, layout.q);                // [32][kHs]
  Elem* dO = smem_at<Elem>(smem, layout.dO);              // [32][kHs]
  Elem* k = smem_at<Elem>(smem, layout.k);                // [128][kHs]
  Elem* v = smem_at<Elem>(smem, layout.v);                // [128][kHs]
  float* scores = smem_at<float>(smem, layout.scores);    // [32][kScoreStride]: p, then ds
  Elem* ds_operand = smem_at<Elem>(smem, layout.p);       // [32][kPs]: ds for the dq product (fp32: scores)
  float* scratch = smem_at<float>(smem, layout.scratch);  // [kWarps][16 x 16]
  float* row_lse = smem_at<float>(smem, layout.lse);      // [32]
  float* row_delta = smem_at<float>(smem, layout.delta);  // [32]
  float* stage = smem_at<float>(smem, layout.stage);      // [32][kHeadStride]: dq, rotated, unscaled (fp32: q)
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* mine = scratch + warp * kScratch;

  // The rows t0 .. t0+31 (those below T) of q, dout, out, k and v, and the log-sum-exp of row t0 + thread
  // (threads 0 .. 31), into registers.
  RowFetch<Elem> fq, fo, fout, fk, fv;
  float next_lse = 0.0f;
  const auto fetch = [&](int t0) {
    const int count = min(kTile, s.T - t0);
    fq.fetch(qkv, at, 0, t0, count);
    fo.fetch(dout, at, -1, t0, count);
    fout.fetch(out, at, -1, t0, count);
    fk.fetch(qkv, at, 1, t0, count);
    fv.fetch(qkv, at, 2, t0, count);
    const int r = static_cast<int>(threadIdx.x);
    next_lse = r < count ? lse[at.stats_at(t0 + r, s.heads)] : 0.0f;
  };

  fetch(0);
  for (int q0 = 0; q0 < s.T; q0 += kTile) {
    const int rows = min(kTile, s.T - q0), keys = q0 + rows;
    const int rows_pad = pad16(rows), keys_pad = pad16(keys);
    fq.commit(q, bias, args.rope, at, 0, q0, rows, rows_pad);
    fo.commit(dO, bias, args.rope, at, -1, q0, rows, rows_pad);
    fk.commit(k + q0 * kHs, bias, args.rope, at, 1, q0, rows, rows_pad);
    fv.commit(v + q0 * kHs, bias, args.rope, at, 2, q0, rows, rows_pad);
    if (static_cast<int>(threadIdx.x) < kTile) row_lse[threadIdx.x] = next_lse;  // zero past rows

    // delta = rowsum(dout * out) in fp32 from the registers: row r's 16 quads sit in 16 consecutive threads
    // (half a warp), summed with shuffles inside the half; zero in the padding rows (their quads are zero).
#pragma unroll
    for (int it = 0; it < kFetchPerThread; ++it) {
      const int idx = static_cast<int>(threadIdx.x) + it * kThreads, r = idx / kQuads;
      const float4 g = fo.raw[it], o = fout.raw[it];
      float dot = g.x * o.x + g.y * o.y + g.z * o.z + g.w * o.w;
      for (int offset = kQuads / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullWarp, dot, offset);
      if (idx % kQuads == 0) {
        row_delta[r] = dot;
        if (r < rows) delta[at.stats_at(q0 + r, s.heads)] = dot;
      }
    }
    __syncthreads();
    if (q0 + kTile < s.T) fetch(q0 + kTile);  // the next tile's loads fly while this one computes

    // p = exp(scale q.k - lse) on each warp's own tiles, zero where masked or padded.
    tensor_core_matmul<RowMajor, ColMajor>(
        rows_pad, keys_pad, kHeadDim, q, kHs, k, kHs, [&](int m0, int n0, const auto& acc) {
          wmma::store_matrix_sync(scores + m0 * kScoreStride + n0, acc, kScoreStride, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int i = m0 + e / kMn, j = n0 + e % kMn;
            float& cell = scores[i * kScoreStride + j];
            cell = i < rows && j <= q0 + i ? expf(args.scale * cell - row_lse[i]) : 0.0f;
          }
          __syncwarp();
        });
    __syncthreads();

    // ds = p (dout.v - delta), in place of p.
    tensor_core_matmul<RowMajor, ColMajor>(
        rows_pad, keys_pad, kHeadDim, dO, kHs, v, kHs, [&](int m0, int n0, const auto& acc) {
          wmma::store_matrix_sync(mine, acc, kMn, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int i = m0 + e / kMn, j = n0 + e % kMn;
            float& cell = scores[i * kScoreStride + j];
            cell = cell * (mine[e] - row_delta[i]);
            if constexpr (L::kSplit) ds_operand[i * kPs + j] = from_float<Elem>(cell);
          }
          __syncwarp();
        });
    __syncthreads();

    // dq = ds k (scaled on the way out) into the staging tile (fp32: q's buffer, last read by the score
    // product).
    tensor_core_matmul<RowMajor, RowMajor>(rows_pad, kHeadDim, keys_pad, ds_operand, kPs, k, kHs,
                                           StoreTile{stage, kHeadStride});
    __syncthreads();
    store_qkv_gradient_rows(dqkv, stage, args.scale, args.rope, at, 0, q0, rows);
    __syncthreads();  // dq has left q, and the statistics are read, before the next tile overwrites them
  }
}

// dk and dv, one block per (sequence, head), the key tiles from the last to the first: a key tile is seen
// by the queries t >= its first key, so each tile adds its own 32 query (and dout) rows to those the later
// tiles loaded. Products are transposed (rows are keys, columns queries): p^T = exp(scale k.q - lse),
// dv = p^T dout, ds^T = p^T (v.dout - delta), dk = scale ds^T q.
template <typename Elem>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fused_attention_v3_backward_dkv_kernel(Elem* dqkv, const float* delta, const Elem* dout, const float* lse,
                                           const Elem* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem[];
  using L = BackwardDkvSmem<Elem>;
  constexpr L layout;
  constexpr int kHs = L::kHead, kPs = L::kP;
  Elem* k = smem_at<Elem>(smem, layout.k);                 // [32][kHs]
  Elem* v = smem_at<Elem>(smem, layout.v);                 // [32][kHs]
  Elem* q_all = smem_at<Elem>(smem, layout.q_all);         // [128][kHs]: query t at row t, t >= the tile's first key
  Elem* dO_all = smem_at<Elem>(smem, layout.dO_all);       // [128][kHs]: likewise
  float* probs = smem_at<float>(smem, layout.probs);       // [32][kScoreStride]: [key][query], p^T then ds^T
  Elem* operand = smem_at<Elem>(smem, layout.p);           // [32][kPs]: p^T, then ds^T, for products (fp32: probs)
  float* scratch = smem_at<float>(smem, layout.scratch);   // [kWarps][16 x 16]
  float* lse_all = smem_at<float>(smem, layout.lse);       // [128], row t at t
  float* delta_all = smem_at<float>(smem, layout.delta);   // [128], row t at t
  float* stage_dv = smem_at<float>(smem, layout.stage_dv);  // [32][kHeadStride]: dv (fp32: in k)
  float* stage_dk = smem_at<float>(smem, layout.stage_dk);  // [32][kHeadStride]: dk, rotated, unscaled (fp32: in v)
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* mine = scratch + warp * kScratch;

  // The rows t0 .. t0+31 (those below T) of k, v, q, dout and the two statistics (threads 0 .. 31, one row
  // each), into registers.
  RowFetch<Elem> fk, fv, fq, fo;
  float next_lse = 0.0f, next_delta = 0.0f;
  const auto fetch = [&](int t0) {
    const int count = min(kTile, s.T - t0);
    fk.fetch(qkv, at, 1, t0, count);
    fv.fetch(qkv, at, 2, t0, count);
    fq.fetch(qkv, at, 0, t0, count);
    fo.fetch(dout, at, -1, t0, count);
    const int r = static_cast<int>(threadIdx.x);
    next_lse = r < count ? lse[at.stats_at(t0 + r, s.heads)] : 0.0f;
    next_delta = r < count ? delta[at.stats_at(t0 + r, s.heads)] : 0.0f;
  };

  const int tiles = (s.T + kTile - 1) / kTile;
  fetch((tiles - 1) * kTile);
  for (int tile = tiles - 1; tile >= 0; --tile) {
    const int k0 = tile * kTile, keys = min(kTile, s.T - k0), queries = s.T - k0;  // query r is t = k0 + r
    const int keys_pad = pad16(keys), queries_pad = pad16(queries);
    // The later tile is done with k, v and the probabilities (the barrier that closed it); its query rows
    // stay, this tile's rows k0 .. k0+keys-1 join them (zero up to k0 + keys_pad: only the first tile
    // walked, the last one, can be partial, and its padding rows then stay zero for every later tile).
    fk.commit(k, bias, args.rope, at, 1, k0, keys, keys_pad);
    fv.commit(v, bias, args.rope, at, 2, k0, keys, keys_pad);
    fq.commit(q_all + k0 * kHs, bias, args.rope, at, 0, k0, keys, keys_pad);
    fo.commit(dO_all + k0 * kHs, bias, args.rope, at, -1, k0, keys, keys_pad);
    if (static_cast<int>(threadIdx.x) < keys_pad) {
      lse_all[k0 + static_cast<int>(threadIdx.x)] = next_lse;
      delta_all[k0 + static_cast<int>(threadIdx.x)] = next_delta;
    }
    __syncthreads();
    if (tile > 0) fetch(k0 - kTile);  // the next tile's loads fly while this one computes

    // This tile's view: query r (t = k0 + r) at row r.
    const Elem* q = q_all + k0 * kHs;
    const Elem* dO = dO_all + k0 * kHs;
    const float* row_lse = lse_all + k0;
    const float* row_delta = delta_all + k0;

    // p^T: key j (t = k0 + j) is seen by query r (t = k0 + r) when j <= r; zero elsewhere and in the padding.
    tensor_core_matmul<RowMajor, ColMajor>(
        keys_pad, queries_pad, kHeadDim, k, kHs, q, kHs, [&](int m0, int n0, const auto& acc) {
          wmma::store_matrix_sync(probs + m0 * kScoreStride + n0, acc, kScoreStride, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int j = m0 + e / kMn, r = n0 + e % kMn;
            float& cell = probs[j * kScoreStride + r];
            cell = j < keys && r < queries && j <= r ? expf(args.scale * cell - row_lse[r]) : 0.0f;
            if constexpr (L::kSplit) operand[j * kPs + r] = from_float<Elem>(cell);
          }
          __syncwarp();
        });
    __syncthreads();

    // dv = p^T dout into its staging tile (fp32: k's buffer, last read by the score product), then to memory.
    tensor_core_matmul<RowMajor, RowMajor>(keys_pad, kHeadDim, queries_pad, operand, kPs, dO, kHs,
                                           StoreTile{stage_dv, kHeadStride});
    __syncthreads();  // dv complete; p^T read for the last time
    store_qkv_gradient_rows(dqkv, stage_dv, 1.0f, args.rope, at, 2, k0, keys);

    // ds^T = p^T (v.dout - delta), in place of p^T; dout's rows read as the columns of dout^T.
    tensor_core_matmul<RowMajor, ColMajor>(
        keys_pad, queries_pad, kHeadDim, v, kHs, dO, kHs, [&](int m0, int n0, const auto& acc) {
          wmma::store_matrix_sync(mine, acc, kMn, wmma::mem_row_major);
          __syncwarp();
          for (int e = lane; e < kScratch; e += 32) {
            const int j = m0 + e / kMn, r = n0 + e % kMn;
            float& cell = probs[j * kScoreStride + r];
            cell = cell * (mine[e] - row_delta[r]);
            if constexpr (L::kSplit) operand[j * kPs + r] = from_float<Elem>(cell);
          }
          __syncwarp();
        });
    __syncthreads();

    // dk = ds^T q (scaled on the way out) into its staging tile (fp32: v's buffer, last read by the product
    // above; bf16: dv's, stored out before the barrier above).
    tensor_core_matmul<RowMajor, RowMajor>(keys_pad, kHeadDim, queries_pad, operand, kPs, q, kHs,
                                           StoreTile{stage_dk, kHeadStride});
    __syncthreads();
    store_qkv_gradient_rows(dqkv, stage_dk, args.scale, args.rope, at, 1, k0, keys);
    __syncthreads();  // dv and dk have left k and v before the next tile's keys land there
  }
}

// One block per (sequence, head).
dim3 grid(const AttentionShape& s) { return dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch)); }

// The kernels move rows 16 bytes at a time.
void check_aligned(const void* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    throw Error(std::string("gpt: attention v3 needs 16-byte aligned buffers (") + what + ")");
}

template <typename Elem>
void configure_kernels() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v3_forward_kernel<Elem>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(ForwardSmem<Elem>().total)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v3_backward_dq_kernel<Elem>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(BackwardDqSmem<Elem>().total)));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v3_backward_dkv_kernel<Elem>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(BackwardDkvSmem<Elem>().total)));
}

template <typename Elem>
void forward(Elem* out, float* lse, const Elem* qkv, const float* qkv_bias, const FusedArgs& args,
             cudaStream_t stream) {
  check_aligned(out, "out");
  check_aligned(qkv, "qkv");
  fused_attention_v3_forward_kernel<Elem><<<grid(args.s), kThreads, ForwardSmem<Elem>().total, stream>>>(
      out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

template <typename Elem>
void backward(Elem* dqkv, float* delta, const Elem* dout, const Elem* out, const float* lse, const Elem* qkv,
              const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_aligned(dqkv, "dqkv");
  check_aligned(dout, "dout");
  check_aligned(out, "out");
  check_aligned(qkv, "qkv");
  fused_attention_v3_backward_dq_kernel<Elem><<<grid(args.s), kThreads, BackwardDqSmem<Elem>().total, stream>>>(
      dqkv, delta, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
  fused_attention_v3_backward_dkv_kernel<Elem><<<grid(args.s), kThreads, BackwardDkvSmem<Elem>().total, stream>>>(
      dqkv, delta, dout, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace

void configure_v3() {
  configure_kernels<float>();
  configure_kernels<__nv_bfloat16>();
}

void forward_v3(float* out, float* lse, const float* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  forward(out, lse, qkv, qkv_bias, args, stream);
}
void forward_v3(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, const float* qkv_bias,
                const FusedArgs& args, cudaStream_t stream) {
  forward(out, lse, qkv, qkv_bias, args, stream);
}

void backward_v3(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
                 const float* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  backward(dqkv, delta, dout, out, lse, qkv, qkv_bias, args, stream);
}
void backward_v3(__nv_bfloat16* dqkv, float* delta, const __nv_bfloat16* dout, const __nv_bfloat16* out,
                 const float* lse, const __nv_bfloat16* qkv, const float* qkv_bias, const FusedArgs& args,
                 cudaStream_t stream) {
  backward(dqkv, delta, dout, out, lse, qkv, qkv_bias, args, stream);
}

}  // namespace roofbench::gpt::cuda::attention
