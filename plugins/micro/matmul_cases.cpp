// Matmul cases: cuBLAS at every precision the GPU has tensor cores for (fp8 through cuBLASLt), the
// hand-written fp32 kernels they are compared against, and a batch sweep of small bf16 GEMMs.
//
// cuBLAS cases store A row-major (m x k), B and C column-major: cuBLAS's "TN" form, C = A^T B on
// column-major A^T. fp8 requires it; using it everywhere keeps one layout, and it puts both a row of A
// and a column of B contiguous in memory, which keeps the sampled gate cheap.
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cases.hpp"
#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/case_support/cublas_on_stream.hpp"
#include "roofbench/case_support/formats.hpp"
#include "roofbench/case_support/gate.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/kernels/cuda_matmul.hpp"

namespace roofbench::micro {
namespace {

using case_support::check_matmul_sampled;
using case_support::CublasLtPreference;
using case_support::LtMatmul;
using case_support::CublasOnStream;
using case_support::element_bytes;
using case_support::kCublasWorkspaceBytes;
using case_support::MatmulOperands;
using case_support::MatrixStrides;
using case_support::NonfiniteScan;

struct MatmulShape {
  std::int64_t m = 0, n = 0, k = 0;
};

MatmulShape parse_mnk(const std::string& text) {
  MatmulShape shape;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  in >> shape.m >> x1 >> shape.n >> x2 >> shape.k;
  const bool well_formed = in && x1 == 'x' && x2 == 'x' && (in >> std::ws).eof();
  if (!well_formed || shape.m <= 0 || shape.n <= 0 || shape.k <= 0)
    throw Error("micro: mnk must be three positive sizes like 4096x4096x4096, got '" + text + "'");
  if (shape.m > INT_MAX || shape.n > INT_MAX || shape.k > INT_MAX)
    throw Error("micro: mnk '" + text + "' exceeds the int dimensions cuBLAS takes");
  return shape;
}

enum class Layout {
  row_major,  // A, B, C all row-major: the hand-written kernels
  cublas_tn,  // A row-major, B and C column-major (see the top of this file)
};


// A batch of C = A B with inputs of one format: owns the buffers, counts the work and runs the sampled
// gate; subclasses add the library state (prepare) and the launch (run).
class MatmulCase : public Case {
 public:
  MatmulCase(MatmulShape shape, std::int64_t batch, ElementType input, ElementType output, Layout layout,
             bool count_matrices)
      : shape_(shape),
        batch_(batch),
        input_(input),
        output_(output),
        layout_(layout),
        count_matrices_(count_matrices) {}

  void setup(Context& ctx) override {
    const auto [m, n, k] = shape_;
    a_ = ctx.alloc(elements(m * k) * element_bytes(input_), BufferRole::input);
    b_ = ctx.alloc(elements(k * n) * element_bytes(input_), BufferRole::input);
    c_ = ctx.alloc(elements(m * n) * element_bytes(output_), BufferRole::output);
    ctx.fill_random(a_, elements(m * k), input_);
    ctx.fill_random(b_, elements(k * n), input_);
    scan_.setup(ctx);
    prepare(ctx);
  }

  Work work() const override {
    const auto [m, n, k] = shape_;
    Work work;
    work.flops = 2.0 * double(m) * double(n) * double(k) * double(batch_);
    work.bytes_read = double(batch_) * double(element_bytes(input_)) * double(m * k + k * n);  // A and B
    work.bytes = work.bytes_read + double(batch_) * double(element_bytes(output_)) * double(m * n);
    if (count_matrices_) {
      work.items = double(batch_);
      work.item_name = "matrices";
    }
    return work;
  }

