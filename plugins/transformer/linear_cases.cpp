// GPT-2 small's two MLP projections (768 -> 3072 and 3072 -> 768) in bf16, at 1 to 8192 tokens: a GEMM
// whose arithmetic intensity grows with the tokens in flight, from a weight read (decode) to compute-bound
// (prefill). Two implementations: `cublaslt`, one cuBLASLt call at every token count with the algorithm
// chosen in setup (the heuristic's top candidates timed as CUDA-graph groups of launches, the fastest kept and
// named in the facts), and `gemv`, a hand GEMV for 1 to 8 tokens (gemv.hpp; the lab's versions are
// gemv_v1 to gemv_v10, `gemv` the best on the device, best_gemv_version; the `launch` fact of gemv_v3 to
// gemv_v10 says that their launches overlap).
//
// One token is a 4.72 MB weight read. Cold (--cold), the runs read W from copies exceeding twice the L2 in turn,
// x and y staying in place (Linear::rotation), and a chained gemv's time per run is a chain's time per layer
// (plugins/transformer/README.md has the figures).
//
// Stored as PyTorch stores them: x [tokens, in] and y [tokens, out] row-major, W [out, in] row-major. In
// cuBLAS's column-major terms y^T = W x^T is C (out x tokens) = A^T B with A = W^T (in x out), the "TN" form
// the micro plugin uses, so the sampled matmul gate of roofbench/case_support/gate.hpp applies as it is.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>

#include "cases.hpp"
#include "gemv.hpp"
#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/case_support/cublas_on_stream.hpp"
#include "roofbench/case_support/formats.hpp"
#include "roofbench/case_support/gate.hpp"
#include "roofbench/case_support/input_copies.hpp"
#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench::transformer {
namespace {


// Owns W, x and y, counts the work and runs the gate; subclasses compute y.
class Linear : public Case {
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
    copies_.add(w_, std::size_t(in_ * out_) * 2, BufferRole::input);  // cold: W alone rotates (rotation())
    scan_.setup(ctx);
    prepare(ctx);
  }

  Work work() const override {
    Work w;
    w.flops = 2.0 * double(tokens_) * double(in_) * double(out_);
    const double read = 2.0 * double(in_ * out_ + in_ * tokens_), written = 2.0 * double(out_ * tokens_);
    w.bytes = read + written;
    w.bytes_read = read;
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
    return case_support::check_matmul_sampled(ctx, operands, scan_, gate_figures_);
  }

  // Cold, runs read W from copies in turn (input_copies.hpp); x and y stay in place, as a chain of layers leaves
  // its activations in the L2 for the next layer (the `cold_rotation` fact says so). Rotating x too made its read,
  // after the chained GEMVs' wait, a cold one: on an H100, gemv_v9 at one token 2.53 us against 2.38. The
  // host captures the runs one after another on the case's stream, with nothing between them (use() only moves
  // the pointers), so the consecutive runs of gemv_v3 to gemv_v10 are joined in the graph by programmatic edges and
  // overlap.
  Rotation* rotation() override { return &copies_; }

  // The weights' size, the gate's counts, then how the point ran.
  std::vector<Figure> figures() const override {
    std::vector<Figure> figures{
        {"weight_bytes", 2.0 * double(in_ * out_)},
        {"cold_rotation", "W alone; x and y stay in place, in the L2 as a layer chain's activations"}};
    figures.insert(figures.end(), gate_figures_.begin(), gate_figures_.end());
    figures.insert(figures.end(), facts_.begin(), facts_.end());
    return figures;
  }

 protected:
  virtual void prepare(Context&) {}

  std::int64_t in_, out_, tokens_;
  void *w_ = nullptr, *x_ = nullptr, *y_ = nullptr;
  case_support::InputCopies copies_;
  case_support::NonfiniteScan scan_;
  std::vector<Figure> gate_figures_;
  std::vector<Figure> facts_;  // texts
};

// The candidates cuBLASLt's heuristic offers, timed here; more rarely changes the winner.
constexpr int kCandidates = 8;

class LtLinear final : public Linear {
 public:
  using Linear::Linear;

  void run(Context& ctx) override { matmul(algorithm_, cuda::stream(ctx)); }

  void teardown(Context&) override {
    lt_.destroy();
  }

