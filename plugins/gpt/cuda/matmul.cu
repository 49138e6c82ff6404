// Matmuls through cuBLAS on TF32 tensor cores (fp32 storage), R2 and up's bf16 linears and the bias epilogue
// through cuBLASLt with timed algorithms (layers.hpp's LtContext), the transpose that gives a weight gradient's
// GEMM a K-major operand, and the column sums of bias gradients.
#include <algorithm>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "column_reduce.cuh"
#include "common.cuh"
#include "layers.hpp"
#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/plugin.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda {

// cuBLAS is column-major; a row-major matrix is the column-major view of its transpose. So the row-major
// C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: swap the operands, keep each one's op.
namespace {
struct CublasForm {
  cublasOperation_t op_a, op_b;
  cublasComputeType_t compute;
  int lda, ldb, ldc;
};
CublasForm cublas_form(const RowMajorGemm& g) {
  // bf16 operands: plain fp32 accumulation (the TF32 fast path is for fp32 operands only).
  const bool fp32_operands = g.input_type == CUDA_R_32F;
  return {g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
          fp32_operands && g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, static_cast<int>(g.lda),
          static_cast<int>(g.ldb), static_cast<int>(g.ldc)};
}
}  // namespace

void gemm(cublasHandle_t handle, const RowMajorGemm& g) {
  const CublasForm f = cublas_form(g);
  if (g.batch == 1) {
    ROOFBENCH_CUBLAS(cublasGemmEx(handle, f.op_b, f.op_a, g.N, g.M, g.K, &g.alpha, g.B, g.input_type, f.ldb, g.A,
                                  g.input_type, f.lda, &g.beta, g.C, g.c_type, f.ldc, f.compute, CUBLAS_GEMM_DEFAULT));
  } else {
    ROOFBENCH_CUBLAS(cublasGemmStridedBatchedEx(handle, f.op_b, f.op_a, g.N, g.M, g.K, &g.alpha, g.B, g.input_type,
                                                f.ldb, g.stride_b, g.A, g.input_type, f.lda, g.stride_a, &g.beta, g.C,
                                                g.c_type, f.ldc, g.stride_c, g.batch, f.compute, CUBLAS_GEMM_DEFAULT));
  }
}

void gemm(cublasHandle_t handle, const RowMajorGemm& g, const BatchPointers& batch) {
  const CublasForm f = cublas_form(g);
  ROOFBENCH_CUBLAS(cublasGemmBatchedEx(handle, f.op_b, f.op_a, g.N, g.M, g.K, &g.alpha, batch.B, g.input_type, f.ldb,
                                       batch.A, g.input_type, f.lda, &g.beta, batch.C, g.c_type, f.ldc, g.batch,
                                       f.compute, CUBLAS_GEMM_DEFAULT));
}

namespace {
// The three GEMMs of a linear layer (weights [out, in], N rows), fp32 operands unless the caller retypes them.
RowMajorGemm forward_gemm(void* y, const void* x, const void* w, int N, int in, int out) {
  RowMajorGemm g;  // y[N, out] = x w^T
  g.trans_b = true;
  g.M = N, g.N = out, g.K = in;
  g.A = x, g.lda = in;
  g.B = w, g.ldb = in;
  g.C = y, g.ldc = out;
  return g;
}
RowMajorGemm input_gradient_gemm(void* dx, const void* dy, const void* w, int N, int in, int out) {
  RowMajorGemm g;  // dx[N, in] = dy[N, out] w[out, in]
  g.M = N, g.N = in, g.K = out;
  g.A = dy, g.lda = out;
  g.B = w, g.ldb = in;
  g.C = dx, g.ldc = in;
  return g;
}
RowMajorGemm weight_gradient_gemm(void* dw, const void* dy, const void* x, int N, int in, int out) {
  RowMajorGemm g;  // dw[out, in] = dy^T x
  g.trans_a = true;
  g.M = out, g.N = in, g.K = N;
  g.A = dy, g.lda = out;
  g.B = x, g.ldb = in;
  g.C = dw, g.ldc = in;
  return g;
}
}  // namespace

