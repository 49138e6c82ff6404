// Matmuls through cuBLAS on TF32 tensor cores (fp32 storage), the transpose that gives a weight gradient's GEMM a
// K-major operand, and the column sums of bias gradients.
#include <cstdint>

#include "column_reduce.cuh"
#include "common.cuh"
#include "layers.hpp"
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

// Four adjacent columns of x (16-byte loads for fp32, 8-byte ones for bf16).
template <typename T>
struct ColumnsOf4 {
  const T* x;
  int cols;
  __device__ float4 operator()(int row, int col) const { return load4(x + static_cast<std::size_t>(row) * cols + col); }
};

__global__ void column_finish_kernel(float* first, float* second, int split, const float* partials, int chunks,
                                     int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  float sum = 0;
  for (int chunk = 0; chunk < chunks; ++chunk) sum += partials[static_cast<std::size_t>(chunk) * cols + col];
  if (col < split)
    first[col] = sum;
  else
    second[col - split] = sum;
}

__global__ void add_bias_kernel(float* y, const float* bias, std::size_t n, int cols) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    y[i] += bias[i % cols];
}
}  // namespace

void column_finish(float* first, float* second, int split, const float* partials, int chunks, int cols,
                   cudaStream_t stream) {
  column_finish_kernel<<<ceil_div(cols, 256), 256, 0, stream>>>(first, second, split, partials, chunks, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

std::size_t column_partials_floats(int rows, int cols) {
  return static_cast<std::size_t>(column_chunks(rows)) * static_cast<std::size_t>(cols);
}

void column_sum(float* out, const float* x, int rows, int cols, float* partials, cudaStream_t stream) {
  column_sums(out, nullptr, cols, rows, cols, ColumnOf{x, cols}, partials, stream);
}

void column_sum_vec4(float* out, const float* x, int rows, int cols, float* partials, cudaStream_t stream) {
  if (cols % 4 != 0 || reinterpret_cast<std::uintptr_t>(x) % 16 != 0) {
    column_sum(out, x, rows, cols, partials, stream);
    return;
  }
  column_sums4<16>(out, nullptr, cols, rows, cols, ColumnsOf4<float>{x, cols}, partials, stream);
}

void column_sum(float* out, const bf16* x, int rows, int cols, float* partials, cudaStream_t stream) {
  if (cols % 4 != 0 || !aligned4(x)) throw Error("gpt: column_sum of bf16 needs cols % 4 == 0, 8-byte aligned");
  column_sums4<16>(out, nullptr, cols, rows, cols, ColumnsOf4<bf16>{x, cols}, partials, stream);
}

void add_bias(float* y, const float* bias, int rows, int cols, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  add_bias_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(y, bias, n, cols);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