  Check check(Context& ctx) override {
    const auto [m, n, k] = shape_;
    MatmulOperands operands{.a = {a_, input_},
                            .b = {b_, input_},
                            .c = {c_, output_},
                            .a_strides = MatrixStrides::row_major(m, k),
                            .b_strides = {},
                            .c_strides = {},
                            .m = m,
                            .n = n,
                            .k = k,
                            .batch = batch_};
    if (layout_ == Layout::row_major) {
      operands.b_strides = MatrixStrides::row_major(k, n);
      operands.c_strides = MatrixStrides::row_major(m, n);
    } else {
      operands.b_strides = MatrixStrides::column_major(k, n);
      operands.c_strides = MatrixStrides::column_major(m, n);
    }
    return check_matmul_sampled(ctx, operands, scan_, gate_figures_);
  }
  std::vector<Figure> figures() const override { return gate_figures_; }

 protected:
  virtual void prepare(Context&) {}
  std::size_t elements(std::int64_t per_matrix) const { return static_cast<std::size_t>(per_matrix * batch_); }

  MatmulShape shape_;
  std::int64_t batch_;
  ElementType input_, output_;
  Layout layout_;
  bool count_matrices_;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  NonfiniteScan scan_;
  std::vector<Figure> gate_figures_;
};

// ---- hand-written fp32 kernels ----

using MatmulLauncher = void (*)(const float*, const float*, float*, std::int64_t, std::int64_t, std::int64_t,
                                cudaStream_t);

class HandwrittenMatmul final : public MatmulCase {
 public:
  HandwrittenMatmul(MatmulShape shape, MatmulLauncher launch)
      : MatmulCase(shape, 1, ElementType::f32, ElementType::f32, Layout::row_major, false), launch_(launch) {}

  void run(Context& ctx) override {
    launch_(static_cast<const float*>(a_), static_cast<const float*>(b_), static_cast<float*>(c_), shape_.m, shape_.n,
            shape_.k, cuda::stream(ctx));
  }

 private:
  MatmulLauncher launch_;
};

// ---- cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx) ----

struct CublasPrecision {
  const char* name;
  Precision precision;
  ElementType element;  // A, B and C alike
  cudaDataType_t data_type;
  cublasComputeType_t compute;
  const char* description;
};

constexpr CublasPrecision kCublasPrecisions[] = {
    {"fp32", Precision::fp32, ElementType::f32, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC,
     "cuBLAS fp32 GEMM on the CUDA cores (pedantic compute: no tf32 down-conversion), TN layout"},
    {"tf32", Precision::tf32, ElementType::f32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
     "cuBLAS GEMM with fp32 storage on tf32 tensor cores, TN layout"},
    {"bf16", Precision::bf16, ElementType::bf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F,
     "cuBLAS bf16 GEMM (bf16 in and out, fp32 accumulation) on tensor cores, TN layout"},
    {"fp16", Precision::fp16, ElementType::f16, CUDA_R_16F, CUBLAS_COMPUTE_32F,
     "cuBLAS fp16 GEMM (fp16 in and out, fp32 accumulation) on tensor cores, TN layout"},
};

const CublasPrecision& cublas_precision(Precision precision) {
  for (const CublasPrecision& entry : kCublasPrecisions)
    if (entry.precision == precision) return entry;
  throw Error(std::string("micro: no cuBLAS GEMM configured for ") + to_string(precision));
}

class CublasMatmul final : public MatmulCase {
 public:
  CublasMatmul(MatmulShape shape, std::int64_t batch, const CublasPrecision& precision, bool strided_batched)
      : MatmulCase(shape, batch, precision.element, precision.element, Layout::cublas_tn, strided_batched),
        precision_(precision),
        strided_batched_(strided_batched) {}

