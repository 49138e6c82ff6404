// GPT-2 small's two MLP projections (768 -> 3072 and 3072 -> 768) in bf16 through cuBLAS, at 1 to 8192
// tokens: a GEMM whose arithmetic intensity grows with the tokens in flight, from a weight read (decode)
// to compute-bound (prefill).
//
// Stored as PyTorch stores them: x [tokens, in] and y [tokens, out] row-major, W [out, in] row-major. In
// cuBLAS's column-major terms y^T = W x^T is C (out x tokens) = A^T B with A = W^T (in x out), the "TN" form
// the micro plugin uses, so the sampled matmul gate of roofbench/case_support/gate.hpp applies as it is.
#include <cublas_v2.h>

#include <climits>

#include "cases.hpp"
#include "roofbench/case_support/cublas_on_stream.hpp"
#include "roofbench/case_support/formats.hpp"
#include "roofbench/case_support/gate.hpp"

namespace roofbench::transformer {
namespace {

class Linear final : public Case {
 public:
  Linear(std::int64_t in, std::int64_t out, std::int64_t tokens) : in_(in), out_(out), tokens_(tokens) {
    if (in > INT_MAX || out > INT_MAX || tokens > INT_MAX) throw Error("transformer: linear sizes exceed cuBLAS's int");
  }

  void setup(Context& ctx) override {
    w_ = ctx.alloc(std::size_t(in_ * out_) * 2, BufferRole::input);
    x_ = ctx.alloc(std::size_t(in_ * tokens_) * 2, BufferRole::input);
    y_ = ctx.alloc(std::size_t(out_ * tokens_) * 2, BufferRole::output);
    ctx.fill_random(w_, std::size_t(in_ * out_), ElementType::bf16);
    ctx.fill_random(x_, std::size_t(in_ * tokens_), ElementType::bf16);
    scan_.setup(ctx);
    cublas_.setup(ctx);
  }

  void run(Context& ctx) override {
    const float one = 1.0f, zero = 0.0f;
    ROOFBENCH_CUBLAS(cublasGemmEx(cublas_.on(ctx), CUBLAS_OP_T, CUBLAS_OP_N, int(out_), int(tokens_), int(in_), &one, w_,
                                  CUDA_R_16BF, int(in_), x_, CUDA_R_16BF, int(in_), &zero, y_, CUDA_R_16BF, int(out_),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  Work work() const override {
    Work w;
    w.flops = 2.0 * double(tokens_) * double(in_) * double(out_);
    const double read = 2.0 * double(in_ * out_ + in_ * tokens_), written = 2.0 * double(out_ * tokens_);
    w.bytes = read + written;
    w.items = double(tokens_);
    w.item_name = "tokens";
    // At a few tokens the weight read is nearly all the traffic: judge it by the read roof.
    w.read_dominated = written <= 0.1 * w.bytes;
    return w;
  }

  Check check(Context& ctx) override {
    case_support::MatmulOperands operands{.a = {w_, ElementType::bf16},
                                          .b = {x_, ElementType::bf16},
                                          .c = {y_, ElementType::bf16},
                                          .a_strides = case_support::MatrixStrides::row_major(out_, in_),
                                          .b_strides = case_support::MatrixStrides::column_major(in_, tokens_),
                                          .c_strides = case_support::MatrixStrides::column_major(out_, tokens_),
                                          .m = out_,
                                          .n = tokens_,
                                          .k = in_,
                                          .batch = 1};
    return case_support::check_matmul_sampled(ctx, operands, scan_);
  }

  void teardown(Context&) override { cublas_.teardown(); }

  std::vector<Counter> counters() const override {
    return {{"weight_bytes", 2.0 * double(in_ * out_)}};
  }

 private:
  std::int64_t in_, out_, tokens_;
  void *w_ = nullptr, *x_ = nullptr, *y_ = nullptr;
  case_support::NonfiniteScan scan_;
  case_support::CublasOnStream cublas_;
};

}  // namespace

std::unique_ptr<Case> make_linear(std::int64_t in_features, std::int64_t out_features, std::int64_t tokens) {
  return std::make_unique<Linear>(in_features, out_features, tokens);
}

void add_linear_cases(Plugin& plugin) {
  CaseSpec spec;
  spec.name = "linear_bf16";
  spec.description =
      "GPT-2 small's MLP projections (768x3072 = fc, 3072x768 = proj) in bf16 through cublasGemmEx, tokens 1 to "
      "8192: a weight read at one token, compute-bound in prefill";
  spec.axes = {Axis::strings("layer", {"768x3072", "3072x768"}), Axis::powers("tokens", 1, 8192)};
  spec.device = DeviceNeed::gpu();
  spec.precision = Precision::bf16;
  spec.make = [](const Params& p) {
    const std::string& layer = p.str("layer");
    const auto x = layer.find('x');
    return make_linear(std::stoll(layer.substr(0, x)), std::stoll(layer.substr(x + 1)), p.integer("tokens"));
  };
  plugin.add(std::move(spec));
}

}  // namespace roofbench::transformer
