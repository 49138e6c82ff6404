// Fused causal attention with RoPE, version 4 (a lab version; v5-v9 build on its products): the
// flash-attention-2 layout on bf16 tensor cores through mma.sync m16n8k16 (fp32 accumulation) and
// ldmatrix, for the training shape (T <= 128, head dim 64). One block of four warps owns a whole (sequence,
// head): its q, k, v (bias added, q and k rotated, rounded to bf16 as v3 does) and, in the backward, dout
// fit in shared memory, so every row is read from memory once.
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
// Inside R3 on the H200 (6 layers a step) the backward, one kernel, takes 3262 us against v3's two kernels'
// 7793; the forward still moves only ~1.2 TB/s, and what v5 changed for it is in attention_v5.cu.
//
// The products live in attention_mma.cuh, shared with v5, which keeps v4's arithmetic and moves the rows
// differently. Moving them there (the same code in __forceinline__ functions) lowered ptxas's register
// count from 168 to 128 in the forward (3 -> 4 blocks per SM by registers) and from 238 to 175 in the
// backward.
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "attention_common.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "roofbench/cuda.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

using bf16 = __nv_bfloat16;
using namespace mma;

// Every row 0 .. kMaxT-1 of one head's q, k or v (part 0, 1, 2, prepared as the products see them) or of an
// [N, C] tensor (part < 0), moved to shared memory [kMaxT][kRowStride] in two steps: fetch() issues all of
// a thread's 16-byte loads at once (zero from row T on, so padding adds nothing to any product), commit()
// prepares and stores them. A block fetches every tensor it needs before committing any, so the loads of
// a block travel together instead of one round trip per row.
struct HeadFetch {
  uint4 raw[kChunksPerThread];

  __device__ void fetch(const bf16* src, const HeadRows& at, int part) {
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      const int r = chunk_row(it), c = chunk_column(it);
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
      const int r = chunk_row(it), c = chunk_column(it);
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

struct ForwardSmemV4 {
  bf16 q[kHeadElements], k[kHeadElements], v[kHeadElements];
};

__global__ void __launch_bounds__(kThreads)
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
    float o[kHeadDim / 8][4], row_lse[2];
    attend_row_block<Exponent::natural>(o, row_lse, sm.q, sm.k, sm.v, m, s.T, args.scale, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q0 + lane / 4 + 8 * h;
      if (lane % 4 == 0 && row < s.T) lse[at.stats_at(row, s.heads)] = row_lse[h];
    }
    store_head_block(out, o, 1.0f, false, args.rope, q0, s.T, lane, [&](int t) { return at.rows_at(t); });
  }
}

__global__ void __launch_bounds__(kThreads)
    fused_attention_v4_backward_kernel(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                       const bf16* qkv, const float* bias, FusedArgs args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  BackwardSmem& sm = *reinterpret_cast<BackwardSmem*>(smem_bytes);
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int lane = threadIdx.x % 32;
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
    // thread's chunks are kThreads apart, a multiple of kChunksPerRow), summed with shuffles among them.
    HeadFetch fout;
    fout.fetch(out, at, -1);
    for (int t = threadIdx.x; t < kMaxT; t += kThreads) sm.lse[t] = t < s.T ? lse[at.stats_at(t, s.heads)] : 0.0f;
#pragma unroll
    for (int it = 0; it < kChunksPerThread; ++it) {
      float dot = fo.dot(it, fout);
      for (int offset = kChunksPerRow / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullWarp, dot, offset);
      if (chunk_column(it) == 0) sm.delta[chunk_row(it)] = dot;
    }
  }
  __syncthreads();

  backward_row_blocks<Exponent::natural>(
      sm, s.T, args.scale,
      [&](const float(&acc)[kHeadDim / 8][4], float scale, bool rotate_back, int row0, int part, bf16*) {
        store_head_block(dqkv, acc, scale, rotate_back, args.rope, row0, s.T, lane,
                         [&](int t) { return at.qkv_at(t, part); });
      });
}

}  // namespace

void configure_v4() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v4_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(ForwardSmemV4))));
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v4_backward_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmem))));
}

void forward_v4(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream) {
  check_aligned16(out, "v4", "out");
  check_aligned16(qkv, "v4", "qkv");
  fused_attention_v4_forward_kernel<<<head_grid(args.s), kThreads, sizeof(ForwardSmemV4), stream>>>(
      out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

void backward_v4(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  check_aligned16(dqkv, "v4", "dqkv");
  check_aligned16(dout, "v4", "dout");
  check_aligned16(out, "v4", "out");
  check_aligned16(qkv, "v4", "qkv");
  fused_attention_v4_backward_kernel<<<head_grid(args.s), kThreads, sizeof(BackwardSmem), stream>>>(
      dqkv, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::attention
