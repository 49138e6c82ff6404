// Matmuls through cuBLAS on TF32 tensor cores (fp32 storage), the transpose that gives a weight gradient's GEMM a
// K-major operand, and the column sums of bias gradients.
#include <cstdint>

#include "column_reduce.cuh"
#include "common.cuh"
#include "layers.hpp"
#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/plugin.hpp"
#include "storage.cuh"

namespace roofbench::gpt::cuda {

// cuBLAS is column-major; a row-major matrix is the column-major view of its transpose. So the row-major
// C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: swap the operands, keep each one's op.
void gemm(cublasHandle_t handle, const RowMajorGemm& g) {
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // bf16 operands: plain fp32 accumulation (the TF32 fast path is for fp32 operands only).
  const bool fp32_operands = g.input_type == CUDA_R_32F;
  const cublasComputeType_t compute =
      fp32_operands && g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const int lda = static_cast<int>(g.lda), ldb = static_cast<int>(g.ldb), ldc = static_cast<int>(g.ldc);
  if (g.batch == 1) {
    ROOFBENCH_CUBLAS(cublasGemmEx(handle, op_b, op_a, g.N, g.M, g.K, &g.alpha, g.B, g.input_type, ldb, g.A,
                                  g.input_type, lda, &g.beta, g.C, g.c_type, ldc, compute, CUBLAS_GEMM_DEFAULT));
  } else {
    ROOFBENCH_CUBLAS(cublasGemmStridedBatchedEx(handle, op_b, op_a, g.N, g.M, g.K, &g.alpha, g.B, g.input_type, ldb,
                                                g.stride_b, g.A, g.input_type, lda, g.stride_a, &g.beta, g.C,
                                                g.c_type, ldc, g.stride_c, g.batch, compute, CUBLAS_GEMM_DEFAULT));
  }
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

void linear_forward(cublasHandle_t handle, void* y, cudaDataType_t y_type, const bf16* x, const bf16* w, int N,
                    int in, int out) {
  RowMajorGemm g = forward_gemm(y, x, w, N, in, out);
  g.input_type = CUDA_R_16BF;
  g.c_type = y_type;
  gemm(handle, g);
}

void linear_backward(cublasHandle_t handle, void* dx, cudaDataType_t dx_type, float* dw, const bf16* dy,
                     const bf16* x, const bf16* w, int N, int in, int out, float beta_dw) {
  if (dx) {
    RowMajorGemm g = input_gradient_gemm(dx, dy, w, N, in, out);
    g.input_type = CUDA_R_16BF;
    g.c_type = dx_type;
    gemm(handle, g);
  }
  RowMajorGemm g = weight_gradient_gemm(dw, dy, x, N, in, out);  // dw fp32
  g.beta = beta_dw;
  g.input_type = CUDA_R_16BF;
  gemm(handle, g);
}

void linear_forward_bias(cublasLtHandle_t lt, LtWorkspace workspace, cudaDataType_t type, void* y, const void* x,
                         const void* w, const void* bias, int N, int in, int out, cudaStream_t stream) {
  if (type != CUDA_R_32F && type != CUDA_R_16BF) throw Error("gpt: linear_forward_bias takes fp32 or bf16");
  // The heuristic sees the bias pointer but not the matrices': it is promised 16-byte aligned ones.
  for (const void* p : {static_cast<const void*>(y), x, w})
    if (!aligned16(p)) throw Error("gpt: linear_forward_bias needs 16-byte aligned matrices");
  // Column-major, as cuBLASLt sees the row-major y[N, out] = x[N, in] w[out, in]^T: y^T[out, N] = w x^T, with
  // w the column-major [in, out] transposed and x^T the column-major [in, N]; the bias runs along out, the
  // rows of the column-major result (cuBLASLt's bias vector is one element per row of D).
  const cublasComputeType_t compute = type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  case_support::CublasLtMatmulDesc desc;
  ROOFBENCH_CUBLASLT(cublasLtMatmulDescCreate(desc.replace(), compute, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  ROOFBENCH_CUBLASLT(
      cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
  ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
  ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  case_support::CublasLtLayout a, b, c;
  ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(a.replace(), type, in, out, in));
  ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(b.replace(), type, in, N, in));
  ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(c.replace(), type, out, N, out));
  case_support::CublasLtPreference preference;
  ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceCreate(preference.replace()));
  ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace.bytes, sizeof workspace.bytes));
  const std::uint32_t alignment = 16;
  for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(preference.get(), attribute, &alignment, sizeof alignment));
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoGetHeuristic(lt, desc.get(), a.get(), b.get(), c.get(), c.get(), preference.get(),
                                                    1, &found, &count));
  if (count < 1 || found.state != CUBLAS_STATUS_SUCCESS)
    throw Error("gpt: cuBLASLt offers no algorithm for the bias epilogue at this shape");
  const float one = 1.0f, zero = 0.0f;
  ROOFBENCH_CUBLASLT(cublasLtMatmul(lt, desc.get(), &one, w, a.get(), x, b.get(), &zero, y, c.get(), y, c.get(),
                                    &found.algo, workspace.data, workspace.bytes, stream));
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

// v3 transposes x only where it is the narrower operand; on a tie dy, which gives v2's known layout.
bool transposes_x(WgradLayout layout, int in, int out) { return layout == WgradLayout::v3 && in < out; }
}  // namespace

void transpose(float* out, const float* in, int rows, int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  // Row tiles on x (up to 2^31 - 1 blocks), column tiles on y.
  const dim3 grid(ceil_div(rows, kTransposeTile), ceil_div(cols, kTransposeTile));
  transpose_kernel<<<grid, dim3(kTransposeTile, kTransposeRowsPerPass), 0, stream>>>(out, in, rows, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

const char* wgrad_layout_name(WgradLayout layout) {
  switch (layout) {
    case WgradLayout::v1:
      return "v1 (MN-major operands, cuBLAS nt)";
    case WgradLayout::v2:
      return "v2 (dy transposed, cuBLAS nn)";
    case WgradLayout::v3:
      return "v3 (the narrower operand transposed)";
  }
  return "unknown";
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
  RowMajorGemm g = weight_gradient_gemm(dw, dy, x, N, in, out);
  g.beta = beta_dw;
  if (layout != WgradLayout::v1) {
    if (scratch == nullptr) throw Error("gpt: linear_backward_kmajor: the v2 and v3 layouts need scratch");
    cudaStream_t stream = nullptr;
    ROOFBENCH_CUBLAS(cublasGetStream(handle, &stream));  // the GEMM's stream: the transpose lands before it
    if (transposes_x(layout, in, out)) {
      transpose(scratch, x, N, in, stream);  // xt [in, N]: dw = dy^T xt^T
      g.B = scratch, g.ldb = N, g.trans_b = true;
    } else {
      transpose(scratch, dy, N, out, stream);  // dyt [out, N]: dw = dyt x
      g.A = scratch, g.lda = N, g.trans_a = false;
    }
  }
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

__global__ void add_bias_kernel(float* y, const float* bias, std::size_t n, int cols) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    y[i] += bias[i % cols];
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

void add_bias(float* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  add_bias_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(y, bias, n, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