  void run(Context& ctx) override {
    const cublasHandle_t handle = cublas_.on(ctx);
    const auto [m, n, k] = shape_;
    const float alpha = 1.0f, beta = 0.0f;  // the compute types used here all take fp32 scalars
    const cudaDataType_t type = precision_.data_type;
    if (strided_batched_) {
      ROOFBENCH_CUBLAS(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n), int(k), &alpha, a_,
                                                  type, int(k), m * k, b_, type, int(k), k * n, &beta, c_, type, int(m),
                                                  m * n, int(batch_), precision_.compute, CUBLAS_GEMM_DEFAULT));
    } else {
      ROOFBENCH_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n), int(k), &alpha, a_, type, int(k),
                                    b_, type, int(k), &beta, c_, type, int(m), precision_.compute,
                                    CUBLAS_GEMM_DEFAULT));
    }
  }

  void teardown(Context&) override { cublas_.teardown(); }

 private:
  void prepare(Context& ctx) override {
    if (batch_ > INT_MAX) throw Error("micro: batch exceeds the int cuBLAS takes");
    cublas_.setup(ctx);
    (void)cublas_.on(ctx);  // bound in setup already; run() binds again only if the stream changes
  }

  const CublasPrecision& precision_;
  bool strided_batched_;
  CublasOnStream cublas_;
};

// ---- cuBLASLt fp8 ----

class CublasLtFp8Matmul final : public MatmulCase {
 public:
  explicit CublasLtFp8Matmul(MatmulShape shape)
      : MatmulCase(shape, 1, ElementType::fp8_e4m3, ElementType::bf16, Layout::cublas_tn, false) {}

  void setup(Context& ctx) override {
    require_fp8_tensor_cores(ctx);  // before allocating gigabytes for nothing
    MatmulCase::setup(ctx);
  }

  void run(Context& ctx) override {
    const float alpha = 1.0f, beta = 0.0f;
    // C is passed as both C and D: beta is 0, and the same layout is required for in-place use anyway.
    ROOFBENCH_CUBLASLT(cublasLtMatmul(lt_.handle.get(), lt_.desc.get(), &alpha, a_, lt_.a.get(), b_, lt_.b.get(), &beta,
                                      c_, lt_.c.get(), c_, lt_.c.get(), &algorithm_, workspace_,
                                      kCublasWorkspaceBytes, cuda::stream(ctx)));
  }

  void teardown(Context&) override {
    lt_.destroy();
  }

 private:
  static void require_fp8_tensor_cores(Context& ctx) {
    const int device = ctx.device().index;
    int major = 0, minor = 0;
    ROOFBENCH_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    ROOFBENCH_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major * 10 + minor < 89)
      throw NotApplicable("micro: matmul_cublas_fp8 needs fp8 tensor cores (compute capability 8.9 or newer); " +
                  ctx.device().name + " is " + std::to_string(major) + "." + std::to_string(minor));
  }

  void prepare(Context& ctx) override {
    const auto [m, n, k] = shape_;
    // No scale pointers: cuBLASLt's default per-tensor scale is 1, which keeps the stored e4m3 values as
    // they are (the gate's reference assumes so). With 4-byte-aligned scale pointers cublasLtMatmul
    // answered NOT_SUPPORTED on the H200.
    workspace_ = ctx.alloc(kCublasWorkspaceBytes, BufferRole::scratch);

    ROOFBENCH_CUBLASLT(cublasLtCreate(lt_.handle.replace()));
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescCreate(lt_.desc.replace(), CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_desc(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set_desc(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    // Column-major shapes as stored: A^T is k x m, B is k x n, C is m x n.
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(lt_.a.replace(), CUDA_R_8F_E4M3, k, m, k));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(lt_.b.replace(), CUDA_R_8F_E4M3, k, n, k));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(lt_.c.replace(), CUDA_R_16BF, m, n, m));

    // The algorithm is chosen once here so run() is a single enqueue.
    CublasLtPreference preference;
    ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceCreate(preference.replace()));
    const std::uint64_t workspace_bytes = kCublasWorkspaceBytes;
    ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_bytes, sizeof(workspace_bytes)));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoGetHeuristic(lt_.handle.get(), lt_.desc.get(), lt_.a.get(), lt_.b.get(),
                                                      lt_.c.get(), lt_.c.get(), preference.get(), 1, &heuristic,
                                                      &found));
    ROOFBENCH_CUBLASLT(preference.destroy());
    if (found == 0)
      throw Error("micro: cuBLASLt has no fp8 (e4m3 x e4m3 -> bf16) algorithm for " + std::to_string(m) + "x" +
                  std::to_string(n) + "x" + std::to_string(k));
    algorithm_ = heuristic.algo;
  }

  template <typename Value>
  void set_desc(cublasLtMatmulDescAttributes_t attribute, const Value& value) {
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(lt_.desc.get(), attribute, &value, sizeof(value)));
  }

  LtMatmul lt_;
  cublasLtMatmulAlgo_t algorithm_{};
  void* workspace_ = nullptr;
};

