// Causal self-attention with RoPE, two ways.
//
// Eager (what PyTorch eager runs): rotate q and k in place in qkv's rows, batched cuBLAS matmuls on the
// heads where they lie in the rows around a materialised T x T score matrix, a separate scale + mask +
// softmax kernel, and the same pieces backwards. Those matmuls are issued by the trainer; this file holds
// the kernels between.
//
// Fused (what a compiler emits): the keepers, v8 on fp32 tensors (attention_v8.cu, R1's) and v44 on bf16
// ones (R2's and up): on a device that runs this build's sm_90a code v44's backward and v29's forward
// (attention_v44.cu) where a batch's heads fill that forward's persistent grid several times over, else
// v9's forward; elsewhere v9's forward and backward (attention_v9.cu). All read the
// raw qkv and apply the bias and RoPE on load, keep the scores on chip, write the output and one log-sum-exp
// per row, and recompute the probabilities from it in the backward (FlashAttention's trick). The kernel lab's
// other versions live in plugins/gpt/lab.
#include <algorithm>
#include <string>
#include <vector>

#include "attention_common.cuh"
#include "common.cuh"
#include "layers.hpp"
#include "roofbench/hopper_host.hpp"

namespace roofbench::gpt::cuda {
namespace {

using attention::kHeadDim;
using attention::kMaxT;
using attention::rotate;

// ---------------------------------------------------------------------------------------------------
// Eager kernels

// Pair p of the rotated channels: pair i of head h of row r, consecutive pairs along a row.
__global__ void rope_kernel(float* rows, int ld, int channels, RopeTable rope, AttentionShape s, float direction,
                            std::size_t pairs) {
  const int half = s.head_dim / 2, pairs_per_row = channels / 2;
  for (std::size_t p = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; p < pairs;
       p += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = p / pairs_per_row;
    const int in_row = static_cast<int>(p % pairs_per_row), i = in_row % half;
    const std::size_t t = r % s.T;
    const float cos = rope.cos[t * half + i], sin = direction * rope.sin[t * half + i];
    float2* x = reinterpret_cast<float2*>(rows + r * ld + 2 * in_row);  // ld and channels even: 8-byte aligned
    const float2 v = *x;
    *x = rotate(v.x, v.y, cos, sin);
  }
}

// A warp per score row; row i of each T x T block attends to keys j <= i.
__global__ void causal_softmax_forward_kernel(float* probs, const float* scores, float scale, int T,
                                              std::size_t rows) {
  const std::size_t row = blockIdx.x * std::size_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int i = static_cast<int>(row % T);
  const float* in = scores + row * T;
  float* out = probs + row * T;
  float max = -INFINITY;
  for (int j = lane; j <= i; j += 32) max = fmaxf(max, scale * in[j]);
  max = warp_max(max);
  float sum = 0;
  for (int j = lane; j <= i; j += 32) sum += expf(scale * in[j] - max);
  const float inv_sum = 1.0f / warp_sum(sum);
  for (int j = lane; j < T; j += 32) out[j] = j <= i ? expf(scale * in[j] - max) * inv_sum : 0.0f;
}

__global__ void causal_softmax_backward_kernel(float* dscores, const float* dprobs, const float* probs, float scale,
                                               int T, std::size_t rows) {
  const std::size_t row = blockIdx.x * std::size_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* p = probs + row * T;
  const float* dp = dprobs + row * T;
  float dot = 0;
  for (int j = lane; j < T; j += 32) dot += p[j] * dp[j];
  dot = warp_sum(dot);
  // Each lane reads dp[j] before writing ds[j] at the same j, so dscores may alias dprobs.
  for (int j = lane; j < T; j += 32) dscores[row * T + j] = scale * p[j] * (dp[j] - dot);
}
}  // namespace

// ---------------------------------------------------------------------------------------------------
// Launchers

namespace {
void rope(float* rows, int ld, int channels, RopeTable table, const AttentionShape& s, float direction,
          cudaStream_t stream) {
  if (channels % s.head_dim != 0 || channels > ld || ld % 2 != 0)
    throw Error("gpt: RoPE rotates whole heads within rows of an even stride");
  const std::size_t pairs = static_cast<std::size_t>(s.batch) * s.T * (channels / 2);
  rope_kernel<<<elementwise_blocks(pairs), kElementwiseThreads, 0, stream>>>(rows, ld, channels, table, s, direction,
                                                                             pairs);
  ROOFBENCH_CUDA_LAUNCH();
}
std::size_t score_rows(const AttentionShape& s) { return static_cast<std::size_t>(s.batch) * s.heads * s.T; }
}  // namespace

void rope_forward(float* rows, int ld, int channels, RopeTable table, const AttentionShape& s, cudaStream_t stream) {
  rope(rows, ld, channels, table, s, 1.0f, stream);
}

void rope_backward(float* rows, int ld, int channels, RopeTable table, const AttentionShape& s, cudaStream_t stream) {
  rope(rows, ld, channels, table, s, -1.0f, stream);
}

void causal_softmax_forward(float* probs, const float* scores, float scale, const AttentionShape& s,
                            cudaStream_t stream) {
  const std::size_t rows = score_rows(s);
  causal_softmax_forward_kernel<<<ceil_div(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(probs, scores,
                                                                                                 scale, s.T, rows);
  ROOFBENCH_CUDA_LAUNCH();
}

void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs, float scale,
                             const AttentionShape& s, cudaStream_t stream) {
  const std::size_t rows = score_rows(s);
  causal_softmax_backward_kernel<<<ceil_div(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
      dscores, dprobs, probs, scale, s.T, rows);
  ROOFBENCH_CUDA_LAUNCH();
}

void check_fused_attention_shape(const AttentionShape& s) {
  if (s.head_dim != kHeadDim || s.T < 1 || s.T > kMaxT || s.batch < 1 || s.heads < 1 || s.batch > 65535 ||
      s.heads > 65535)
    throw Error("gpt: the fused attention needs head_dim == " + std::to_string(kHeadDim) + " and 1 <= T <= " +
                std::to_string(kMaxT) + " (got head_dim " + std::to_string(s.head_dim) + ", T " +
                std::to_string(s.T) + ")");
}

const char* fp32_attention_keeper_name() {
  return "v8 (TF32 mma.sync m16n8k8, scores in registers, one block per head)";
}

namespace {

// Whether the current device runs the bf16 keeper's sm_90a kernels.
bool sm90a_runs_here() {
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  return hopper::hopper_path_available(device);
}

}  // namespace

static_assert(kSm90aForwardMinRounds == 4, "bf16_attention_keeper_name(true) says '4 heads a resident block'");

bool sm90a_forward_pays(int heads, int resident_blocks) {
  return heads >= kSm90aForwardMinRounds * resident_blocks;
}

const char* bf16_attention_keeper_name(bool sm90a) {
  return sm90a ? "v44 (v29's forward, loading each head's q a head ahead, from 4 heads a resident block, else v9's; "
                 "v38's backward with each row's delta from its scores, out unread, and its masked exponents "
                 "selected; sm_90a)"
               : "v9 (v7, backward persistent, the next head fetched ahead; no sm_90a path on this device)";
}

const char* bf16_attention_keeper_name() { return bf16_attention_keeper_name(sm90a_runs_here()); }

void fused_attention_configure() {
  attention::configure_v8();
  fused_attention_v9_configure();
  if (sm90a_runs_here()) {
    fused_attention_sm90a_forward_configure();
    fused_attention_sm90a_backward_configure();
  }
}

namespace attention {
FusedArgs fused_args(const AttentionShape& s, RopeTable table) {
  check_fused_attention_shape(s);
  return FusedArgs{s, 1.0f / sqrtf(static_cast<float>(s.head_dim)), table};
}
}  // namespace attention

void fused_attention_forward(float* out, float* lse, const float* qkv, const float* qkv_bias, RopeTable table,
                             const AttentionShape& s, cudaStream_t stream) {
  attention::forward_v8(out, lse, qkv, qkv_bias, attention::fused_args(s, table), stream);
}

void fused_attention_backward(float* dqkv, float*, const float* dout, const float* out, const float* lse,
                              const float* qkv, const float* qkv_bias, RopeTable table, const AttentionShape& s,
                              cudaStream_t stream) {
  attention::backward_v8(dqkv, dout, out, lse, qkv, qkv_bias, attention::fused_args(s, table), stream);
}

void fused_attention_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable table,
                             const AttentionShape& s, cudaStream_t stream) {
  const bool sm90a = sm90a_runs_here() && sm90a_forward_pays(s.batch * s.heads, fused_attention_sm90a_forward_grid());
  const auto forward = sm90a ? fused_attention_sm90a_forward : fused_attention_v9_forward;
  forward(out, lse, qkv, qkv_bias, table, s, stream);
}