 private:
  void prepare(Context& ctx) override {
    workspace_ = ctx.alloc(case_support::kCublasWorkspaceBytes, BufferRole::scratch);
    ROOFBENCH_CUBLASLT(cublasLtCreate(lt_.handle.replace()));
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescCreate(lt_.desc.replace(), CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(lt_.desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(lt_.desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(lt_.a.replace(), CUDA_R_16BF, in_, out_, in_));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(lt_.b.replace(), CUDA_R_16BF, in_, tokens_, in_));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(lt_.c.replace(), CUDA_R_16BF, out_, tokens_, out_));
    case_support::CublasLtPreference preference;
    ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceCreate(preference.replace()));
    const std::size_t workspace_bytes = case_support::kCublasWorkspaceBytes;
    ROOFBENCH_CUBLASLT(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_bytes, sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t found[kCandidates] = {};
    int count = 0;
    ROOFBENCH_CUBLASLT(cublasLtMatmulAlgoGetHeuristic(lt_.handle.get(), lt_.desc.get(), lt_.a.get(), lt_.b.get(),
                                                      lt_.c.get(), lt_.c.get(), preference.get(), kCandidates,
                                                      found, &count));
    ROOFBENCH_CUBLASLT(preference.destroy());
    if (count < 1) throw NotApplicable("cuBLASLt's heuristic offers no algorithm for this shape");
    choose(ctx, found, count);
  }

  // Times each candidate as conv times cuDNN's (case_support::time_each: warm-up, then the median of CUDA-graph
  // groups of back-to-back launches, as the host replays a short run), so that at 1-8 tokens, where one
  // eager cublasLtMatmul call costs about what its kernel does, the host's launch cost does not decide.
  // Chooses a launch path, not a figure: the host times the case.
  void choose(Context& ctx, const cublasLtMatmulHeuristicResult_t* found, int count) {
    case_support::TimingPlan plan;
    plan.require_graph = true;
    const std::vector<case_support::CandidateTiming> timings = case_support::time_each(
        cuda::stream(ctx), std::size_t(count), [&](std::size_t c) { matmul(found[c].algo, cuda::stream(ctx)); }, plan);
    std::vector<std::string> labels;
    for (int c = 0; c < count; ++c)
      labels.push_back("heuristic candidate " + std::to_string(c + 1) + " (" +
                       case_support::describe_lt_algorithm(found[c].algo) + ")");
    const std::size_t best = case_support::fastest(timings, labels);
    algorithm_ = found[best].algo;
    facts_.push_back({"algorithm", labels[best] + " of " + std::to_string(count)});
    facts_.push_back({"algorithm_search", "cublasLtMatmulAlgoGetHeuristic's top " + std::to_string(count) + ", " +
                                              case_support::describe_timings(labels, timings, plan.groups)});
  }

  void matmul(const cublasLtMatmulAlgo_t& algorithm, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    ROOFBENCH_CUBLASLT(cublasLtMatmul(lt_.handle.get(), lt_.desc.get(), &one, w_, lt_.a.get(), x_, lt_.b.get(), &zero, y_,
                                      lt_.c.get(), y_, lt_.c.get(), &algorithm, workspace_,
                                      case_support::kCublasWorkspaceBytes, stream));
  }

  case_support::LtMatmul lt_;
  cublasLtMatmulAlgo_t algorithm_{};
  void* workspace_ = nullptr;
};

// version: one of gemv_versions(), or empty for the best on the case's device (best_gemv_version, at setup).
class GemvLinear final : public Linear {
 public:
  GemvLinear(std::string version, std::int64_t in, std::int64_t out, std::int64_t tokens)
      : Linear(in, out, tokens), version_(std::move(version)) {
    const auto& versions = gemv_versions();
    if (!version_.empty() && std::find(versions.begin(), versions.end(), version_) == versions.end())
      throw Error("transformer: no gemv version '" + version_ + "'");
    if (const std::string why = gemv_refusal(in, out, tokens); !why.empty()) throw NotApplicable(why);
    if (!version_.empty()) name_version();
  }
  // What a later run reads, for v8 to v10 to prefetch: under --cold the copy of W gemv_prefetch_distance runs
  // ahead, nothing otherwise. x stays in place (rotation()), so v9 has no other x to ask for and runs as v8.
  void run(Context& ctx) override {
    const void* w = w_;
    for (int ahead = gemv_prefetch_distance(version_); ahead > 0; --ahead) w = copies_.after(w);
    const GemvNextRun next{w == w_ ? nullptr : w, std::size_t(in_ * out_) * 2};
    gemv_bf16(version_, w_, x_, y_, in_, out_, tokens_, cuda::stream(ctx), chain_, next);
  }

 private:
  // What the `launch` fact says of v3 to v10: what their time per launch is.
  static constexpr const char* kChainedLaunch =
      "programmatic dependent launch (PDL): each launch may start while the one before it runs, issuing its weight "
      "loads before it waits for that one to finish, so back-to-back launches overlap and the time per launch is a "
      "chain's time per layer, not one kernel's alone";

  void name_version() {
    facts_.push_back({"kernel", "gemv_" + version_ + kernel_text(version_)});
    if (gemv_launches_overlap(version_)) facts_.push_back({"launch", kChainedLaunch});
  }