void linear_forward(cublasHandle_t handle, float* y, const float* x, const float* w, int N, int in, int out,
                    float beta) {
  RowMajorGemm g = forward_gemm(y, x, w, N, in, out);
  g.beta = beta;
  gemm(handle, g);
}

void linear_backward(cublasHandle_t handle, float* dx, float* dw, const float* dy, const float* x, const float* w,
                     int N, int in, int out, float beta_dx, float beta_dw) {
  linear_backward_kmajor(handle, dx, dw, dy, x, w, N, in, out, WgradLayout::v1, nullptr, beta_dx, beta_dw);
}

namespace {
enum class LtVector { none, bias, bias_gradient };

// One cuBLASLt matmul as the column-major D[m, n] = op(A) op(B) cuBLAS computes for a RowMajorGemm (operands
// swapped, each keeping its op: gemm()'s mapping), and what its algorithm choice depends on.
struct LtProblem {
  int device = 0;
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  cudaDataType_t operand_type = CUDA_R_32F, c_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  // CUBLASLT_EPILOGUE_BIAS (a bias of type c_type along m, added) or CUBLASLT_EPILOGUE_BGRADB (the sums of B'
  // over k, one for each of D's n columns, written in c_type): the epilogue's vector, or none.
  LtVector vector = LtVector::none;
  bool accumulates = false;  // beta != 0: C is read, so the call cannot be timed on its own operands
  std::uint32_t alignment = 16;  // the largest power of two up to 16 dividing every matrix's address
  std::uint32_t bias_alignment = 16;    // the same of the bias's
  std::size_t workspace_bytes = 0;      // what the heuristic was told it may use
  auto operator<=>(const LtProblem&) const = default;
};

std::uint32_t common_alignment(std::initializer_list<const void*> pointers) {
  std::uint32_t alignment = 16;
  for (const void* p : pointers)
    while (reinterpret_cast<std::uintptr_t>(p) % alignment != 0) alignment /= 2;
  return alignment;
}

LtProblem lt_problem(const RowMajorGemm& g, LtVector vector, const void* bias, std::size_t workspace_bytes) {
  if (g.batch != 1) throw Error("gpt: the cuBLASLt matmul runs unbatched GEMMs only");
  LtProblem p;
  ROOFBENCH_CUDA(cudaGetDevice(&p.device));
  p.op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // A' = g.B
  p.op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // B' = g.A
  p.m = g.N, p.n = g.M, p.k = g.K, p.lda = g.ldb, p.ldb = g.lda, p.ldc = g.ldc;
  p.operand_type = g.input_type, p.c_type = g.c_type;
  p.compute = g.input_type == CUDA_R_32F && g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  p.vector = bias != nullptr ? vector : LtVector::none;
  p.accumulates = g.beta != 0;
  p.alignment = common_alignment({g.A, g.B, g.C});
  if (bias) p.bias_alignment = common_alignment({bias});
  p.workspace_bytes = workspace_bytes;
  return p;
}

struct LtOperation {
  case_support::CublasLtMatmulDesc desc;
  case_support::CublasLtLayout a, b, c;

  LtOperation(const LtProblem& p, const void* bias) {
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescCreate(desc.replace(), p.compute, CUDA_R_32F));
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &p.op_a, sizeof p.op_a));
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, &p.op_b, sizeof p.op_b));
    if (p.vector != LtVector::none) {
      const cublasLtEpilogue_t epilogue =
          p.vector == LtVector::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
      ROOFBENCH_CUBLASLT(
          cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
      ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    const bool a_n = p.op_a == CUBLAS_OP_N, b_n = p.op_b == CUBLAS_OP_N;
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(a.replace(), p.operand_type, a_n ? p.m : p.k, a_n ? p.k : p.m, p.lda));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(b.replace(), p.operand_type, b_n ? p.k : p.n, b_n ? p.n : p.k, p.ldb));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(c.replace(), p.c_type, p.m, p.n, p.ldc));
  }
};

