// The GPT's layers on the GPU, llm.c style: each layer's forward and backward side by side in its own .cu
// file; this header lists their launchers. Every launcher only enqueues work on `stream` (no sync, no
// allocation), so a whole training step can be captured into a CUDA graph.
//
// Conventions (those of model.hpp and reference.cpp): N = batch * T positions, rows are positions in
// sequence-major order; matrices are row-major; linear weights are [out, in]; qkv is [N, 3C] holding
// q | k | v, head h owning channels h*hd .. h*hd+hd-1 of each. Token ids are uint8.
//
// Two families share this header: the eager ones (one operation per launch, what PyTorch eager runs) and
// the fused ones (what a compiler emits). Where both need the same operation they call the same kernel.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "layernorm_chunks.hpp"
#include "model.hpp"

namespace roofbench::gpt::cuda {

// R2's storage type for matmul operands and the activations torch.autocast keeps in bf16.
using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------------------------------------------
// matmul.cu: cuBLAS (TF32 tensor cores, fp32 storage) with row-major operands, a transpose, and column sums.

// C[M,N] = alpha op(A) op(B) + beta C, all row-major; op(X) = X^T when trans_x. lda/ldb/ldc are row
// strides. batch > 1 repeats it at the given element strides (cublasGemmStridedBatchedEx). Operands fp32
// (TF32 tensor cores unless tf32 is false) or bf16 (input_type CUDA_R_16BF: bf16 tensor cores with fp32
// accumulation, CUBLAS_COMPUTE_32F, what autocast's matmuls run); C fp32 or bf16 (c_type).
struct RowMajorGemm {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  const void* A = nullptr;
  long long lda = 0, stride_a = 0;
  const void* B = nullptr;
  long long ldb = 0, stride_b = 0;
  void* C = nullptr;
  long long ldc = 0, stride_c = 0;
  float alpha = 1, beta = 0;
  int batch = 1;
  bool tf32 = true;  // false: full fp32 products, for the few GEMMs that are sums rather than matmuls
  cudaDataType_t input_type = CUDA_R_32F;  // A and B
  cudaDataType_t c_type = CUDA_R_32F;
};
void gemm(cublasHandle_t handle, const RowMajorGemm& g);
// The same GEMM over g.batch operand sets that no single stride reaches (cublasGemmBatchedEx): device arrays
// of g.batch pointers each, one matrix of A, B and C per entry, at g's row strides (g's batch strides unused).
// R0 runs its per-head products on the heads where they lie in the rows of qkv, attn_out and their
// gradients, as PyTorch's head views do.
struct BatchPointers {
  const void* const* A = nullptr;
  const void* const* B = nullptr;
  void* const* C = nullptr;
};
void gemm(cublasHandle_t handle, const RowMajorGemm& g, const BatchPointers& batch);

// y[N, out] = x[N, in] w[out, in]^T (+ beta y): a linear layer without its bias.
void linear_forward(cublasHandle_t handle, float* y, const float* x, const float* w, int N, int in, int out,
                    float beta = 0);
// dx[N, in] = dy w (+ beta_dx dx) and dw[out, in] = dy^T x (+ beta_dw dw); dx skipped when null.
void linear_backward(cublasHandle_t handle, float* dx, float* dw, const float* dy, const float* x, const float* w,
                     int N, int in, int out, float beta_dx = 0, float beta_dw = 0);

// The cuBLASLt matmuls (the bias epilogue below, R2 and up's bf16 linears): the handle, a workspace (cuBLAS's,
// on the same stream, so never in use by two calls at once) and the stream.
struct LtWorkspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  LtWorkspace workspace;
  cudaStream_t stream = nullptr;
  std::set<std::string>* choices = nullptr;  // when given: each call's algorithm choice, as a line, added
};
// Each cuBLASLt matmul's algorithm is chosen by timing, once per process for each shape, type, alignment,
// epilogue, workspace size and device: the first call outside a graph capture times up to kLtCandidates
// algorithms of cuBLASLt's heuristic (its first) on the call's own operands (case_support::time_each:
// warm-up, then the median of groups of launches) and every later call of that kind runs the fastest, so R3
// and R4 in one worker process run the same algorithms and R4's gradients stay R3's bit for bit. Split-K
// partial sums are kept in fp32 (for a bf16 result no reduction in bf16), as autocast's fp32 accumulation
// promises. A call that accumulates (beta 1), or the first of its kind inside a capture, takes the heuristic's
// first algorithm (and keeps it). The lines a context collects name each choice, for the results' facts: the
// choice is made per process and can differ between processes where two candidates time alike
// (ROOFBENCH_ALGORITHM_CHOICE=first takes the heuristic's first that runs, in every process alike:
// case_support::first_candidate_only). A burst picks what sustained load at the power limit would: a probe on
// the H200 timed each of R3's 12 problems' 8 candidates both ways, a 1 ms burst after 300 ms idle and 0.9 s
// back to back at 700 W, and the burst's pick was the sustained one's or within 0.8% of it.
inline constexpr int kLtCandidates = 8;
// y[N, out] = x[N, in] w[out, in]^T + bias[out] in one cuBLASLt call, the bias added in the GEMM's epilogue
// (CUBLASLT_EPILOGUE_BIAS) rather than by a pass over y. type: CUDA_R_32F (x, w, y and bias fp32, TF32
// tensor cores: R1) or CUDA_R_16BF (all four bf16, fp32 accumulation, the bias added in fp32 before y is
// rounded: what autocast's linear runs). y, x and w 16-byte aligned (throws roofbench::Error otherwise).
void linear_forward_bias(const LtContext& lt, cudaDataType_t type, void* y, const void* x, const void* w,
                         const void* bias, int N, int in, int out);

