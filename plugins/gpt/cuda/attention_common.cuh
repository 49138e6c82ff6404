// What the fused attention versions share: the shape constants, RoPE's rotation, where a head's rows
// live, the kernels' arguments, and the launchers of the keepers (attention.cu dispatches to them):
//   v8 (attention_v8.cu): fp32 only, mma.sync m16n8k8 on TF32 tensor cores with the scores in registers
//      through a permuted k, 8 warps per block: R1's keeper.
//   v9 (attention_v9.cu): bf16 only, mma.sync m16n8k16 with the scores in registers (attention_mma.cuh),
//      rows moved by cp.async (attention_rows.cuh), the forward one block per head with its softmax online,
//      the backward persistent, fetching each block's next head ahead: the bf16 keeper's (v44's, R2 and up)
//      forward and backward on a device without the sm_90a path (attention_v44.cu's there).
// The kernel lab's other versions (plugins/gpt/lab) build on the same pieces.
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

// The grid of the versions that run one block per (sequence, head).
inline dim3 head_grid(const AttentionShape& s) {
  return dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
}

struct FusedArgs {
  AttentionShape s;
  float scale;
  RopeTable rope;
  float* column_partials = nullptr;  // a backward that sums dqkv's columns (qkv_bias_sums): [batch][3C]
};

// The fused attention's arguments for shape s, the shape checked (check_fused_attention_shape).
FusedArgs fused_args(const AttentionShape& s, RopeTable rope);

// v9's launchers (attention_v9.cu), bf16 only: configure_v9 opts both kernels in to their shared memory and
// sizes the persistent backward's grid to what fits on the GPU at once.
void configure_v9();
void forward_v9(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, const float* qkv_bias,
                const FusedArgs& args, cudaStream_t stream);
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