// The heuristic's first kLtCandidates algorithms for p that it says will run. Split-K partials are summed in
// fp32: in the compute type's workspace, or (for an fp32 result) in the output itself; never in a bf16 output.
// (A plain array: nvcc 13.0 crashes on a std::vector of the heuristic's results under C++20.)
struct LtCandidates {
  cublasLtMatmulHeuristicResult_t found[kLtCandidates] = {};
  std::size_t count = 0;
};
LtCandidates lt_candidates(const LtContext& ctx, const LtProblem& p, const LtOperation& op) {
  case_support::CublasLtPreference preference;
  ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceCreate(preference.replace()));
  ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &ctx.workspace.bytes, sizeof ctx.workspace.bytes));
  for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ROOFBENCH_CUBLASLT(
        cublasLtMatmulPreferenceSetAttribute(preference.get(), attribute, &p.alignment, sizeof p.alignment));
  const std::uint32_t reductions = p.c_type == CUDA_R_32F ? CUBLASLT_REDUCTION_SCHEME_MASK
                                                          : CUBLASLT_REDUCTION_SCHEME_NONE |
                                                                CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                          &reductions, sizeof reductions));
  LtCandidates candidates;
  int count = 0;
  ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoGetHeuristic(ctx.handle, op.desc.get(), op.a.get(), op.b.get(), op.c.get(),
                                                    op.c.get(), preference.get(), kLtCandidates, candidates.found,
                                                    &count));
  for (int i = 0; i < count; ++i)  // keep those that will run, in the heuristic's order
    if (candidates.found[i].state == CUBLAS_STATUS_SUCCESS) candidates.found[candidates.count++] = candidates.found[i];
  if (candidates.count == 0) throw Error("gpt: cuBLASLt offers no algorithm for a matmul of this shape");
  return candidates;
}

// The algorithms chosen so far, one per problem, for the process's life, each with the line that says so.
struct LtChoice {
  cublasLtMatmulAlgo_t algo;
  std::string text;
};
std::mutex g_lt_choices_mutex;
std::map<LtProblem, LtChoice> g_lt_choices;

const char* type_name(cudaDataType_t type) { return type == CUDA_R_16BF ? "bf16" : type == CUDA_R_32F ? "fp32" : "?"; }

// "m 1536 n 65536 k 512 TN bf16->bf16: algo 66, tile 29, stages 35, split-k 1 (timed: candidate 7 of 8)"
std::string choice_text(const LtProblem& p, const cublasLtMatmulAlgo_t& algo, std::size_t rank, std::size_t count,
                        const char* how) {
  const char* vector = p.vector == LtVector::bias            ? " +bias"
                       : p.vector == LtVector::bias_gradient ? " +bias gradient"
                                                             : "";
  return "m " + std::to_string(p.m) + " n " + std::to_string(p.n) + " k " + std::to_string(p.k) + " " +
         (p.op_a == CUBLAS_OP_T ? "T" : "N") + (p.op_b == CUBLAS_OP_T ? "T" : "N") + " " + type_name(p.operand_type) +
         "->" + type_name(p.c_type) + vector + ": " + case_support::describe_lt_algorithm(algo) +
         " (" + how + ": candidate " + std::to_string(rank + 1) + " of " + std::to_string(count) + ")";
}