// ---- the axes ----

std::string mnk(std::int64_t m, std::int64_t n, std::int64_t k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

std::vector<std::string> square_shapes(std::int64_t first, std::int64_t last) {
  std::vector<std::string> shapes;
  for (std::int64_t size = first; size <= last; size *= 2) shapes.push_back(mnk(size, size, size));
  return shapes;
}

// Square sizes from launch-bound to compute-bound, then shapes of transformer layers (m = tokens):
// MLP up and down projections, a wide MLP, and a decode-sized batch that is memory-bound. All are
// multiples of 16 (fp8's requirement); the largest, 16384^3 in fp32, takes 3 GiB.
std::vector<std::string> cublas_shapes() {
  std::vector<std::string> shapes = square_shapes(256, 16384);
  for (const char* layer : {"8192x2048x512", "8192x512x2048", "16384x4096x1024", "4096x14336x4096", "128x4096x4096"})
    shapes.emplace_back(layer);
  return shapes;
}

constexpr std::int64_t kBatchedSize = 256;

}  // namespace

void add_matmul_cases(Plugin& plugin) {
  for (const CublasPrecision& precision : kCublasPrecisions) {
    plugin.add(gpu_case(std::string("matmul_cublas_") + precision.name, precision.description,
                        Axis::strings("mnk", cublas_shapes()), precision.precision,
                        [&precision](const Params& params) -> std::unique_ptr<Case> {
                          return std::make_unique<CublasMatmul>(parse_mnk(params.str("mnk")), 1, precision, false);
                        }));
  }
  plugin.add(gpu_case(
      "matmul_cublas_fp8", "cuBLASLt fp8 GEMM (e4m3 A and B, bf16 out, fp32 accumulation, unit scales), TN layout",
      Axis::strings("mnk", cublas_shapes()), Precision::fp8, [](const Params& params) -> std::unique_ptr<Case> {
        return std::make_unique<CublasLtFp8Matmul>(parse_mnk(params.str("mnk")));
      }));

  struct Handwritten {
    const char* name;
    MatmulLauncher launch;
    const char* description;
  };
  for (const Handwritten& kernel : {
           Handwritten{"matmul_naive_fp32", kernels::launch_matmul_naive_fp32,
                       "hand-written fp32 matmul, one thread per output reading global memory directly"},
           Handwritten{"matmul_tiled_fp32", kernels::launch_matmul_tiled_fp32,
                       "hand-written fp32 matmul, 64x64 shared-memory tiles with 4x4 register blocking"},
       }) {
    plugin.add(gpu_case(kernel.name, kernel.description, Axis::strings("mnk", square_shapes(256, 4096)),
                        Precision::fp32, [launch = kernel.launch](const Params& params) -> std::unique_ptr<Case> {
                          return std::make_unique<HandwrittenMatmul>(parse_mnk(params.str("mnk")), launch);
                        }));
  }

  {
    CaseSpec spec = gpu_case(
        "matmul_batched_bf16", "cublasGemmStridedBatchedEx of 256x256x256 bf16 GEMMs, swept over the batch size",
        Axis::powers("batch", 1, 16384), Precision::bf16, [](const Params& params) -> std::unique_ptr<Case> {
          const std::int64_t batch = params.integer("batch");
          if (batch <= 0) throw Error("micro: batch must be positive");
          return std::make_unique<CublasMatmul>(MatmulShape{kBatchedSize, kBatchedSize, kBatchedSize}, batch,
                                                cublas_precision(Precision::bf16), true);
        });
    spec.sweep_axis = "batch";
    plugin.add(std::move(spec));
  }
}

}  // namespace roofbench::micro
