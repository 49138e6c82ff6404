// What the fused attention versions share: the shape constants, RoPE's rotation, where a head's rows
// live, the kernels' arguments, and the launchers of each version (attention.cu dispatches between them).
//   v1 (attention.cu): SIMT fp32 block matmuls, one block per (sequence, head, 32-row tile): a lab version.
//   v3 (attention_v3.cu): WMMA tensor-core tiles (TF32, or bf16 for R2) walked in turn by one block per
//      (sequence, head), each row loaded once, the next tile's loads overlapping the current tile's
//      products: a lab version, fp32 (on TF32) and bf16.
//   v4 (attention_v4.cu): bf16 only, mma.sync with the scores in registers (attention_mma.cuh).
//   v5, v6, v7 (attention_v5.cu): v4's arithmetic, rows moved by cp.async; v5's forward persistent, v6's one
//      block per head, v7's that with the online softmax of attention_mma.cuh.
//   v9 (attention_v5.cu): v7 with a persistent backward that fetches each block's next head ahead (the keeper
//      of R2 and up).
//   v8 (attention_v8.cu): fp32 only, v5's structure on TF32 tensor cores (mma.sync m16n8k8, the scores in
//      registers through a permuted k), 8 warps per block: R1's keeper.
//   (v2, the same tiles as v3 one block per 32-row tile, is retired: v3 superseded it.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {

inline constexpr int kHeadDim = 64;
inline constexpr int kMaxT = 128;

// (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos), with sin negated for the backward (the transpose).
__device__ inline float2 rotate(float x0, float x1, float cos, float sin) {
  return make_float2(x0 * cos - x1 * sin, x0 * sin + x1 * cos);
}

// Where one head's rows live in the [N, 3C] qkv (part 0, 1, 2 = q, k, v) or an [N, C] tensor.
struct HeadRows {
  int b, h, T, C;
  __device__ std::size_t qkv_at(int t, int part) const {
    return (static_cast<std::size_t>(b) * T + t) * 3 * C + static_cast<std::size_t>(part) * C + h * kHeadDim;
  }
  __device__ std::size_t rows_at(int t) const {
    return (static_cast<std::size_t>(b) * T + t) * C + h * kHeadDim;
  }
  __device__ std::size_t stats_at(int t, int heads) const {
    return (static_cast<std::size_t>(b) * heads + h) * T + t;
  }
};

// Columns c .. c+3 (c a multiple of 4) of row t of q, k or v (part 0, 1, 2) as the products see them: bias
// added, q and k rotated (pairs (c, c+1) and (c+2, c+3)).
__device__ inline float4 prepare_qkv_quad(float4 x, const float* bias, RopeTable rope, const HeadRows& at, int part,
                                          int t, int c) {
  constexpr int kPairs = kHeadDim / 2;
  const float* head_bias = bias + part * at.C + at.h * kHeadDim;
  x = make_float4(x.x + head_bias[c], x.y + head_bias[c + 1], x.z + head_bias[c + 2], x.w + head_bias[c + 3]);
  if (part < 2) {
    const int i = c / 2;
    const float2 lo = rotate(x.x, x.y, rope.cos[t * kPairs + i], rope.sin[t * kPairs + i]);
    const float2 hi = rotate(x.z, x.w, rope.cos[t * kPairs + i + 1], rope.sin[t * kPairs + i + 1]);
    x = make_float4(lo.x, lo.y, hi.x, hi.y);
  }
  return x;
}

// The grid of the versions that run one block per (sequence, head).
inline dim3 head_grid(const AttentionShape& s) {
  return dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
}

struct FusedArgs {
  AttentionShape s;
  float scale;
  RopeTable rope;
};

// v3's launchers (attention_v3.cu); the shape is checked by the caller.
void configure_v3();
void forward_v3(float* out, float* lse, const float* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream);
void backward_v3(float* dqkv, float* delta, const float* dout, const float* out, const float* lse,
                 const float* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream);
// The same kernels on bf16 tensors (R2): bf16 tensor cores, fp32 softmax and accumulation.
void forward_v3(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, const float* qkv_bias,
                const FusedArgs& args, cudaStream_t stream);
void backward_v3(__nv_bfloat16* dqkv, float* delta, const __nv_bfloat16* dout, const __nv_bfloat16* out,
                 const float* lse, const __nv_bfloat16* qkv, const float* qkv_bias, const FusedArgs& args,
                 cudaStream_t stream);

// v4's launchers (attention_v4.cu), bf16 only: mma.sync tensor cores, one block of four warps per
// (sequence, head), the whole backward in one kernel (delta computed there, not written).
void configure_v4();
void forward_v4(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, const float* qkv_bias,
                const FusedArgs& args, cudaStream_t stream);
void backward_v4(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* out, const float* lse,
                 const __nv_bfloat16* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream);

// v5's launchers (attention_v5.cu), bf16 only, v4's arithmetic: a persistent forward (grid sized by
// configure_v5 to what fits on the GPU at once), the backward one block per (sequence, head).
void configure_v5();
void forward_v5(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, const float* qkv_bias,
                const FusedArgs& args, cudaStream_t stream);
void backward_v5(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* out, const float* lse,
                 const __nv_bfloat16* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream);
// v6: v5's forward kernel one block per head (four per SM, no fetching ahead); its backward is v5's.
// v7: v6 with each row block's softmax online (attend_row_block_online), its backward v5's kernel, both
// with the exponentials as Exponent::log2_approx (ex2.approx).
void forward_v7(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, const float* qkv_bias,
                const FusedArgs& args, cudaStream_t stream);
void backward_v7(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* out, const float* lse,
                 const __nv_bfloat16* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream);
void forward_v6(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, const float* qkv_bias,
                const FusedArgs& args, cudaStream_t stream);
// v9: v7's forward; its backward v7's kernel made persistent, each block fetching its next head's rows
// while it finishes this one.
void backward_v9(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* out, const float* lse,
                 const __nv_bfloat16* qkv, const float* qkv_bias, const FusedArgs& args, cudaStream_t stream);

// v8's launchers (attention_v8.cu), fp32 only: mma.sync m16n8k8 on tf32, one block of eight warps per
// (sequence, head), the whole backward in one kernel (delta computed there, not written).
void configure_v8();
void forward_v8(float* out, float* lse, const float* qkv, const float* qkv_bias, const FusedArgs& args,
                cudaStream_t stream);
void backward_v8(float* dqkv, const float* dout, const float* out, const float* lse, const float* qkv,
                 const float* qkv_bias, const FusedArgs& args, cudaStream_t stream);

}  // namespace roofbench::gpt::cuda::attention