// The choice for p: the cached one, or, on first sight, the fastest candidate timed outside the lock (which
// guards the map only, so that R5's ranks, one thread and device each, never wait on each other's timing or
// launches); a second thread timing the same problem at once keeps whichever choice landed first.
LtChoice choose(const LtContext& ctx, const LtProblem& p, const LtOperation& op,
                const std::function<void(const cublasLtMatmulAlgo_t&, cudaStream_t)>& launch) {
  {
    const std::lock_guard lock(g_lt_choices_mutex);
    const auto known = g_lt_choices.find(p);
    if (known != g_lt_choices.end()) return known->second;
  }
  const LtCandidates candidates = lt_candidates(ctx, p, op);
  const cublasLtMatmulHeuristicResult_t* found = candidates.found;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  ROOFBENCH_CUDA(cudaStreamIsCapturing(ctx.stream, &capture));
  std::size_t best = 0;
  const bool timed = candidates.count > 1 && !p.accumulates && capture == cudaStreamCaptureStatusNone;
  if (timed) {
    std::vector<std::string> labels;
    for (std::size_t i = 0; i < candidates.count; ++i)
      labels.push_back(case_support::describe_lt_algorithm(found[i].algo));
    // On a stream of our own (the caller's may be the legacy default stream, which cannot be captured into the
    // timing's graphs), once the caller's stream has produced the operands.
    ROOFBENCH_CUDA(cudaStreamSynchronize(ctx.stream));
    cudaStream_t timing = nullptr;
    ROOFBENCH_CUDA(cudaStreamCreateWithFlags(&timing, cudaStreamNonBlocking));
    try {
      const std::vector<case_support::CandidateTiming> timings = case_support::time_each(
          timing, candidates.count, [&](std::size_t i) { launch(found[i].algo, timing); }, case_support::TimingPlan{});
      best = case_support::fastest(timings, labels);
      ROOFBENCH_CUDA(cudaStreamSynchronize(timing));
    } catch (...) {
      cudaStreamDestroy(timing);
      throw;
    }
    ROOFBENCH_CUDA(cudaStreamDestroy(timing));
  }
  const char* how = timed ? (case_support::first_candidate_only() ? "ROOFBENCH_ALGORITHM_CHOICE=first" : "timed")
                    : p.accumulates ? "heuristic's first, accumulating"
                                    : "heuristic's first";
  const LtChoice made{found[best].algo, choice_text(p, found[best].algo, best, candidates.count, how)};
  const std::lock_guard lock(g_lt_choices_mutex);
  return g_lt_choices.emplace(p, made).first->second;
}

// bias: the epilogue's vector (`vector` says which), or none.
void lt_matmul(const LtContext& ctx, const RowMajorGemm& g, const void* bias = nullptr,
               LtVector vector = LtVector::bias) {
  const LtProblem p = lt_problem(g, vector, bias, ctx.workspace.bytes);
  const LtOperation op(p, bias);
  const auto launch = [&](const cublasLtMatmulAlgo_t& algo, cudaStream_t stream) {
    ROOFBENCH_CUBLASLT(cublasLtMatmul(ctx.handle, op.desc.get(), &g.alpha, g.B, op.a.get(), g.A, op.b.get(), &g.beta,
                                      g.C, op.c.get(), g.C, op.c.get(), &algo, ctx.workspace.data,
                                      ctx.workspace.bytes, stream));
  };
  const LtChoice chosen = choose(ctx, p, op, launch);
  if (ctx.choices) ctx.choices->insert(chosen.text);
  launch(chosen.algo, ctx.stream);
}
}  // namespace

void linear_forward(const LtContext& lt, void* y, cudaDataType_t y_type, const bf16* x, const bf16* w, int N, int in,
                    int out) {
  RowMajorGemm g = forward_gemm(y, x, w, N, in, out);
  g.input_type = CUDA_R_16BF;
  g.c_type = y_type;
  lt_matmul(lt, g);
}

void linear_backward_input(const LtContext& lt, void* dx, cudaDataType_t dx_type, const bf16* dy, const bf16* w, int N,
                           int in, int out) {
  RowMajorGemm g = input_gradient_gemm(dx, dy, w, N, in, out);
  g.input_type = CUDA_R_16BF;
  g.c_type = dx_type;
  lt_matmul(lt, g);
}

void linear_backward(const LtContext& lt, void* dx, cudaDataType_t dx_type, float* dw, const bf16* dy, const bf16* x,
                     const bf16* w, int N, int in, int out, float beta_dw, GradientOrder order, float* dbias) {
  const auto input_gradient = [&] {
    if (dx) linear_backward_input(lt, dx, dx_type, dy, w, N, in, out);
  };
  if (order == GradientOrder::input_first) input_gradient();
  RowMajorGemm g = weight_gradient_gemm(dw, dy, x, N, in, out);  // dw fp32
  g.beta = beta_dw;
  g.input_type = CUDA_R_16BF;
  lt_matmul(lt, g, dbias, LtVector::bias_gradient);  // dy is cuBLAS's B, summed over k = N for each of dw's rows
  if (order == GradientOrder::weight_first) input_gradient();
}