// How the weight gradient dw = dy^T x is handed to cuBLAS. Its reduction runs over the N positions, the
// strided dimension of both dy and x: cuBLAS sees both operands MN-major (its column-major "nt"), and on
// Hopper it has only sm80-era TF32 kernels for that, since the TF32 wgmma of sm90 wants K-major operands.
// Transposing one operand into scratch first makes it K-major (its N contiguous). The rungs' layouts:
//   v1: no transpose, linear_backward's GEMM (R0 and R5 always run it);
//   v3: the narrower operand: x -> xt [in, N] when in < out, dw = dy^T xt^T (cuBLAS "tt"), else dy ->
//       dyt [out, N], dw = dyt x (cuBLAS "nn", the layout of the dx GEMMs: weight_gradient_dy_transposed).
// Both compute the same dw to TF32 precision. R1 runs the keeper, kFusedWgradLayout; the lab_wgrad benchmark
// times both and the lab's v2 (dy always transposed, plugins/gpt/lab/wgrad_versions.hpp).
enum class WgradLayout { v1, v3 };
inline constexpr WgradLayout kFusedWgradLayout = WgradLayout::v3;
// Floats of scratch linear_backward_kmajor needs for these sizes in `layout` (0 for v1).
std::size_t wgrad_scratch_floats(WgradLayout layout, int N, int in, int out);
// linear_backward with dw computed in `layout`; scratch holds wgrad_scratch_floats(layout, N, in, out)
// (may be null for v1). The transpose runs on the handle's stream, before the GEMM.
void linear_backward_kmajor(cublasHandle_t handle, float* dx, float* dw, const float* dy, const float* x,
                            const float* w, int N, int in, int out, WgradLayout layout, float* scratch,
                            float beta_dx = 0, float beta_dw = 0);
// dw = dy^T x (+ beta_dw dw) with dy transposed into scratch first (N * out floats, not null): dyt [out, N],
// dw = dyt x, cuBLAS "nn". v3's form where in >= out.
void weight_gradient_dy_transposed(cublasHandle_t handle, float* dw, const float* dy, const float* x, int N, int in,
                                   int out, float* scratch, float beta_dw = 0);