void fused_attention_backward(bf16* dqkv, float* delta, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* qkv, const float* qkv_bias, RopeTable table, const AttentionShape& s,
                              cudaStream_t stream) {
  const auto backward = sm90a_runs_here() ? fused_attention_sm90a_backward : fused_attention_v9_backward;
  backward(dqkv, delta, dout, out, lse, qkv, qkv_bias, table, s, stream);
}

void fused_attention_backward_and_bias_gradient(bf16* dqkv, float* dbias, float* partials, float* delta,
                                                const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                                                const float* qkv_bias, RopeTable table, const AttentionShape& s,
                                                cudaStream_t stream) {
  if (sm90a_runs_here()) {
    fused_attention_sm90a_backward_and_bias_gradient(dqkv, dbias, partials, delta, dout, out, lse, qkv, qkv_bias,
                                                     table, s, stream);
    return;
  }
  fused_attention_backward(dqkv, delta, dout, out, lse, qkv, qkv_bias, table, s, stream);
  column_sum(dbias, dqkv, s.batch * s.T, 3 * s.channels(), partials, stream);
}

std::vector<float> rope_lane_ordered(const std::vector<float>& cos, const std::vector<float>& sin, int head_dim) {
  constexpr int kPairs = kRopeLaneOrderedPairs, kPerLane = kPairs / 4;
  if (head_dim != 2 * kPairs) throw Error("rope_lane_ordered: head dim " + std::to_string(head_dim) + ", not 64");
  const std::size_t T = cos.size() / kPairs;
  if (cos.size() != T * kPairs || sin.size() != cos.size())
    throw Error("rope_lane_ordered: cos and sin must both be [T, 32]");
  std::vector<float> out(2 * cos.size());
  for (std::size_t t = 0; t < T; ++t)
    for (int quad = 0; quad < 4; ++quad) {
      const std::size_t at = rope_lane_ordered_at(static_cast<int>(t), quad);
      for (int n = 0; n < kPerLane; ++n) {
        out[at + n] = cos[t * kPairs + 4 * n + quad];
        out[at + kPerLane + n] = sin[t * kPairs + 4 * n + quad];
      }
    }
  return out;
}

const char* bf16_qkv_bias_gradient_name() {
  return sm90a_runs_here()
             ? "summed by the attention backward as it stores dqkv (lab_attention_qkv_bias_bf16 v10, sm_90a)"
             : "a column-sum pass over dqkv after the attention backward (lab_attention_qkv_bias_bf16 v1)";
}

std::size_t attention_bias_partials_floats(const AttentionShape& s) {
  const int cols = 3 * s.channels();
  return std::max(column_partials_floats(s.batch * s.T, cols),
                  static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(cols));
}

void fused_attention_v9_configure() { attention::configure_v9(); }

void fused_attention_v9_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable table,
                                const AttentionShape& s, cudaStream_t stream) {
  attention::forward_v9(out, lse, qkv, qkv_bias, attention::fused_args(s, table), stream);
}

void fused_attention_v9_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse,
                                 const bf16* qkv, const float* qkv_bias, RopeTable table, const AttentionShape& s,
                                 cudaStream_t stream) {
  attention::backward_v9(dqkv, dout, out, lse, qkv, qkv_bias, attention::fused_args(s, table), stream);
}

}  // namespace roofbench::gpt::cuda