void linear_forward_bias(const LtContext& lt, cudaDataType_t type, void* y, const void* x, const void* w,
                         const void* bias, int N, int in, int out) {
  if (type != CUDA_R_32F && type != CUDA_R_16BF) throw Error("gpt: linear_forward_bias takes fp32 or bf16");
  for (const void* p : {static_cast<const void*>(y), x, w})
    if (!aligned16(p)) throw Error("gpt: linear_forward_bias needs 16-byte aligned matrices");
  // The bias runs along out: the rows m of the column-major result cuBLASLt sees (one element per row of D).
  RowMajorGemm g = forward_gemm(y, x, w, N, in, out);
  g.input_type = g.c_type = type;
  lt_matmul(lt, g, bias);
}

namespace {
constexpr int kTransposeTile = 32, kTransposeRowsPerPass = 8;

// One 32 x 32 tile per block, 32 x 8 threads: a warp reads 32 consecutive floats of a row of `in` and
// writes 32 consecutive floats of a row of `out`. The +1 column keeps the tile's column reads off a single
// shared-memory bank.
__global__ void transpose_kernel(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int row0 = blockIdx.x * kTransposeTile, col0 = blockIdx.y * kTransposeTile;
  const int tx = threadIdx.x;
  for (int i = threadIdx.y; i < kTransposeTile; i += kTransposeRowsPerPass)
    if (row0 + i < rows && col0 + tx < cols)
      tile[i][tx] = in[static_cast<std::size_t>(row0 + i) * cols + col0 + tx];
  __syncthreads();
  for (int i = threadIdx.y; i < kTransposeTile; i += kTransposeRowsPerPass)
    if (col0 + i < cols && row0 + tx < rows)
      out[static_cast<std::size_t>(col0 + i) * rows + row0 + tx] = tile[tx][i];
}

// The handle's stream: a transpose enqueued there lands before the GEMM that reads it.
cudaStream_t gemm_stream(cublasHandle_t handle) {
  cudaStream_t stream = nullptr;
  ROOFBENCH_CUBLAS(cublasGetStream(handle, &stream));
  return stream;
}

// v3 transposes x only where it is the narrower operand; on a tie dy, the dx GEMMs' known layout.
bool transposes_x(WgradLayout layout, int in, int out) { return layout == WgradLayout::v3 && in < out; }
}  // namespace