// out[cols, rows] = in[rows, cols]^T, row-major both (32 x 32 shared-memory tiles, coalesced both ways):
// the K-major copy of a weight gradient's operand.
void transpose(float* out, const float* in, int rows, int cols, cudaStream_t stream);

// Scratch that the two-pass column reductions (bias and LayerNorm parameter gradients) need; sized by
// column_partials_floats(). Two passes with fixed order keep the gradients deterministic, no atomics.
std::size_t column_partials_floats(int rows, int cols);
// out[c] = sum over rows of x[r, c]: a bias gradient.
void column_sum(float* out, const float* x, int rows, int cols, float* partials, cudaStream_t stream);
// The same sum, four columns per thread with 16-byte loads (R1's bias gradients); falls back to column_sum
// when cols is not a multiple of 4 or x is not 16-byte aligned. Same partials.
void column_sum_vec4(float* out, const float* x, int rows, int cols, float* partials, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// encoder.cu: the batch on the device, the embedding and its backward.

// Draws `batch` windows of T + 1 tokens at starts hashed from (seed, *draw_counter, row) and increments
// the counter: every launch (also every replay of a graph holding it) draws a new batch.
void draw_batch(std::uint8_t* inputs, std::uint8_t* targets, const std::uint8_t* corpus, std::size_t corpus_tokens,
                int batch, int T, std::uint64_t seed, unsigned long long* draw_counter, cudaStream_t stream);
// x[n, :] = wte[tokens[n], :]
void embedding_forward(float* x, const std::uint8_t* tokens, const float* wte, int N, int C, cudaStream_t stream);
// dwte += onehot(tokens)^T dx, as a GEMM over a one-hot matrix [N, V] (deterministic, no atomics).
void embedding_backward(cublasHandle_t handle, float* dwte, const float* dx, const std::uint8_t* tokens,
                        float* onehot, int N, int C, int V, cudaStream_t stream);
// The same sums gathered by token, no one-hot matrix (lab_embedding_backward's v2): blocks of 256 rows add each
// row of dx into their token's row of sums in shared memory, a thread owning 4 columns of every token's row (so
// each sum is one thread's, in row order), and write them to partials [chunk][V][C] after a copy of dwte; then
// column_finish adds them into dwte in its fixed order. Deterministic, no atomics. Every token < V; dwte, dx and
// partials (embedding_gather_partials_floats(N, C, V) floats) 16-byte aligned; embedding_gather_fits(C, V) says
// whether a block's sums fit.
bool embedding_gather_fits(int C, int V);
std::size_t embedding_gather_partials_floats(int N, int C, int V);
void embedding_backward_gather(float* dwte, const float* dx, const std::uint8_t* tokens, float* partials, int N,
                               int C, int V, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// layernorm.cu

// y = LN(x) w + b per row of C; saves mean and rstd for the backward.
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                       int C, float eps, cudaStream_t stream);
// Fused: sum = a + branch + branch_bias (the residual add), then y = LN(sum). Writes sum too: the next
// residual add and the backward read it.
void residual_layernorm_forward(float* sum, float* y, float* mean, float* rstd, const float* a, const float* branch,
                                const float* branch_bias, const float* w, const float* b, int N, int C, float eps,
                                cudaStream_t stream);
// R2's: the same in fp32 (statistics, the residual stream `sum`), y rounded to bf16 (the next matmul's
// operand), the branch read as bf16 (a bf16 matmul's output).
void layernorm_forward(bf16* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N,
                       int C, float eps, cudaStream_t stream);
void residual_layernorm_forward(float* sum, bf16* y, float* mean, float* rstd, const float* a, const bf16* branch,
                                const float* branch_bias, const float* w, const float* b, int N, int C, float eps,
                                cudaStream_t stream);
// dx = beta dx + dLN/dx (dy); dw and db written (not accumulated). partials: layernorm_partials_floats(N, C).
// dx_bf16, when given, receives dx rounded to bf16 too (R2: the residual stream's gradient as the operand
// of the bf16 matmuls below). When C is a multiple of 32 and at most 512 (the model's), dw and db's
// partial sums come out of the same pass over dy and x as dx (one block per chunk of layernorm_chunks(N)
// rows, layernorm_chunks.hpp), else a separate column-sum pass reads them again. dx_column_sum, when given,
// receives the column sums of the final dx (the bias gradient of the projection below, whose output
// gradient dx is), out of the same pass when fused.
std::size_t layernorm_partials_floats(int N, int C);
void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int N, int C, float beta, float* partials,
                        cudaStream_t stream, bf16* dx_bf16 = nullptr, float* dx_column_sum = nullptr);
