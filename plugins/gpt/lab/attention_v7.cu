// Fused causal attention with RoPE, version 7 (bf16, the kernel lab's lab_attention_bf16). Its forward is the
// one v9 runs (plugins/gpt/cuda/attention_v9.cu: one block per head, the softmax online on ex2.approx); its
// backward, here, is one block per (sequence, head): q, k, v, dout and out arrive by cp.async straight into
// shared memory (out into the ds^T buffer, free until delta is taken), prepared as the forward's, lse and
// delta read in pairs, and dv, dk, dq staged through shared memory into 128-byte row stores
// (attention_rows.cuh). Its 110 KB of shared memory leave no room for a second buffer at two blocks per SM;
// v9 made it persistent, fetching each block's next head within the same 110 KB, with the same arithmetic in
// the same order: the same bits (the lab's GPU tests hold them so). Registers (ptxas, sm_90): 195, no spills.
#include <cuda_bf16.h>

#include <string>

#include "attention_common.cuh"
#include "attention_mma.cuh"
#include "attention_rows.cuh"
#include "attention_versions.hpp"
#include "common.cuh"
#include "roofbench/cuda.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__device__ __forceinline__ void backward_head(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                              const bf16* qkv, const float* bias, const FusedArgs& args) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  BackwardSmem& sm = *reinterpret_cast<BackwardSmem*>(smem_bytes);
  static_assert(kHeadElements <= kMaxT * kDsStride, "out's rows wait in the ds^T buffer");
  const AttentionShape& s = args.s;
  const HeadRows at{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), s.T, s.channels()};
  const int lane = threadIdx.x % 32;
  {
    bf16* out_rows = sm.ds_t;  // until delta is taken; ds^T is first written after the barrier below
    fetch_rows_async(sm.q, qkv, at, 0);
    fetch_rows_async(sm.k, qkv, at, 1);
    fetch_rows_async(sm.v, qkv, at, 2);
    fetch_rows_async(sm.dout, dout, at, -1);
    fetch_rows_async(out_rows, out, at, -1);
    cp_async_commit();
    load_lse_log2<kThreads>(sm.lse, lse, at, s.heads);
    HeadPreparation prep;
    prep.load(bias, args.rope, at);
    cp_async_wait<0>();
    prep.apply(sm.q, sm.k, sm.v, at);
    store_delta(sm.delta, sm.dout, [&](int it) {
      return *reinterpret_cast<const uint4*>(out_rows + chunk_row(it) * kRowStride + chunk_column(it));
    });
  }
  __syncthreads();

  backward_row_blocks<Exponent::log2_approx>(
      sm, s.T, args.scale,
      [&](const float(&acc)[kHeadDim / 8][4], float scale, bool rotate_back, int row0, int part, bf16* stage) {
        store_head_block_staged(dqkv, RowStage{stage}, acc, scale, rotate_back, args.rope, row0, s.T, lane,
                                [&](int t) { return at.qkv_at(t, part); });
      });
}

__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_v7_backward_kernel(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                       const bf16* qkv, const float* bias, FusedArgs args) {
  backward_head(dqkv, dout, out, lse, qkv, bias, args);
}

// Set by configure_backward, after the kernel's shared-memory limit: launched before it, the kernel would
// fail with a bare "invalid argument".
bool g_backward_configured = false;

void configure_backward() {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fused_attention_v7_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(BackwardSmem))));
  g_backward_configured = true;
}

void launch_backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                     const float* qkv_bias, const FusedArgs& args, cudaStream_t stream) {
  if (!g_backward_configured) throw Error("gpt: attention v7 backward runs after attention_v7_configure()");
  check_head_operands_aligned("v7 backward", out, qkv, qkv_bias, args.rope);
  check_aligned16(dqkv, "v7 backward", "dqkv");
  check_aligned16(dout, "v7 backward", "dout");
  fused_attention_v7_backward_kernel<<<head_grid(args.s), kThreads, sizeof(BackwardSmem), stream>>>(
      dqkv, dout, out, lse, qkv, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v7_configure() {
  fused_attention_v9_configure();  // the forward, v9's
  attention::configure_backward();
}

void attention_v7_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                          const AttentionShape& s, cudaStream_t stream) {
  attention::forward_v9(out, lse, qkv, qkv_bias, attention::fused_args(s, rope), stream);
}

void attention_v7_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                           const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  attention::launch_backward(dqkv, dout, out, lse, qkv, qkv_bias, attention::fused_args(s, rope), stream);
}

}  // namespace roofbench::gpt::cuda::lab