void transpose(float* out, const float* in, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  // Row tiles on x (up to 2^31 - 1 blocks), column tiles on y.
  const dim3 grid(ceil_div(rows, kTransposeTile), ceil_div(cols, kTransposeTile));
  transpose_kernel<<<grid, dim3(kTransposeTile, kTransposeRowsPerPass), 0, stream>>>(out, in, rows, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

std::size_t wgrad_scratch_floats(WgradLayout layout, int N, int in, int out) {
  if (layout == WgradLayout::v1) return 0;
  return static_cast<std::size_t>(N) * static_cast<std::size_t>(transposes_x(layout, in, out) ? in : out);
}

void linear_backward_kmajor(cublasHandle_t handle, float* dx, float* dw, const float* dy, const float* x,
                            const float* w, int N, int in, int out, WgradLayout layout, float* scratch,
                            float beta_dx, float beta_dw) {
  if (dx) {
    RowMajorGemm g = input_gradient_gemm(dx, dy, w, N, in, out);
    g.beta = beta_dx;
    gemm(handle, g);
  }
  if (layout != WgradLayout::v1 && scratch == nullptr)
    throw Error("gpt: linear_backward_kmajor: the v3 layout needs scratch");
  if (layout != WgradLayout::v1 && !transposes_x(layout, in, out)) {
    weight_gradient_dy_transposed(handle, dw, dy, x, N, in, out, scratch, beta_dw);
    return;
  }
  RowMajorGemm g = weight_gradient_gemm(dw, dy, x, N, in, out);
  g.beta = beta_dw;
  if (layout != WgradLayout::v1) {
    transpose(scratch, x, N, in, gemm_stream(handle));  // xt [in, N]: dw = dy^T xt^T
    g.B = scratch, g.ldb = N, g.trans_b = true;
  }
  gemm(handle, g);
}

void weight_gradient_dy_transposed(cublasHandle_t handle, float* dw, const float* dy, const float* x, int N, int in,
                                   int out, float* scratch, float beta_dw) {
  if (scratch == nullptr) throw Error("gpt: weight_gradient_dy_transposed needs scratch");
  RowMajorGemm g = weight_gradient_gemm(dw, dy, x, N, in, out);
  g.beta = beta_dw;
  transpose(scratch, dy, N, out, gemm_stream(handle));  // dyt [out, N]: dw = dyt x
  g.A = scratch, g.lda = N, g.trans_a = false;
  gemm(handle, g);
}

namespace {
struct ColumnOf {
  const float* x;
  int cols;
  __device__ float operator()(int row, int col) const { return x[static_cast<std::size_t>(row) * cols + col]; }
};

// kWidth adjacent columns of x in one 16-byte load (4 fp32 or 8 bf16).
template <typename T>
struct ColumnsOf16Bytes {
  static constexpr int kWidth = kPer16Bytes<T>;
  const T* x;
  int cols;
  __device__ Floats<kWidth> operator()(int row, int col) const {
    return load_floats<kWidth>(x + static_cast<std::size_t>(row) * cols + col);
  }
};

// 32 columns per block, kFinishLanes chunk lanes: lane j adds chunks j, j + kFinishLanes, ... in turn, then
// lane 0 adds the lanes' sums in lane order. A fixed order, so the same bits in every run; a lane per chunk
// stride keeps every SM's loads in flight where one thread per column walking all chunks waited on each.
constexpr int kFinishCols = 32, kFinishLanes = 32;
__global__ void __launch_bounds__(kFinishCols* kFinishLanes)
    column_finish_kernel(ColumnOutputs outputs, const float* partials, int chunks, int cols) {
  __shared__ float lanes[kFinishLanes][kFinishCols + 1];
  const int col = blockIdx.x * kFinishCols + threadIdx.x;
  float sum = 0;
  if (col < cols)
    for (int chunk = threadIdx.y; chunk < chunks; chunk += kFinishLanes)
      sum += partials[static_cast<std::size_t>(chunk) * cols + col];
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
  for (int lane = 1; lane < kFinishLanes; ++lane) sum += lanes[lane][threadIdx.x];
  const int part = col / outputs.width;
  outputs.part[part][col - part * outputs.width] = sum;
}

}  // namespace

void column_finish(ColumnOutputs outputs, const float* partials, int chunks, int cols, cudaStream_t stream) {
  column_finish_kernel<<<ceil_div(cols, kFinishCols), dim3(kFinishCols, kFinishLanes), 0, stream>>>(
      outputs, partials, chunks, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

std::size_t column_partials_floats(int rows, int cols) {
  return static_cast<std::size_t>(column_chunks(rows)) * static_cast<std::size_t>(cols);
}

void column_sum(float* out, const float* x, int rows, int cols, float* partials, cudaStream_t stream) {
  column_sums(ColumnOutputs{{out}, cols}, rows, cols, ColumnOf{x, cols}, partials, stream);
}

void column_sum_vec4(float* out, const float* x, int rows, int cols, float* partials, cudaStream_t stream) {
  if (cols % 4 != 0 || !aligned16(x)) {
    column_sum(out, x, rows, cols, partials, stream);
    return;
  }
  column_sums_vec<4, 16>(ColumnOutputs{{out}, cols}, rows, cols, ColumnsOf16Bytes<float>{x, cols}, partials, stream);
}

void column_sum(float* out, const bf16* x, int rows, int cols, float* partials, cudaStream_t stream) {
  if (cols % 8 != 0 || !aligned16(x)) throw Error("gpt: column_sum of bf16 needs cols % 8 == 0, 16-byte aligned");
  column_sums_vec<8, 16>(ColumnOutputs{{out}, cols}, rows, cols, ColumnsOf16Bytes<bf16>{x, cols}, partials, stream);
}

}  // namespace roofbench::gpt::cuda