// The same with dy bf16 (R2 and up: the output of the bf16 matmul below, which autocast hands over in bf16),
// widened to fp32 on load; everything else as above.
void layernorm_backward(float* dx, float* dw, float* db, const bf16* dy, const float* x, const float* mean,
                        const float* rstd, const float* w, int N, int C, float beta, float* partials,
                        cudaStream_t stream, bf16* dx_bf16 = nullptr, float* dx_column_sum = nullptr);

// ---------------------------------------------------------------------------------------------------
// elementwise.cu: the eager path's one-operation kernels.

// out = a + b (the residual add, its own launch).
void add(float* out, const float* a, const float* b, std::size_t n, cudaStream_t stream);
// out = GELU(z), exact erf form.
void gelu_forward(float* out, const float* z, std::size_t n, cudaStream_t stream);
// dz = dout * GELU'(z)
void gelu_backward(float* dz, const float* dout, const float* z, std::size_t n, cudaStream_t stream);
// out = GELU(z) with 16-byte accesses (z and out 16-byte aligned, else throws): R1's (elementwise v3), after
// the fc GEMM added the bias in its epilogue (linear_forward_bias), so the pass reads z once and writes out
// only. The versions it replaced, which added the bias themselves, are the kernel lab's
// (plugins/gpt/lab/elementwise_versions.hpp).
void gelu_forward_vectorized(float* out, const float* z, std::size_t n, cudaStream_t stream);
// Fused (R1): dz = dout * GELU'(z) and dbias = sum over rows of dz, in one pass over dout and z (16-byte
// accesses; falls back to gelu_backward + column_sum when cols % 4 != 0 or a pointer is not 16-byte
// aligned). partials: column_partials_floats(rows, cols).
void gelu_backward_bias_grad(float* dz, float* dbias, const float* dout, const float* z, int rows, int cols,
                             float* partials, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// attention.cu

// cos/sin of every (position, pair) RoPE angle, [T, hd/2] each, computed once on the host in double. lane_ordered
// (optional, hd = 64 only; the bf16 keeper's sm_90a backward and the lab's v38 and v40 to v45 read it): the same values
// grouped as an mma fragment's lane holds them, row t's pairs j, j + 4, .. j + 28 (lane % 4 == j) as 8 cos then 8 sin
// from rope_lane_ordered_at(t, j).
struct RopeTable {
  const float* cos = nullptr;
  const float* sin = nullptr;
  const float* lane_ordered = nullptr;
};
inline constexpr int kRopeLaneOrderedPairs = 32;  // hd / 2 for the head dim that has a lane-ordered table
ROOFBENCH_GPT_HOST_DEVICE inline int rope_lane_ordered_at(int t, int quad) {
  return (4 * t + quad) * kRopeLaneOrderedPairs / 2;
}
// The lane-ordered copy of a [T, 32] cos and sin table (2 T 32 floats) for head_dim 64 (else roofbench::Error).
std::vector<float> rope_lane_ordered(const std::vector<float>& cos, const std::vector<float>& sin, int head_dim);

struct AttentionShape {
  int batch = 0, T = 0, heads = 0, head_dim = 0;
  ROOFBENCH_GPT_HOST_DEVICE int channels() const { return heads * head_dim; }
};

// Eager path, the T x T score matrix materialised (what PyTorch eager runs), on heads where they lie in
// rows [N, ld] (head h of position t at channels h * hd .. h * hd + hd - 1 of row t):
// in place, rotate the heads in the first `channels` channels of every row by +angle (forward) or -angle
// (backward, the transpose); qkv's q and k are its first 2C channels.
void rope_forward(float* rows, int ld, int channels, RopeTable rope, const AttentionShape& s, cudaStream_t stream);
void rope_backward(float* rows, int ld, int channels, RopeTable rope, const AttentionShape& s, cudaStream_t stream);
// probs = softmax(scale * scores) over keys j <= i per row i of each [T, T] block; zero above the diagonal.
void causal_softmax_forward(float* probs, const float* scores, float scale, const AttentionShape& s,
                            cudaStream_t stream);
// dscores = scale * probs * (dprobs - sum_j probs dprobs); in place into dprobs allowed.
void causal_softmax_backward(float* dscores, const float* dprobs, const float* probs, float scale,
                             const AttentionShape& s, cudaStream_t stream);

// Fused path, the keepers the trainers run: the scores never leave the chip. Reads the raw qkv (before bias)
// and applies the bias and RoPE on load; writes out [N, C] and the per-row log-sum-exp [B, heads, T] the
// backward recomputes the probabilities from. Requires T <= 128, hd == 64.
//   fp32 tensors (R1): v8, mma.sync m16n8k8 on TF32 tensor cores (fp32 accumulation), the scores in
//     registers through a permuted k, eight warps per block, the backward one kernel (attention_v8.cu);
//   bf16 tensors (R2 and up): v44, whose kernels are chosen per device. On one where hopper_path_available
//     (compute capability 9.0, a build with sm_90a code): v29's forward and v44's backward (attention_v44.cu),
//     TMA and wgmma, each block one warp group walking its own heads (three forward blocks an SM, two
//     backward), each head's rows read from DRAM by its own loads alone (v22's asked the L2 for the next
//     head's ahead, and read about half its bytes twice), the forward loading each head's q a head ahead into
//     a tile of its own, the backward taking each row's delta from its scores (so it never reads out), computing
//     dq before the key phase, fetching its RoPE factors while the tensor cores compute dk and dq, 16 bytes a load
//     from the table's lane-ordered copy (which `rope` must then have), and dropping masked exponents by a select.
//     v29's forward runs where a batch's heads number at least
//     kSm90aForwardMinRounds per block of its persistent grid: with fewer, the heads' last round leaves much
//     of that grid idle, and v9's forward, a block per head at four blocks an SM, finishes first (R2's 512
//     heads took 69.4 us forward and backward with v15's forward, whose grid v29's has, against 63.8 with
//     v9's on an H200). Elsewhere v9's
//     (attention_v9.cu): mma.sync m16n8k16 with each warp's scores in registers and the rows moved by
//     cp.async, the forward one block per head with its softmax online, the backward persistent (two blocks
//     per SM walking the heads), each block fetching its next head's rows while it finishes one.
// The kernel lab (plugins/gpt/lab) times the versions these replaced; its table is in plugins/gpt/README.md.
// The keepers' names, as the rungs' facts give them (so a change of keeper shows in the results). The bf16
// keeper's says which kernels run on the current device: v44 with the sm_90a ones, or v9 without them (the
// overload: the name with the sm_90a kernels or without them).
const char* fp32_attention_keeper_name();
const char* bf16_attention_keeper_name();
const char* bf16_attention_keeper_name(bool sm90a);
// Whether the keeper's forward is its sm_90a one (v29's) for `heads` heads (batch x heads) on a grid of
// `resident_blocks`.
inline constexpr int kSm90aForwardMinRounds = 4;
bool sm90a_forward_pays(int heads, int resident_blocks);
void check_fused_attention_shape(const AttentionShape& s);  // throws roofbench::Error
// The keepers' contract, as the function types every attention launcher (the keepers' and each lab version's) is
// declared with. Forward: out [N, C] and lse [B, heads, T] from qkv [N, 3C] (qkv_bias added and RoPE applied on the
// fly). Backward: dqkv [N, 3C] (gradient of the raw qkv, so also of qkv's bias), every element written; delta
// [B, heads, T] is scratch the keepers do not write (they compute the row sums of dout * out, or take them from their
// scores, where they need them). With the bias gradient (bf16): dbias [3C] = dqkv's column sums as stored (the
// kernels add the bias before RoPE, so its gradient is the raw qkv's), partials: attention_bias_partials_floats(s)
// floats of scratch.
template <typename Elem>
using AttentionForward = void(Elem* out, float* lse, const Elem* qkv, const float* qkv_bias, RopeTable rope,
                              const AttentionShape& s, cudaStream_t stream);
template <typename Elem>
using AttentionBackward = void(Elem* dqkv, float* delta, const Elem* dout, const Elem* out, const float* lse,
                               const Elem* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                               cudaStream_t stream);
using AttentionBackwardAndBiasGradient = void(bf16* dqkv, float* dbias, float* partials, float* delta,
                                              const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                                              const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                              cudaStream_t stream);

// Once per device, outside any graph capture: sets up the kernels the keepers run on it (v8's, and v44's or
// v9's), their shared memory and persistent grids.
void fused_attention_configure();
AttentionForward<float> fused_attention_forward;
AttentionBackward<float> fused_attention_backward;

// bf16 (R2 and up): the fused attention on bf16 qkv, out, dout and dqkv (bf16 tensor cores, fp32 softmax
// and accumulation); lse and delta stay fp32. Same shapes and contract as the fp32 functions above.
AttentionForward<bf16> fused_attention_forward;
AttentionBackward<bf16> fused_attention_backward;

// The bf16 backward and qkv's bias gradient. On the sm_90a path the backward sums the columns as it stores them
// (lab_attention_qkv_bias_bf16's v10), else column_sum reads dqkv again (v1). The same fixed order in every run
// either way.
AttentionBackwardAndBiasGradient fused_attention_backward_and_bias_gradient;
std::size_t attention_bias_partials_floats(const AttentionShape& s);
// How fused_attention_backward_and_bias_gradient takes the bias gradient on the current device (the rungs' fact).
const char* bf16_qkv_bias_gradient_name();

// The bf16 keeper's kernels on their own, with its contract, for the lab's rows, each configure setting up the
// current device for its kernels alone (fused_attention_configure calls those of the kernels the keeper runs).
// v9's forward (rows v9, v13 and v14) and backward (rows v9, v10 and v11):
void fused_attention_v9_configure();
AttentionForward<bf16> fused_attention_v9_forward;
AttentionBackward<bf16> fused_attention_v9_backward;
// The sm_90a ones, v29's forward and v44's backward (with qkv's bias sums below). Their configures throw
// NotApplicable on a device hopper_path_available rejects (attention_sm90a_absent.cpp: in every build without
// sm_90a code); blocks_per_sm: the blocks of the kernel an SM holds, after its configure.
void fused_attention_sm90a_forward_configure();
int fused_attention_sm90a_forward_blocks_per_sm();
int fused_attention_sm90a_forward_grid();  // its persistent grid: blocks_per_sm x the SMs
AttentionForward<bf16> fused_attention_sm90a_forward;
void fused_attention_sm90a_backward_configure();
int fused_attention_sm90a_backward_blocks_per_sm();
AttentionBackward<bf16> fused_attention_sm90a_backward;
// v44's backward summing dqkv's columns as it stores them, each (sequence, head)'s into partials [batch][3C], then
// column_finish: fused_attention_backward_and_bias_gradient's sm_90a path, what R2-R4 run there (its configure is
// the one above; blocks_per_sm as above).
AttentionBackwardAndBiasGradient fused_attention_sm90a_backward_and_bias_gradient;
int fused_attention_sm90a_backward_and_bias_gradient_blocks_per_sm();

// ---------------------------------------------------------------------------------------------------
// crossentropy.cu

// Eager, three launches (log_softmax, nll_loss, their backward):
// logprobs = log softmax(logits); losses[n] = -logprobs[n, target];
// dlogits = (exp(logprobs) - onehot(target)) / N.
void log_softmax_forward(float* logprobs, const float* logits, int N, int V, cudaStream_t stream);
void nll_forward(float* losses, const float* logprobs, const std::uint8_t* targets, int N, int V,
                 cudaStream_t stream);
void cross_entropy_backward(float* dlogits, const float* logprobs, const std::uint8_t* targets, int N, int V,
                            cudaStream_t stream);
// Fused: losses and dlogits in one pass over the logits.
void fused_cross_entropy(float* losses, float* dlogits, const float* logits, const std::uint8_t* targets, int N,
                         int V, cudaStream_t stream);
// R2's: fp32 logits and softmax, dlogits rounded to bf16 (the head's backward matmuls' operand).
void fused_cross_entropy(float* losses, bf16* dlogits, const float* logits, const std::uint8_t* targets, int N,
                         int V, cudaStream_t stream);
// Mean of losses[0..N) into *loss and into history[(*step_counter - 1) mod history_size] (history_size a
// power of two): the loss of every step stays on the device until someone asks for it.
void mean_loss(float* loss, float* history, int history_size, const unsigned long long* step_counter,
               const float* losses, int N, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// bf16 (R2): what torch.autocast(dtype=torch.bfloat16) does to the fused step. Matmuls take bf16 operands
// (cuBLAS, fp32 accumulation); the tensors a matmul reads are stored bf16; LayerNorm statistics, the
// residual stream, softmax, the loss, every parameter gradient and AdamW stay fp32. Defined with the
// fp32 kernels they mirror (elementwise.cu, matmul.cu).

// out[i] = bf16(in[i]): the per-step bf16 copy of the fp32 master weights.
void cast_to_bf16(bf16* out, const float* in, std::size_t n, cudaStream_t stream);
// y[N, out] = x w^T with bf16 operands (cuBLASLt, timed algorithms: LtContext above); y bf16 (y_type
// CUDA_R_16BF) or fp32 (CUDA_R_32F, the logits).
void linear_forward(const LtContext& lt, void* y, cudaDataType_t y_type, const bf16* x, const bf16* w, int N, int in,
                    int out);
// dx = dy w (bf16 or fp32 per dx_type; skipped when null) and dw = dy^T x (+ beta_dw dw) in fp32, from bf16
// operands. On Hopper cuBLAS has sm90 bf16 kernels for the MN-major "nt" weight gradient, so no transpose.
// weight_first runs dw's GEMM before dx's, so that dx may overwrite x (R4 writes fc_proj's dx over the GELU
// output it reads, activation_plan.hpp); the same two GEMMs, the same bits. dbias, when given, is overwritten
// (whatever beta_dw) with the bias gradient, dy's column sums in fp32, from dw's GEMM (cuBLASLt's BGRADB epilogue)
// instead of a pass over dy.
enum class GradientOrder { input_first, weight_first };
void linear_backward(const LtContext& lt, void* dx, cudaDataType_t dx_type, float* dw, const bf16* dy, const bf16* x,
                     const bf16* w, int N, int in, int out, float beta_dw = 0,
                     GradientOrder order = GradientOrder::input_first, float* dbias = nullptr);
// linear_backward's dx alone.
void linear_backward_input(const LtContext& lt, void* dx, cudaDataType_t dx_type, const bf16* dy, const bf16* w, int N,
                           int in, int out);
// R2-R4's MLP (lab_elementwise_bf16 v4; the lab keeps the versions before it,
// plugins/gpt/lab/elementwise_versions.hpp), with fc's bias out of the GEMM (at R3's shape its cuBLASLt BIAS
// epilogue kernel took 219 us against 185 without it, lab_fc_gelu_bf16 v1 and v4): xw [rows, cols] is x w^T
// alone and both passes take the pre-activation z = bf16(xw + bias), the bias added in fp32 and rounded as a
// separate bf16 bias add would be; z itself is never stored.
// GELU and GELU' of each element come from a per-block table of every bf16 value's (bf16_table.hpp): the
// same fp32 arithmetic as erff and expf per element, so the same bits.
// out = GELU(z) (table kernel; cols > 0 and a multiple of 8, rows >= 0, bias not null, out and xw 16-byte
// aligned, else throws; bias needs only bf16's 2-byte alignment).
void gelu_forward_add_bias(bf16* out, const bf16* xw, const bf16* bias, int rows, int cols, cudaStream_t stream);
// dz = dout GELU'(z) in bf16 and dbias (fp32) its column sums in one pass, z as above; the same shape
// requirements. partials: column_partials_floats(rows, cols). dz may be dout (R4 runs it in place): every
// element of dout is read once, by the thread that then writes that element of dz, and never read again.
void gelu_backward_add_bias(bf16* dz, float* dbias, const bf16* dout, const bf16* xw, const bf16* bias, int rows,
                            int cols, float* partials, cudaStream_t stream);
// gelu_forward_add_bias's output and the GEMM's before it in one sm_90a kernel (fc_gelu_sm90a.cu, lab_fc_gelu_bf16
// v14): xw = x w^T rounded to bf16 and gelu = GELU(bf16(xw + bias)), x [rows, in], w [out, in], bias [out]; gelu
// the same bits as gelu_forward_add_bias on this xw. in a multiple of 64, out of 8, x, w, xw and gelu 16-byte
// aligned, else throws. configure once (outside any graph capture) before the first call; both refuse
// (NotApplicable) where hopper_path_available does (fc_gelu_sm90a_absent.cpp: every device, in a build without
// sm_90a code).
void fc_gelu_forward_sm90a_configure();
void fc_gelu_forward_sm90a(bf16* xw, bf16* gelu, const bf16* x, const bf16* w, const bf16* bias, int rows, int in,
                           int out, cudaStream_t stream);
// fc_proj's input gradient and gelu_backward_add_bias's outputs in one sm_90a kernel (fc_gelu_sm90a.cu,
// lab_fc_gelu_backward_bf16 v8): dz = bf16(bf16(dy w) GELU'(bf16(xw + bias))) and dbias its column sums (fp32), dy
// [rows, in], w [in, out] (fc_proj's weight as stored), xw [rows, out] (fc's x w^T). dz may be xw (each tile of xw
// is read before the same tile of dz is written). partials: fc_gelu_backward_partials_floats(rows, out). The same
// requirements and refusals as fc_gelu_forward_sm90a, configured by fc_gelu_forward_sm90a_configure.
inline std::size_t fc_gelu_backward_partials_floats(int rows, int out) {
  return static_cast<std::size_t>((rows + 127) / 128) * static_cast<std::size_t>(out);
}
void fc_gelu_backward_sm90a(bf16* dz, float* dbias, float* partials, const bf16* dy, const bf16* w, const bf16* xw,
                            const bf16* bias, int rows, int in, int out, cudaStream_t stream);
// The bf16 trainers' fc + GELU forward and backward on this device for a model of `channels`: "sm_90a: ..." (the
// kernels above) or the portable pairs.
const char* bf16_fc_gelu_keeper_name(int channels);

// out[c] = sum over rows of x[r, c] in fp32, x bf16 (cols % 8 == 0, 16-byte aligned; else throws).
void column_sum(float* out, const bf16* x, int rows, int cols, float* partials, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------
// adamw.cu

// One torch.optim.AdamW step over params[0..n): the step t is read from *step_counter on the device (so a
// replayed graph keeps counting), t >= 1.
void adamw(float* params, const float* grads, float* m, float* v, std::size_t n, const AdamW& opt,
           const unsigned long long* step_counter, cudaStream_t stream);

}  // namespace roofbench::gpt::cuda