  static std::string kernel_text(const std::string& version) {
    if (version == "v1") return ": a warp per 768-wide segment of a row of W, its 16-byte loads all issued first";
    if (version == "v2") return ": about 36 KB of rows of W per block, one bulk copy per warp into shared memory";
    if (version == "v4") return ": gemv_v3 with 4 rows a warp, so the next launches' blocks fit beside it";
    if (version == "v5") return ": gemv_v4 with its rows of W held in shared memory, so more launches' blocks fit";
    if (version == "v6")
      return ": gemv_v2 launched with PDL, its bulk copies issued before it waits for the launch before it";
    if (version == "v7")
      return ": gemv_v3 waiting for the launch before it by counts that launch's blocks raise after their stores, not "
             "for its grid's completion";
    if (version == "v8")
      return ": gemv_v3 asking the L2 for the next run's weights (the next copy's under --cold) once its own loads are "
             "issued";
    if (version == "v9")
      return ": gemv_v8 asking the L2 for the next run's x as well (none here: x stays in place, so it runs as v8)";
    if (version == "v10")
      return ": gemv_v8 asking the L2 for the weights of the run after next (that copy's under --cold), two layers "
             "ahead";
    return ": gemv_v1 launched with PDL, its weight loads issued before it waits for the launch before it";
  }

  // The best version resolved and named; has_bulk_copy: compute capability 9.0 or later, which PDL's
  // griddepcontrol needs too; and this build's code for the device must have the instructions (gemv_code_has_sm90).
  void prepare(Context& ctx) override {
    const int device = ctx.device().index;
    if (version_.empty()) {
      version_ = best_gemv_version(device);
      name_version();
    }
    const std::string feature = gemv_sm90_feature(version_);
    if (feature.empty()) return;
    const std::string what = "transformer: gemv_" + version_ + " " + feature + ", which needs ";
    if (!has_bulk_copy(device)) throw NotApplicable(what + "sm_90 or later");
    if (!gemv_code_has_sm90(version_, device))
      throw NotApplicable(what + "code compiled for compute_90 or later, which this build does not give this GPU");
    if (gemv_launches_overlap(version_) && !has_fact("blocks_per_sm"))  // the blocks an SM holds at once
      facts_.push_back({"blocks_per_sm", std::to_string(gemv_blocks_per_sm(version_, in_, tokens_, device))});
    if (gemv_needs_chain(version_)) {  // every run of the case is one chain, the gate's and the timed ones
      chain_ = ctx.alloc(kGemvChainBytes, BufferRole::scratch);
      const unsigned char zeros[kGemvChainBytes] = {};
      ctx.copy_to_device(chain_, zeros, sizeof zeros);
    }
  }

  bool has_fact(const std::string& name) const {
    for (const Figure& f : facts_)
      if (f.name == name) return true;
    return false;
  }

  std::string version_;
  void* chain_ = nullptr;  // v7's chain state
};

}  // namespace

std::string best_gemv_version(int device_index) {
  return has_bulk_copy(device_index) && gemv_code_has_sm90(kBestSm90GemvVersion, device_index) ? kBestSm90GemvVersion
                                                                                                 : kBestGemvVersion;
}

std::unique_ptr<Case> make_linear(std::int64_t in_features, std::int64_t out_features, std::int64_t tokens,
                                  const std::string& impl) {
  if (impl == "cublaslt") return std::make_unique<LtLinear>(in_features, out_features, tokens);
  if (impl == "gemv") return std::make_unique<GemvLinear>("", in_features, out_features, tokens);
  if (impl.rfind("gemv_", 0) == 0) return std::make_unique<GemvLinear>(impl.substr(5), in_features, out_features, tokens);
  throw Error("transformer: no linear implementation '" + impl + "'");
}

void add_linear_cases(Plugin& plugin) {
  CaseSpec spec;
  spec.name = "linear_bf16";
  spec.description =
      "GPT-2 small's MLP projections (768x3072 = fc, 3072x768 = proj) in bf16, tokens 1 to 8192: a weight read at "
      "one token, compute-bound in prefill; cuBLASLt (the fastest of its heuristic's candidates, timed in setup) "
      "at every token count, or a hand GEMV at 1 to 8";
  std::vector<std::string> impls = {"cublaslt", "gemv"};
  for (const std::string& v : gemv_versions()) impls.push_back("gemv_" + v);
  spec.axes = {Axis::strings("layer", {"768x3072", "3072x768"}), Axis::powers("tokens", 1, 8192),
               Axis::strings("impl", impls)};
  spec.device = DeviceNeed::gpu();
  spec.precision = Precision::bf16;
  spec.make = [](const Params& p) {
    const std::string& layer = p.str("layer");
    const auto x = layer.find('x');
    return make_linear(std::stoll(layer.substr(0, x)), std::stoll(layer.substr(x + 1)), p.integer("tokens"),
                       p.str("impl"));
  };
  plugin.add(std::move(spec));
}

}  // namespace roofbench::transformer
