// The kernel lab, out of the training path (llm.c keeps its numbered kernels apart from the training code):
// each numbered version of a piece of R1's step is a benchmark of its own, named by its version, timed at
// the training shape and gated against a double-precision CPU reference (lab_reference.hpp). The trainers
// run the keepers only (attention v8 for fp32 and v44 for bf16, v9 where v44's sm_90a kernels do not run,
// elementwise v3, weight gradients v3); the lab's own versions are rows of its tables. Retired versions leave the
// tables; plugins/gpt/README.md keeps their figures.
//   lab_attention/version:v1|v8       the fused attention's forward + backward, fp32 (attention_versions.hpp)
//   lab_attention_bf16/version:v7|v9|v10|...|v52/batch:64|128|256|512  the same on bf16 tensors, at R2's
//                                     batch, R3's and two between
//                                     (v10 to v52: sm_90a, compute capability 9.0 only)
//   lab_elementwise/version:v1|v2|v3  the MLP's bias + GELU forward, GELU's backward and fc's bias gradient
//                                     (elementwise_versions.hpp)
//   lab_elementwise_bf16/version:v1|v2|v3|v4  the same on bf16 tensors (R2-R4's)
//   lab_wgrad/version:v1|v2|v3     the four weight-gradient GEMMs of a block (wgrad_versions.hpp)
//   lab_fc_gelu_bf16/version:v1|v4-v27/batch:64|512  the MLP's fc GEMM + bias + GELU forward, bf16: v1
//                                     cuBLASLt with its bias epilogue + GELU pass, v4 (R2-R4's without
//                                     sm_90a) the bias moved from the GEMM into the GELU pass, v5-v27 one
//                                     sm_90a GEMM whose epilogue writes both outputs, v14 R2-R4's on sm_90a
//                                     (kFcGeluVersions)
//   lab_fc_gelu_backward_bf16/version:v1-v9/batch:64|512  fc_proj's input gradient + GELU's backward + fc's
//                                     bias gradient, bf16: v1 cuBLASLt + the GELU backward pass, v2 one sm_90a
//                                     GEMM whose epilogue does the rest, v3 (R2-R4's on sm_90a) and v4 v2
//                                     on clusters sharing w, and dy, v5-v9 (kFcGeluBackwardVersions)
//   lab_qkv_wgrad_bf16/version:v1|v2/batch:64|512  the qkv layer's weight and bias gradients: v1 (R2-R4's off
//                                     sm_90a) the GEMM then a column-sum pass, v2 the GEMM's BGRADB epilogue
//                                     (kQkvWgradVersions)
//   lab_attention_qkv_bias_bf16/version:v1-v16/batch:64|512  the attention's backward with qkv's bias gradient:
//                                     v1 the keeper's backward then a column-sum pass over dqkv, v2 v26's backward
//                                     summing dqkv's columns as it stores them, v3 to v16 v34's, v37's to v42's,
//                                     v44's to v49's and v52's summing them (v10, the keeper's, R2-R4's on sm_90a)
//   lab_embedding_backward/version:v1|v2/batch:64|512  the token embedding's backward: v1 (every rung's) a
//                                     one-hot matrix and a GEMM, v2 dx's rows gathered by token
//   lab_step_gemms_bf16/batch:64|512  no versions: the blocks' GEMMs of R2's and R3's step alone, for the
//                                     share of a step's energy only the GEMMs can change (--energy)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_versions.hpp"
#include "bf16.hpp"
#include "elementwise_versions.hpp"
#include "fc_gelu_sm90a.hpp"
#include "lab_cases.hpp"
#include "lab_reference.hpp"
#include "layers.hpp"
#include "model.hpp"
#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"
#include "trainer.hpp"
#include "training_gates.hpp"
#include "version_table.hpp"
#include "wgrad_versions.hpp"

namespace roofbench::gpt::cuda {
namespace {

// The training shape: model.hpp's defaults, the batch from the axis.
Config lab_config(const Params& params) {
  Config cfg;
  cfg.batch = static_cast<int>(params.integer("batch"));
  cfg.validate();
  return cfg;
}


float* alloc_floats(Context& ctx, std::size_t count, BufferRole role) {
  return static_cast<float*>(ctx.alloc(count * sizeof(float), role));
}

std::vector<float> download(Context& ctx, const float* device, std::size_t count) {
  std::vector<float> host(count);
  ctx.copy_to_host(host.data(), device, count * sizeof(float));
  return host;
}

// A device array of fp32 or bf16 values, widened to float on the host.
template <typename Elem>
std::vector<float> download_as_float(Context& ctx, const Elem* device, std::size_t count) {
  if constexpr (std::is_same_v<Elem, bf16>) {
    std::vector<std::uint16_t> bits(count);
    ctx.copy_to_host(bits.data(), device, count * sizeof(std::uint16_t));
    std::vector<float> host(count);
    std::transform(bits.begin(), bits.end(), host.begin(), float_from_bf16_bits);
    return host;
  } else {
    return download(ctx, device, count);
  }
}

// Entries device[i] for each i of `at`, widened to float: a gate's samples of an output too large to read back.
template <typename Elem>
std::vector<float> download_entries(Context& ctx, const Elem* device, const std::vector<std::size_t>& at) {
  std::vector<float> host;
  host.reserve(at.size());
  for (const std::size_t i : at) host.push_back(download_as_float(ctx, device + i, 1)[0]);
  return host;
}

// Elements of device[0..count) that are Inf or NaN, read back 4M at a time (R3's fc output is 268 MB). The host
// poisons a case's outputs before its gate run, so an element the case left unwritten is not finite.
template <typename Elem>
std::size_t count_not_finite(Context& ctx, const Elem* device, std::size_t count) {
  constexpr std::size_t kSlice = std::size_t{1} << 22;
  std::size_t bad = 0;
  for (std::size_t begin = 0; begin < count; begin += kSlice) {
    const std::vector<float> slice = download_as_float(ctx, device + begin, std::min(kSlice, count - begin));
    bad += static_cast<std::size_t>(
        std::count_if(slice.begin(), slice.end(), [](float v) { return !std::isfinite(v); }));
  }
  return bad;
}

// A lab case's cuBLASLt: the handle, a workspace the size of the trainers' cuBLAS workspace, and the
// algorithm choices its calls report (layers.hpp's LtContext).
struct LabLt {
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  case_support::CublasLtHandle handle;  // a setup that throws half way gives it back through the destructor
  void* workspace = nullptr;
  std::set<std::string> choices;

  void create(Context& ctx) {
    ROOFBENCH_CUBLASLT(cublasLtCreate(handle.replace()));
    workspace = ctx.alloc(kWorkspaceBytes, BufferRole::scratch);
  }
  LtContext context(Context& ctx) {
    return LtContext{handle.get(), LtWorkspace{workspace, kWorkspaceBytes}, roofbench::cuda::stream(ctx), &choices};
  }
  // The choices as one fact's value, "; " between them.
  std::string choices_line() const {
    std::string line;
    for (const std::string& choice : choices) line += (line.empty() ? "" : "; ") + choice;
    return line;
  }
  // A version's facts: its kernel, and cuBLASLt's choices where it made any.
  std::vector<Figure> kernel_figures(const char* kernel) const {
    std::vector<Figure> out = {{"kernel", kernel}};
    if (const std::string line = choices_line(); !line.empty()) out.push_back({"matmul_algorithms", line});
    return out;
  }
};

// The largest of several relative errors, with each one named in the detail.
struct WorstError {
  double worst = 0;
  bool within_limits = true;
  std::ostringstream detail;
  void add(const std::string& what, double error) {
    detail << what << " rel L2 " << format_gate_number(error) << "; ";
    worst = std::isnan(error) || std::isnan(worst) ? std::nan("") : std::max(worst, error);
  }
  // An error that also has a limit of its own, tighter than the case's tolerance: above it the gate fails.
  void add_within(const std::string& what, double error, double limit) {
    add(what, error);
    if (error < limit) return;
    within_limits = false;
    detail << what << " above " << format_gate_number(limit) << "; ";
  }
  Check result() const {
    Check check;
    check.rel_l2_error = worst;
    check.detail = detail.str();
    check.passed_extra = within_limits;
    return check;
  }
};

// ---------------------------------------------------------------------------------------------------
// The attention labs' tensors at one configuration: qkv, its bias, dout, the forward's out and lse, the backward's
// delta and dqkv, and RoPE's table, with the double reference their gates compare the first kGateSequences
// sequences against (those sequences' outputs and gradients depend on themselves only).
template <typename Elem>
struct AttentionTensors {
  Config cfg;
  Elem *qkv = nullptr, *dout = nullptr, *out = nullptr, *dqkv = nullptr;
  float *bias = nullptr, *lse = nullptr, *delta = nullptr;
  RopeTable rope;

  std::size_t positions() const { return static_cast<std::size_t>(cfg.batch) * cfg.context; }
  std::size_t stat_count() const { return static_cast<std::size_t>(cfg.batch) * cfg.heads * cfg.context; }
  std::size_t channels() const { return static_cast<std::size_t>(cfg.channels); }
  std::size_t gate_rows() const { return static_cast<std::size_t>(kGateSequences) * cfg.context; }
  AttentionShape shape() const { return AttentionShape{cfg.batch, cfg.context, cfg.heads, cfg.head_dim()}; }

  // Allocates and fills them (random qkv, bias and dout at the tensors' precision, RoPE's table uploaded): out
  // and lse in `forward_role`, outputs where the timed run writes them, inputs where setup makes them once.
  void allocate(Context& ctx, BufferRole forward_role) {
    const std::size_t N = positions(), C = channels(), half = static_cast<std::size_t>(cfg.head_dim() / 2) * cfg.context;
    qkv = alloc<Elem>(ctx, N * 3 * C, BufferRole::input);
    bias = alloc_floats(ctx, 3 * C, BufferRole::input);
    dout = alloc<Elem>(ctx, N * C, BufferRole::input);
    out = alloc<Elem>(ctx, N * C, forward_role);
    lse = alloc_floats(ctx, stat_count(), forward_role);
    delta = alloc_floats(ctx, stat_count(), BufferRole::scratch);
    dqkv = alloc<Elem>(ctx, N * 3 * C, BufferRole::output);
    rope = RopeTable{alloc_floats(ctx, half, BufferRole::input), alloc_floats(ctx, half, BufferRole::input),
                     cfg.head_dim() == 2 * kRopeLaneOrderedPairs ? alloc_floats(ctx, 2 * half, BufferRole::input)
                                                                  : nullptr};
    const ElementType type = std::is_same_v<Elem, bf16> ? ElementType::bf16 : ElementType::f32;
    ctx.fill_random(qkv, N * 3 * C, type);
    ctx.fill_random(bias, 3 * C, ElementType::f32, -0.2, 0.2);
    ctx.fill_random(dout, N * C, type);
    upload_rope_table(cfg, rope, roofbench::cuda::stream(ctx));
  }

  // The reference of the first kGateSequences sequences, fed the inputs as stored.
  reference::AttentionReference gate_reference(Context& ctx) const {
    const std::size_t rows = gate_rows(), C = channels();
    return reference::attention_reference(download_as_float(ctx, qkv, rows * 3 * C), download(ctx, bias, 3 * C),
                                          download_as_float(ctx, dout, rows * C), kGateSequences, cfg.heads,
                                          cfg.context, cfg.head_dim(), cfg.rope_base);
  }

  template <typename T>
  static T* alloc(Context& ctx, std::size_t count, BufferRole role) {
    return static_cast<T*>(ctx.alloc(count * sizeof(T), role));
  }
};

// ---------------------------------------------------------------------------------------------------
// Elem float: lab_attention (R1's tensors); Elem bf16: lab_attention_bf16 (R2's tensors, qkv and dout drawn as
// bf16, the reference fed the same values), each gated at its own precision. The version is a row of
// attention_versions.hpp's tables.
template <typename Elem>
class AttentionLab final : public Case {
 public:
  explicit AttentionLab(const Params& params) : version_(version_row(params)) { t_.cfg = lab_config(params); }

  void setup(Context& ctx) override {
    t_.allocate(ctx, BufferRole::output);
    version_.configure();
  }

  void run(Context& ctx) override {
    const AttentionShape s = t_.shape();
    version_.forward(t_.out, t_.lse, t_.qkv, t_.bias, t_.rope, s, roofbench::cuda::stream(ctx));
    version_.backward(t_.dqkv, t_.delta, t_.dout, t_.out, t_.lse, t_.qkv, t_.bias, t_.rope, s,
                      roofbench::cuda::stream(ctx));
  }

  // A kernel's count, as the transformer plugin's: only the query-key pairs the causal kernel computes,
  // T (T + 1) / 2 per head (the training step counts the full T x T, the MFU convention), backward twice
  // the forward. Minimum bytes: qkv read by both kernels, out written, lse written and read back, dout read, dqkv
  // written. out is not read back: a backward that holds a row's keys can take delta = rowsum(P dP) from its scores
  // (the bf16 row v43 does), so a version that reads it moves more than the count.
  Work work() const override {
    const Config& cfg = t_.cfg;
    const double N = static_cast<double>(t_.positions()), C = cfg.channels;
    const double T = cfg.context, causal_pairs = T * (T + 1) / 2;
    Work w;
    w.flops = 3 * 4.0 * cfg.batch * cfg.heads * causal_pairs * cfg.head_dim();
    w.bytes = static_cast<double>(sizeof(Elem)) * (N * 3 * C * 3 + N * C * 2) +
              4 * 2.0 * static_cast<double>(t_.stat_count());
    w.items = N;
    w.item_name = "tokens";
    return w;
  }

  std::vector<Figure> figures() const override { return {{"kernel", version_.kernel}}; }

  Check check(Context& ctx) override {
    const std::size_t rows = t_.gate_rows(), C = t_.channels();
    const auto ref = t_.gate_reference(ctx);
    WorstError errors;
    errors.add("out", relative_l2_error(download_as_float(ctx, t_.out, rows * C).data(), ref.out.data(), rows * C));
    errors.add("dqkv", relative_l2_error(download_as_float(ctx, t_.dqkv, rows * 3 * C).data(), ref.dqkv.data(),
                                         rows * 3 * C));
    return errors.result();
  }

 private:
  static const lab::AttentionVersion<Elem>& version_row(const Params& params) {
    if constexpr (std::is_same_v<Elem, bf16>)
      return lab::bf16_attention_version(params.str("version"));
    else
      return lab::fp32_attention_version(params.str("version"));
  }

  AttentionTensors<Elem> t_;
  const lab::AttentionVersion<Elem>& version_;
};

// ---------------------------------------------------------------------------------------------------
// The bf16 attention's backward with qkv's bias gradient (dqkv's column sums as stored), the forward's out and
// lse made once in setup by the keeper:
//   v1: the keeper's backward, then column_sum's two passes over dqkv (R2-R4's off the sm_90a path, and on it
//       before v2);
//   v2: v26's backward summing dqkv's columns as it stores them, then column_finish (R2-R4's on sm_90a before v3);
//   v3: v34's backward (the keeper's until v38) summing them the same way;
//   v4 to v10: lab_attention_bf16's v37 to v42 and v44 (v34 with the RoPE factors fetched under the products; v38 (the
//       keeper's until v44) with them from the table's lane-ordered copy; v39's masked exponents dropped by a select;
//       v40 both; v41 v40 with dk's factors as v37's; v42 v38 with the select in key half 1 alone; v44, the keeper's
//       and R2-R4's on sm_90a, v43 (delta from the scores, out unread) with v39's select) summing them the same way;
//   v11: lab_attention_bf16's v45 (v44 with a head's rows landing in two parts) summing them the same way;
//   v12: lab_attention_bf16's v46 (v44 with a branch on whether a chunk is masked) summing them the same way;
//   v13: lab_attention_bf16's v47 (v45 and v46 together) summing them the same way;
//   v14: lab_attention_bf16's v48 (v46's branch in key half 1 alone) summing them the same way;
//   v15: lab_attention_bf16's v49 (v44's steps on a ring of three head slots, two warp groups a block) summing them
//       the same way;
//   v16: lab_attention_bf16's v52 (v49 with v46's branch) summing them the same way.
struct QkvBiasVersion {
  const char* name;
  const char* kernel;
  void (*configure)();
  AttentionBackwardAndBiasGradient* backward;
};

void keeper_backward_then_column_sum(bf16* dqkv, float* dbias, float* partials, float* delta, const bf16* dout,
                                     const bf16* out, const float* lse, const bf16* qkv, const float* qkv_bias,
                                     RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  fused_attention_backward(dqkv, delta, dout, out, lse, qkv, qkv_bias, rope, s, stream);
  column_sum(dbias, dqkv, s.batch * s.T, 3 * s.channels(), partials, stream);
}

// A row on lab_attention_bf16's walk kVersion in its form that sums dqkv's columns, beside the keeper's forward.
template <int kVersion>
constexpr QkvBiasVersion walk_with_sums(const char* name, const char* kernel) {
  return {name, kernel, lab::configure_in_order<lab::walk_configure<kVersion>, fused_attention_configure>,
          lab::walk_backward_and_bias_gradient<kVersion>};
}

constexpr QkvBiasVersion kQkvBiasVersions[] = {
    {"v1", "the keeper's backward, then column_sum's two passes over dqkv", fused_attention_configure,
     keeper_backward_then_column_sum},
    walk_with_sums<26>("v2", "v26's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<34>("v3", "v34's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<37>("v4", "v37's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<38>("v5", "v38's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<39>("v6", "v39's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<40>("v7", "v40's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<41>("v8", "v41's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<42>("v9", "v42's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    {"v10", "v44's backward (the keeper's) summing dqkv's columns as it stores them, then column_finish (sm_90a)",
     lab::configure_in_order<fused_attention_sm90a_backward_configure, fused_attention_configure>,
     fused_attention_sm90a_backward_and_bias_gradient},
    walk_with_sums<45>("v11", "v45's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<46>("v12", "v46's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<47>("v13", "v47's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<48>("v14", "v48's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<49>("v15", "v49's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
    walk_with_sums<52>("v16", "v52's backward summing dqkv's columns as it stores them, then column_finish (sm_90a)"),
};

class QkvBiasLab final : public Case {
 public:
  explicit QkvBiasLab(const Params& params)
      : version_(lab::find_version(std::span<const QkvBiasVersion>(kQkvBiasVersions), params.str("version"),
                                   "lab_attention_qkv_bias_bf16")) {
    t_.cfg = lab_config(params);
  }

  void setup(Context& ctx) override {
    t_.allocate(ctx, BufferRole::input);  // out and lse: the forward's, made here
    dbias_ = alloc_floats(ctx, 3 * t_.channels(), BufferRole::output);
    partials_ = alloc_floats(ctx, attention_bias_partials_floats(t_.shape()), BufferRole::scratch);
    version_.configure();
    fused_attention_forward(t_.out, t_.lse, t_.qkv, t_.bias, t_.rope, t_.shape(), roofbench::cuda::stream(ctx));
    ctx.synchronize();
  }

  void run(Context& ctx) override {
    version_.backward(t_.dqkv, dbias_, partials_, t_.delta, t_.dout, t_.out, t_.lse, t_.qkv, t_.bias, t_.rope,
                      t_.shape(), roofbench::cuda::stream(ctx));
  }

  // lab_attention's count for the backward alone (twice the forward's); minimum traffic qkv, dout and lse read, dqkv
  // and the bias gradient written (out unread, as lab_attention's count has it).
  Work work() const override {
    const Config& cfg = t_.cfg;
    const double N = static_cast<double>(t_.positions()), C = cfg.channels;
    const double T = cfg.context, causal_pairs = T * (T + 1) / 2;
    Work w;
    w.flops = 8.0 * cfg.batch * cfg.heads * causal_pairs * cfg.head_dim();
    w.bytes = static_cast<double>(sizeof(bf16)) * (N * 3 * C * 2 + N * C) +
              4.0 * (static_cast<double>(t_.stat_count()) + 3 * C);
    w.items = N;
    w.item_name = "tokens";
    return w;
  }

  std::vector<Figure> figures() const override { return {{"kernel", version_.kernel}}; }

  // dqkv of the first kGateSequences sequences against the double reference; the bias gradient against double
  // sums of every row of dqkv as stored.
  Check check(Context& ctx) override {
    const std::size_t N = t_.positions(), C = t_.channels(), rows = t_.gate_rows();
    const auto ref = t_.gate_reference(ctx);
    const std::vector<float> dqkv = download_as_float(ctx, t_.dqkv, N * 3 * C);
    std::vector<double> sums(3 * C, 0.0);
    for (std::size_t e = 0; e < N * 3 * C; ++e) sums[e % (3 * C)] += dqkv[e];
    WorstError errors;
    errors.add("dqkv", relative_l2_error(dqkv.data(), ref.dqkv.data(), rows * 3 * C));
    // fp32 sums of the stored values: a block of rows left out or counted twice errs far above kBiasTolerance
    // and still inside the bf16 gate's.
    errors.add_within("bias gradient (against dqkv's sums)",
                      relative_l2_error(download(ctx, dbias_, 3 * C).data(), sums.data(), 3 * C), kBiasTolerance);
    return errors.result();
  }

 private:
  static constexpr double kBiasTolerance = 1e-5;

  AttentionTensors<bf16> t_;
  const QkvBiasVersion& version_;
  float *dbias_ = nullptr, *partials_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// The token embedding's backward: dwte += the rows of dx summed by their token (dx [N, C] fp32, tokens [N],
// dwte [V, C] fp32, which holds the head's share first: each run copies it in, then adds):
//   v1 (R0-R5's): a one-hot matrix [N, V], then cuBLAS's fp32 GEMM onehot^T dx (embedding_backward);
//   v2: dx's rows gathered by token into sums in shared memory, then the chunks added (embedding_backward_gather).
struct EmbeddingBackwardVersion {
  const char* name;
  const char* kernel;
  bool gather;
};
constexpr EmbeddingBackwardVersion kEmbeddingBackwardVersions[] = {
    {"v1", "a one-hot matrix, then cuBLAS's fp32 GEMM onehot^T dx", false},
    {"v2", "dx's rows gathered by token into sums in shared memory, then the chunks added in order", true},
};

class EmbeddingBackwardLab final : public Case {
 public:
  explicit EmbeddingBackwardLab(const Params& params)
      : cfg_(lab_config(params)),
        version_(lab::find_version(std::span<const EmbeddingBackwardVersion>(kEmbeddingBackwardVersions),
                                   params.str("version"), "lab_embedding_backward")) {}

  void setup(Context& ctx) override {
    const std::size_t N = rows(), C = cfg_.channels, V = cfg_.vocab;
    if (version_.gather && !embedding_gather_fits(cfg_.channels, cfg_.vocab))
      throw NotApplicable("v2's sums of " + std::to_string(V) + " tokens do not fit a block");
    dx_ = alloc_floats(ctx, N * C, BufferRole::input);
    head_share_ = alloc_floats(ctx, V * C, BufferRole::input);
    dwte_ = alloc_floats(ctx, V * C, BufferRole::output);
    tokens_ = static_cast<std::uint8_t*>(ctx.alloc(N, BufferRole::input));
    ctx.fill_random(dx_, N * C, ElementType::f32);
    ctx.fill_random(head_share_, V * C, ElementType::f32);
    std::mt19937_64 draw(ctx.seed());
    std::uniform_int_distribution<int> token(0, cfg_.vocab - 1);
    tokens_host_.resize(N);
    for (std::uint8_t& t : tokens_host_) t = static_cast<std::uint8_t>(token(draw));
    ctx.copy_to_device(tokens_, tokens_host_.data(), N);
    if (version_.gather) {
      partials_ = alloc_floats(ctx, embedding_gather_partials_floats(rows(), cfg_.channels, cfg_.vocab),
                               BufferRole::scratch);
    } else {
      onehot_ = alloc_floats(ctx, N * V, BufferRole::scratch);
      ROOFBENCH_CUBLAS(cublasCreate(cublas_.replace()));
      workspace_ = ctx.alloc(kWorkspaceBytes, BufferRole::scratch);  // cuBLAS allocates nothing in a capture
      ROOFBENCH_CUBLAS(cublasSetStream(cublas_.get(), roofbench::cuda::stream(ctx)));
      ROOFBENCH_CUBLAS(cublasSetWorkspace(cublas_.get(), workspace_, kWorkspaceBytes));
    }
  }

  void run(Context& ctx) override {
    const cudaStream_t stream = roofbench::cuda::stream(ctx);
    const int N = rows(), C = cfg_.channels, V = cfg_.vocab;
    ROOFBENCH_CUDA(cudaMemcpyAsync(dwte_, head_share_, static_cast<std::size_t>(V) * C * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
    if (version_.gather)
      embedding_backward_gather(dwte_, dx_, tokens_, partials_, N, C, V, stream);
    else
      embedding_backward(cublas_.get(), dwte_, dx_, tokens_, onehot_, N, C, V, stream);
  }

  // Minimum traffic: dx and the tokens read, the head's share read and dwte written.
  Work work() const override {
    const double N = rows(), C = cfg_.channels, V = cfg_.vocab;
    Work w;
    w.bytes = 4.0 * N * C + N + 2 * 4.0 * V * C;
    w.items = N;
    w.item_name = "tokens";
    return w;
  }

  std::vector<Figure> figures() const override { return {{"kernel", version_.kernel}}; }

  // Every entry of dwte against double sums of the rows of dx by token, on the head's share.
  Check check(Context& ctx) override {
    const std::size_t N = rows(), C = cfg_.channels, V = cfg_.vocab;
    const std::vector<float> dx = download(ctx, dx_, N * C), share = download(ctx, head_share_, V * C);
    std::vector<double> want(share.begin(), share.end());
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t c = 0; c < C; ++c) want[tokens_host_[n] * C + c] += dx[n * C + c];
    WorstError errors;
    errors.add("dwte", relative_l2_error(download(ctx, dwte_, V * C).data(), want.data(), V * C));
    return errors.result();
  }

  void teardown(Context&) override { ROOFBENCH_CUBLAS(cublas_.destroy()); }

 private:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  int rows() const { return cfg_.batch * cfg_.context; }

  Config cfg_;
  const EmbeddingBackwardVersion& version_;
  float *dx_ = nullptr, *head_share_ = nullptr, *dwte_ = nullptr, *partials_ = nullptr, *onehot_ = nullptr;
  std::uint8_t* tokens_ = nullptr;
  std::vector<std::uint8_t> tokens_host_;
  case_support::CublasHandle cublas_;  // a setup that throws half way gives it back through the destructor
  void* workspace_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// The MLP's bias + GELU forward, GELU's backward and fc's bias gradient: Elem float (lab_elementwise, R1's
// tensors) or bf16 (lab_elementwise_bf16, R2's), the version a row of elementwise_versions.hpp's tables.
// A version with the bias in the epilogue, or in both passes, moves 5 tensors, not 6, and (but v4) its
// forward's reference adds no bias. The reference sees z as stored: the backward reads z after the forward
// (z + bias, rounded to Elem), v4's z and its bias.
template <typename Elem>
class ElementwiseLab final : public Case {
 public:
  static constexpr bool kBf16 = std::is_same_v<Elem, bf16>;

  explicit ElementwiseLab(const Params& params) : cfg_(lab_config(params)), version_(version_row(params)) {}

  void setup(Context& ctx) override {
    const std::size_t n = count(), cols = static_cast<std::size_t>(cfg_.hidden());
    z_ = alloc(ctx, n, BufferRole::input);
    dout_ = alloc(ctx, n, BufferRole::input);
    gelu_ = alloc(ctx, n, BufferRole::output);
    dz_ = alloc(ctx, n, BufferRole::output);
    dbias_ = alloc_floats(ctx, cols, BufferRole::output);
    partials_ = alloc_floats(ctx, column_partials_floats(rows(), cfg_.hidden()), BufferRole::scratch);
    const ElementType type = kBf16 ? ElementType::bf16 : ElementType::f32;
    ctx.fill_random(z_, n, type, -4, 4);
    if (bias_in_passes()) {  // v4 holds its bias in bf16, as the trainers do
      bias16_ = static_cast<bf16*>(ctx.alloc(cols * sizeof(bf16), BufferRole::input));
      ctx.fill_random(bias16_, cols, ElementType::bf16, -0.5, 0.5);
    } else {
      bias_ = alloc_floats(ctx, cols, BufferRole::input);
      ctx.fill_random(bias_, cols, ElementType::f32, -0.5, 0.5);
    }
    ctx.fill_random(dout_, n, type);
    z_before_ = download_as_float(ctx, z_, n);  // a forward that adds the bias does so into z in place
  }

  void run(Context& ctx) override {
    lab::GeluTensors<Elem> t;
    t.z = z_, t.out = gelu_, t.dout = dout_, t.dz = dz_, t.dbias = dbias_, t.partials = partials_;
    t.bias = bias_, t.bias16 = bias16_, t.rows = rows(), t.cols = cfg_.hidden();
    version_.forward(t, roofbench::cuda::stream(ctx));
    version_.backward(t, roofbench::cuda::stream(ctx));
  }

  // Minimum traffic: z read, z (unless the GEMM added the bias) and GELU written; dout and z read, dz written.
  Work work() const override {
    Work w;
    w.bytes = static_cast<double>(sizeof(Elem)) * (bias_in_gemm() || bias_in_passes() ? 5 : 6) * static_cast<double>(count());
    w.bytes_read = static_cast<double>(sizeof(Elem)) * 3 * static_cast<double>(count());  // z, dout, z
    w.items = static_cast<double>(count());
    w.item_name = "elements";
    return w;
  }

  Check check(Context& ctx) override {
    const std::size_t n = count();
    const int H = cfg_.hidden();
    const std::vector<float> no_bias(H, 0.0f);
    const std::vector<float> bias = bias_in_passes() ? download_as_float(ctx, bias16_, H)
                                    : bias_in_gemm() ? no_bias
                                                     : download(ctx, bias_, H);
    const std::vector<float> dout = download_as_float(ctx, dout_, n), z_after = download_as_float(ctx, z_, n);
    const auto forward = reference::bias_gelu_reference(z_before_, bias, dout, rows(), H);
    const auto backward = reference::bias_gelu_reference(z_after, bias_in_passes() ? bias : no_bias, dout, rows(), H);
    WorstError errors;
    if (bias_in_passes())
      errors.add("z (left as it was)", relative_l2_error(z_after.data(), z_before_.data(), n));
    else
      errors.add("z + bias", relative_l2_error(z_after.data(), forward.pre.data(), n));
    errors.add("GELU", relative_l2_error(download_as_float(ctx, gelu_, n).data(), forward.out.data(), n));
    errors.add("dz", relative_l2_error(download_as_float(ctx, dz_, n).data(), backward.dz.data(), n));
    errors.add("dbias", relative_l2_error(download(ctx, dbias_, H).data(), backward.dbias.data(), H));
    // The timed runs add the bias into z again and again: a zero bias keeps z (and the work) what it was.
    if (bias_) ROOFBENCH_CUDA(cudaMemsetAsync(bias_, 0, static_cast<std::size_t>(H) * sizeof(float), roofbench::cuda::stream(ctx)));
    ctx.synchronize();
    return errors.result();
  }

 private:
  bool bias_in_gemm() const { return version_.bias == lab::BiasAdded::gemm_epilogue; }
  bool bias_in_passes() const { return version_.bias == lab::BiasAdded::both_passes; }
  static const lab::ElementwiseVersion<Elem>& version_row(const Params& params) {
    if constexpr (kBf16)
      return lab::bf16_elementwise_version(params.str("version"));
    else
      return lab::fp32_elementwise_version(params.str("version"));
  }
  static Elem* alloc(Context& ctx, std::size_t count, BufferRole role) {
    return static_cast<Elem*>(ctx.alloc(count * sizeof(Elem), role));
  }
  int rows() const { return cfg_.batch * cfg_.context; }
  std::size_t count() const { return static_cast<std::size_t>(rows()) * cfg_.hidden(); }

  Config cfg_;
  const lab::ElementwiseVersion<Elem>& version_;
  Elem *z_ = nullptr, *dout_ = nullptr, *gelu_ = nullptr, *dz_ = nullptr;
  float *bias_ = nullptr, *dbias_ = nullptr, *partials_ = nullptr;  // bias_: every version's but v4's
  bf16* bias16_ = nullptr;  // v4's
  std::vector<float> z_before_;
};

// ---------------------------------------------------------------------------------------------------
// The weight gradients dw = dy^T x of a block's four linear layers (qkv, attn_proj, fc, fc_proj) over the
// full batch, the version a row of wgrad_versions.hpp's table.
class WgradLab final : public Case {
 public:
  explicit WgradLab(const Params& params)
      : cfg_(lab_config(params)), version_(lab::wgrad_version(params.str("version"))) {
    const int C = cfg_.channels, H = cfg_.hidden();
    layers_ = {{C, 3 * C}, {C, C}, {C, H}, {H, C}};
  }

  void setup(Context& ctx) override {
    const std::size_t N = static_cast<std::size_t>(rows());
    std::size_t scratch = 0;
    for (Layer& layer : layers_) {
      const std::size_t in = static_cast<std::size_t>(layer.in), out = static_cast<std::size_t>(layer.out);
      layer.dy = alloc_floats(ctx, N * out, BufferRole::input);
      layer.x = alloc_floats(ctx, N * in, BufferRole::input);
      layer.dw = alloc_floats(ctx, out * in, BufferRole::output);
      ctx.fill_random(layer.dy, N * out, ElementType::f32);
      ctx.fill_random(layer.x, N * in, ElementType::f32);
      scratch = std::max(scratch, version_.scratch_floats(rows(), layer.in, layer.out));
    }
    scratch_ = scratch > 0 ? alloc_floats(ctx, scratch, BufferRole::scratch) : nullptr;
    ROOFBENCH_CUBLAS(cublasCreate(cublas_.replace()));
    workspace_ = ctx.alloc(kWorkspaceBytes, BufferRole::scratch);
    ROOFBENCH_CUBLAS(cublasSetStream(cublas_.get(), roofbench::cuda::stream(ctx)));
    ROOFBENCH_CUBLAS(cublasSetWorkspace(cublas_.get(), workspace_, kWorkspaceBytes));
  }

  void run(Context&) override {
    for (const Layer& layer : layers_)
      version_.weight_gradient(cublas_.get(), layer.dw, layer.dy, layer.x, rows(), layer.in, layer.out, scratch_, 0);
  }

  Work work() const override {
    const double N = rows();
    Work w;
    for (const Layer& layer : layers_) {
      w.flops += 2 * N * layer.in * layer.out;
      w.bytes += 4 * (N * layer.in + N * layer.out + static_cast<double>(layer.in) * layer.out);
      w.bytes_read += 4 * (N * layer.in + N * layer.out);  // x and dy; dw is the write
    }
    return w;
  }

  std::vector<Figure> figures() const override { return {{"layout", version_.layout}}; }

  // kSamples entries of each dw, spread over the matrix, against their double sums.
  Check check(Context& ctx) override {
    WorstError errors;
    const char* names[] = {"qkv", "attn_proj", "fc", "fc_proj"};
    const std::size_t N = static_cast<std::size_t>(rows());
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      const std::size_t in = static_cast<std::size_t>(layer.in), out = static_cast<std::size_t>(layer.out);
      const auto dy = download(ctx, layer.dy, N * out), x = download(ctx, layer.x, N * in);
      const auto dw = download(ctx, layer.dw, out * in);
      std::vector<double> got, want;
      for (std::size_t k = 0; k < kSamples; ++k) {
        const std::size_t e = (k * 7919 + 13) * (out * in) / (kSamples * 7919 + 13);
        const int o = static_cast<int>(e / in), i = static_cast<int>(e % in);
        got.push_back(dw[e]);
        want.push_back(reference::weight_gradient_entry(dy, x, rows(), layer.in, layer.out, o, i));
      }
      for (float value : dw)
        if (!std::isfinite(value)) got.front() = std::nan("");  // every entry must be written
      errors.add(names[l], relative_l2_error(got.data(), want.data(), got.size()));
    }
    return errors.result();
  }

  void teardown(Context&) override { ROOFBENCH_CUBLAS(cublas_.destroy()); }

 private:
  static constexpr std::size_t kSamples = 256;
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  struct Layer {
    int in, out;
    float *dy = nullptr, *x = nullptr, *dw = nullptr;
  };
  int rows() const { return cfg_.batch * cfg_.context; }

  Config cfg_;
  const lab::WgradVersion& version_;
  std::vector<Layer> layers_;
  float* scratch_ = nullptr;
  case_support::CublasHandle cublas_;  // a setup that throws half way gives it back through the destructor
  void* workspace_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// The MLP's fc layer with its bias and GELU on R2-R4's bf16 tensors: z = x w^T + b and gelu = GELU(z)
// (exact erf form), both kept (the backward reads both); x [N, C], w [H, C], b [H], z and gelu [N, H], all
// bf16. v1 and v4 run the GEMM on cuBLASLt and the GELU table pass (plugins/gpt/README.md keeps the retired
// cuDNN graphs, v2 and v3, which fused GELU into the GEMM and lost on the GEMM):
//   v1 (R2-R4's until v4): linear_forward_bias (the bias in cuBLASLt's epilogue) writes z, then
//       gelu_forward (the table kernel) reads z and writes gelu;
//   v4 (R2-R4's without sm_90a): linear_forward (no epilogue) writes x w^T into z, then gelu_forward_add_bias
//       reads it and writes GELU(bf16(z + bias)); z is left without its bias (the backward adds it again);
//   v5: v4's outputs from one sm_90a kernel, a wgmma GEMM whose epilogue writes both (fc_gelu_sm90a.hpp), a
//       block a tile;
//   v6: v5's kernel on two blocks an SM that walk the tiles;
//   v7: 128 x 256 tiles and a four-stage ring, one block an SM walking the tiles;
//   v8: v7 storing 16 bytes a thread;
//   v9: v8's stores, each warp group taking every other 128 x 128 tile whole (ping-pong);
//   v10, v11: v6 and v9 with the epilogue's GELU lookups eight at a time, one branch for values off the table;
//   v12: v11 on a wider table whose slots come from packed 32-bit operations;
//   v13: v12 with each block's rows of x kept in shared memory while it walks their column tiles;
//   v14 (R2-R4's on sm_90a, fc_gelu_forward_sm90a): v12 storing xw and gelu through shared memory by TMA;
//   v15: v13 and v14 together, on a three-stage ring and half-tile staging boxes;
//   v16: v15 on clusters of two blocks, each loading half of every stage of w into both;
//   v17: v14 with two buffers of half-size staging boxes, a group's writes beside its last stores;
//   v18: v14 on v16's clusters of two blocks;
//   v19: v18 on a five-stage ring and half-size staging boxes;
//   v20: v14 on clusters of 2 x 2 blocks sharing w's stages and x's;
//   v21: v14 asking for its epilogue's bias before the tile's products;
//   v22: v14 on a five-stage ring and half-size staging boxes;
//   v23: v14 with GELU's lookups and the stores in the producer group's three idle warps;
//   v24: v23 with a staging box for each half of a group's tile;
//   v25: v14 with GELU computed by erff from each half's staged xw box, not looked up;
//   v26: v14 with each warp staging and storing its own rows, no barrier of the group between its stores;
//   v27: v26 on two pairs of warp groups, a pair sharing each tile, the pairs taking every other tile in turns.
enum class FcGeluPath { cublas_bias_epilogue, cublas_then_bias_pass, own_gemm_sm90a };
struct FcGeluVersion {
  const char* name;
  FcGeluPath path;
  const char* kernel;  // the "kernel" fact
  int sm90a_version = 0;  // own_gemm_sm90a: fc_gelu_sm90a's version
  bool bias_in_epilogue() const { return path == FcGeluPath::cublas_bias_epilogue; }
};
constexpr FcGeluVersion kFcGeluVersions[] = {
    {"v1", FcGeluPath::cublas_bias_epilogue, "cuBLASLt GEMM, bias epilogue -> z; GELU table pass z -> gelu"},
    {"v4", FcGeluPath::cublas_then_bias_pass, "cuBLASLt GEMM -> x w^T; GELU table pass, bias added -> gelu"},
    {"v5", FcGeluPath::own_gemm_sm90a,
     "sm_90a wgmma GEMM, 128 x 128 tiles, a block a tile; its epilogue writes x w^T and GELU(x w^T + bias)", 5},
    {"v6", FcGeluPath::own_gemm_sm90a, "v5's kernel on two blocks an SM walking the tiles", 6},
    {"v7", FcGeluPath::own_gemm_sm90a,
     "v5's kernel on 128 x 256 tiles, a four-stage ring, one block an SM walking the tiles", 7},
    {"v8", FcGeluPath::own_gemm_sm90a, "v7 with 16-byte stores, four lanes trading their column pairs first", 8},
    {"v9", FcGeluPath::own_gemm_sm90a,
     "v8's stores; each warp group every other 128 x 128 tile whole (ping-pong), a six-stage ring", 9},
    {"v10", FcGeluPath::own_gemm_sm90a,
     "v6 with the epilogue's GELU lookups eight at a time, one branch off the table", 10},
    {"v11", FcGeluPath::own_gemm_sm90a, "v9 (ping-pong) with v10's epilogue and 4-byte stores", 11},
    {"v12", FcGeluPath::own_gemm_sm90a, "v11 on a 16 KB table of |z| in [2^-16, 2^16), its slots by packed operations",
     12},
    {"v13", FcGeluPath::own_gemm_sm90a,
     "v12 on a range of consecutive tiles a block, its row block of x resident in shared memory", 13},
    {"v14", FcGeluPath::own_gemm_sm90a,
     "v12 on a four-stage ring, each group's outputs staged in shared memory and stored by TMA", 14},
    {"v15", FcGeluPath::own_gemm_sm90a,
     "v13's resident x and v14's staged stores, a three-stage ring, 64-row staging boxes", 15},
    {"v16", FcGeluPath::own_gemm_sm90a,
     "v15 on clusters of two blocks on adjacent row blocks, each multicasting half of every w stage to both", 16},
    {"v17", FcGeluPath::own_gemm_sm90a,
     "v14 with two buffers of 64-row staging boxes: a group writes one pair while the other's stores read it", 17},
    {"v18", FcGeluPath::own_gemm_sm90a,
     "v14 on clusters of two blocks on adjacent row blocks, each multicasting half of every w stage to both", 18},
    {"v19", FcGeluPath::own_gemm_sm90a, "v18 on a five-stage ring and 64-row staging boxes", 19},
    {"v20", FcGeluPath::own_gemm_sm90a,
     "v14 on clusters of 2 x 2 blocks, multicasting halves of w's stages down columns and of x's along rows", 20},
    {"v21", FcGeluPath::own_gemm_sm90a, "v14 with its epilogue's bias pairs asked for before the tile's products", 21},
    {"v22", FcGeluPath::own_gemm_sm90a, "v14 on a five-stage ring and 64-row staging boxes", 22},
    {"v23", FcGeluPath::own_gemm_sm90a,
     "v14 whose consumers stage xw alone; three helper warps add the bias, look GELU up and store both", 23},
    {"v24", FcGeluPath::own_gemm_sm90a,
     "v23 with an xw box a half and a GELU box of the helpers' own, each handed back when the next has landed", 24},
    {"v25", FcGeluPath::own_gemm_sm90a,
     "v14 with GELU computed by erff from each half's staged xw box, not looked up in the table", 25},
    {"v26", FcGeluPath::own_gemm_sm90a,
     "v14 with each warp staging its own 16 rows of each fragment and storing them by TMA, no group barrier", 26},
    {"v27", FcGeluPath::own_gemm_sm90a,
     "v26 on four warp groups in two pairs, each pair a 128 x 128 tile (64 rows a group), the pairs in turns", 27},
};

const FcGeluVersion& fc_gelu_version(const Params& params) {
  return lab::find_version(std::span<const FcGeluVersion>(kFcGeluVersions), params.str("version"), "lab_fc_gelu_bf16");
}

// The MLP labs' model shape and cuBLASLt context: rows N = batch x context, C channels, H hidden, bf16 buffers.
class MlpLab : public Case {
 public:
  void teardown(Context&) override { ROOFBENCH_CUBLASLT(lt_.handle.destroy()); }

 protected:
  static constexpr double kWeightRange = 0.1;  // |w| at about the model's scale over 512 inputs
  explicit MlpLab(const Params& params) : cfg_(lab_config(params)) {}
  static bf16* alloc(Context& ctx, std::size_t count, BufferRole role) {
    return static_cast<bf16*>(ctx.alloc(count * sizeof(bf16), role));
  }
  int rows() const { return cfg_.batch * cfg_.context; }
  std::size_t channels() const { return static_cast<std::size_t>(cfg_.channels); }
  std::size_t hidden() const { return static_cast<std::size_t>(cfg_.hidden()); }
  // An N x C x H GEMM's 2 N C H FLOPs with its case's minimum traffic, per token.
  Work gemm_work(double bytes_read, double bytes_written) const {
    Work w;
    w.flops = 2.0 * rows() * channels() * hidden();
    w.bytes_read = bytes_read;
    w.bytes = bytes_read + bytes_written;
    w.items = rows();
    w.item_name = "tokens";
    return w;
  }

  Config cfg_;
  LabLt lt_;
};

class FcGeluLab final : public MlpLab {
 public:
  explicit FcGeluLab(const Params& params) : MlpLab(params), version_(fc_gelu_version(params)) {}

  void setup(Context& ctx) override {
    const std::size_t N = rows(), C = channels(), H = hidden();
    x_ = alloc(ctx, N * C, BufferRole::input);
    w_ = alloc(ctx, H * C, BufferRole::input);
    bias_ = alloc(ctx, H, BufferRole::input);
    z_ = alloc(ctx, N * H, BufferRole::output);
    gelu_ = alloc(ctx, N * H, BufferRole::output);
    // Weights at about the model's scale (|w| < 0.1 over 512 inputs): z spreads over GELU's curved middle
    // and both tails, not only its linear part.
    ctx.fill_random(x_, N * C, ElementType::bf16);
    ctx.fill_random(w_, H * C, ElementType::bf16, -kWeightRange, kWeightRange);
    ctx.fill_random(bias_, H, ElementType::bf16, -0.5, 0.5);
    if (version_.path == FcGeluPath::own_gemm_sm90a) lab::fc_gelu_sm90a_configure();  // NotApplicable off sm_90a
    lt_.create(ctx);
    // The first call times cuBLASLt's candidates (layers.hpp): here, outside the host's runs and captures.
    run(ctx);
    ctx.synchronize();
  }

  void run(Context& ctx) override {
    const LtContext lt = lt_.context(ctx);
    const cudaStream_t stream = roofbench::cuda::stream(ctx);
    switch (version_.path) {
      case FcGeluPath::cublas_bias_epilogue:
        linear_forward_bias(lt, CUDA_R_16BF, z_, x_, w_, bias_, rows(), cfg_.channels, cfg_.hidden());
        lab::gelu_forward_table(gelu_, z_, static_cast<std::size_t>(rows()) * hidden(), stream);
        break;
      case FcGeluPath::cublas_then_bias_pass:
        linear_forward(lt, z_, CUDA_R_16BF, x_, w_, rows(), cfg_.channels, cfg_.hidden());
        gelu_forward_add_bias(gelu_, z_, bias_, rows(), cfg_.hidden(), stream);
        break;
      case FcGeluPath::own_gemm_sm90a:
        lab::fc_gelu_sm90a(version_.sm90a_version, z_, gelu_, x_, w_, bias_, rows(), cfg_.channels, cfg_.hidden(),
                           stream);
        break;
    }
  }

  // The GEMM's 2 N C H; minimum traffic x, w and the bias read, z and gelu written once each (the same for
  // every version, so their rates compare: v1 moves z once more, its GELU pass reading it back).
  Work work() const override {
    const double N = rows(), C = channels(), H = hidden(), bf16_bytes = sizeof(bf16);
    return gemm_work(bf16_bytes * (N * C + H * C + H), bf16_bytes * 2 * N * H);
  }

  std::vector<Figure> figures() const override { return lt_.kernel_figures(version_.kernel); }

  // kGateRows rows spread over the batch (the first and the last among them) against the double reference
  // from the inputs as stored: z = x w^T + b and GELU of that z; and every element of z and gelu finite
  // (the host poisoned both, so an element left unwritten is NaN).
  Check check(Context& ctx) override {
    const std::size_t N = rows(), C = channels(), H = hidden();
    const std::size_t sampled = std::min<std::size_t>(kGateRows, N);
    std::vector<std::size_t> picks(sampled);
    for (std::size_t k = 0; k < sampled; ++k) picks[k] = sampled > 1 ? k * (N - 1) / (sampled - 1) : 0;
    std::vector<float> x, z, gelu;
    for (const std::size_t r : picks) {
      for (const float v : download_as_float(ctx, x_ + r * C, C)) x.push_back(v);
      for (const float v : download_as_float(ctx, z_ + r * H, H)) z.push_back(v);
      for (const float v : download_as_float(ctx, gelu_ + r * H, H)) gelu.push_back(v);
    }
    const std::vector<float> w = download_as_float(ctx, w_, H * C), bias = download_as_float(ctx, bias_, H);
    if (!version_.bias_in_epilogue())  // z holds x w^T: the pre-activation is bf16(z + bias)
      for (std::size_t e = 0; e < z.size(); ++e) z[e] = round_to_bf16(z[e] + bias[e % H]);
    const auto ref =
        reference::fc_gelu_reference(x, w, bias, static_cast<int>(sampled), cfg_.channels, cfg_.hidden());
    const std::size_t not_finite = count_not_finite(ctx, z_, N * H) + count_not_finite(ctx, gelu_, N * H);
    WorstError errors;
    errors.add(std::string(version_.bias_in_epilogue() ? "z (" : "z + bias (") + std::to_string(sampled) + " rows)",
               relative_l2_error(z.data(), ref.z.data(), z.size()));
    errors.add("GELU", relative_l2_error(gelu.data(), ref.gelu.data(), gelu.size()));
    if (not_finite > 0) errors.add(std::to_string(not_finite) + " of z's and gelu's elements not finite", std::nan(""));
    return errors.result();
  }

 private:
  static constexpr std::size_t kGateRows = 64;
  const FcGeluVersion& version_;
  bf16 *x_ = nullptr, *w_ = nullptr, *bias_ = nullptr, *z_ = nullptr, *gelu_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// The MLP's backward from fc_proj's output gradient to fc's pre-activation gradient, on R2-R4's bf16 tensors:
// dz = bf16(bf16(dy w) GELU'(bf16(xw + b))) and db = its column sums (fp32), dy [N, C] (the residual stream's
// gradient), w [C, H] (fc_proj's weight as stored), xw [N, H] (fc's x w^T, the bias left out), b [H]. fc_proj's
// weight gradient is left out: every version runs the same cuBLASLt GEMM for it.
//   v1 (R2-R4's without sm_90a): cuBLASLt's input-gradient GEMM writes d_gelu (bf16), then gelu_backward_add_bias reads it with xw
//       and writes dz and the partial column sums (lab_elementwise_bf16 v4);
//   v2: one sm_90a kernel, the forward's template (fc_gelu_sm90a.cuh) with B read MN-major and an epilogue that
//       loads the tile's xw by TMA, writes dz over it and stores it by TMA: d_gelu never leaves the SM;
//   v3: v2 on clusters of two blocks on adjacent row blocks, each multicasting half of every stage of w to both;
//   v4: v2 on clusters of 2 x 2 blocks, w shared between a column tile's two blocks and dy between a row block's;
//   v5: v2 asking for its epilogue's bias pairs before the tile's products;
//   v6: v3 with GELU' computed for every element; v7: v3 asking for xw before its turn; v8 (R2-R4's on sm_90a; its
//       rows run the keeper, fc_gelu_backward_sm90a): v3 on a packed table; v9: v7 and v8 (lab/fc_gelu_sm90a.cu
//       says each one's why).
struct FcGeluBackwardVersion {
  const char* name;
  int sm90a_version;  // lab::fc_gelu_backward_sm90a's version; 0: cuBLASLt and the pass
  const char* kernel;  // the "kernel" fact
  bool fused() const { return sm90a_version != 0; }
};
constexpr FcGeluBackwardVersion kFcGeluBackwardVersions[] = {
    {"v1", 0, "cuBLASLt input-gradient GEMM -> d_gelu; GELU backward pass, bias added -> dz, column sums"},
    {"v2", 2, "sm_90a wgmma GEMM (w MN-major), its epilogue loading xw by TMA and writing dz and its column sums"},
    {"v3", 3, "v2 on clusters of two blocks on adjacent row blocks, each multicasting half of every w stage to both"},
    {"v4", 4, "v2 on clusters of 2 x 2 blocks, multicasting halves of w's stages down columns and of dy's along rows"},
    {"v5", 5, "v2 with its epilogue's bias pairs asked for before the tile's products"},
    {"v6", 6, "v3 with GELU' evaluated by erff and expf for every element instead of looked up in a table"},
    {"v7", 7, "v3 asking for its tile's xw before its turn at the tensor cores, not once its products are issued"},
    {"v8", 8, "v3 with GELU' from a 16 KB fp32 table whose two slots a bf16 pair's bits give by packed operations"},
    {"v9", 9, "v7's early xw and v8's packed table together"},
};

class FcGeluBackwardLab final : public MlpLab {
 public:
  explicit FcGeluBackwardLab(const Params& params)
      : MlpLab(params),
        version_(lab::find_version(std::span<const FcGeluBackwardVersion>(kFcGeluBackwardVersions),
                                   params.str("version"), "lab_fc_gelu_backward_bf16")) {}

  void setup(Context& ctx) override {
    const std::size_t N = rows(), C = channels(), H = hidden();
    dy_ = alloc(ctx, N * C, BufferRole::input);
    w_ = alloc(ctx, C * H, BufferRole::input);
    xw_ = alloc(ctx, N * H, BufferRole::input);
    bias_ = alloc(ctx, H, BufferRole::input);
    dz_ = alloc(ctx, N * H, BufferRole::output);
    dbias_ = static_cast<float*>(ctx.alloc(H * sizeof(float), BufferRole::output));
    ctx.fill_random(dy_, N * C, ElementType::bf16, -0.1, 0.1);
    ctx.fill_random(w_, C * H, ElementType::bf16, -kWeightRange, kWeightRange);
    ctx.fill_random(xw_, N * H, ElementType::bf16, -3, 3);  // over GELU's curved middle and both tails
    ctx.fill_random(bias_, H, ElementType::bf16, -0.5, 0.5);
    if (version_.fused()) {
      lab::fc_gelu_sm90a_configure();  // NotApplicable off sm_90a
      partials_ = static_cast<float*>(
          ctx.alloc(fc_gelu_backward_partials_floats(rows(), cfg_.hidden()) * sizeof(float),
                    BufferRole::scratch));
    } else {
      dgelu_ = alloc(ctx, N * H, BufferRole::scratch);
      partials_ = static_cast<float*>(
          ctx.alloc(column_partials_floats(rows(), cfg_.hidden()) * sizeof(float), BufferRole::scratch));
    }
    lt_.create(ctx);
    run(ctx);  // cuBLASLt's candidates timed here, outside the host's runs and captures
    ctx.synchronize();
  }

  void run(Context& ctx) override {
    const cudaStream_t stream = roofbench::cuda::stream(ctx);
    const int N = rows(), C = cfg_.channels, H = cfg_.hidden();
    if (version_.fused()) {
      lab::fc_gelu_backward_sm90a(version_.sm90a_version, dz_, dbias_, partials_, dy_, w_, xw_, bias_, N, C, H, stream);
      return;
    }
    linear_backward_input(lt_.context(ctx), dgelu_, CUDA_R_16BF, dy_, w_, N, H, C);
    gelu_backward_add_bias(dz_, dbias_, dgelu_, xw_, bias_, N, H, partials_, stream);
  }

  // The GEMM's 2 N C H; minimum traffic dy, w, xw and the bias read, dz and the fp32 bias gradient written.
  Work work() const override {
    const double N = rows(), C = channels(), H = hidden(), bf16_bytes = sizeof(bf16);
    return gemm_work(bf16_bytes * (N * C + C * H + N * H + H), bf16_bytes * N * H + sizeof(float) * H);
  }

  std::vector<Figure> figures() const override { return lt_.kernel_figures(version_.kernel); }

  // dz on kGateRows rows spread over the batch against double from the inputs as stored (GELU' at bf16(xw + b));
  // the bias gradient against the double sum of every row of dz as written (the GEMM itself is checked on the
  // sampled rows); every element of dz finite.
  Check check(Context& ctx) override {
    const std::size_t N = rows(), C = channels(), H = hidden();
    const std::size_t sampled = std::min<std::size_t>(kGateRows, N);
    const std::vector<float> w = download_as_float(ctx, w_, C * H), bias = download_as_float(ctx, bias_, H);
    // GELU's backward by the lab's reference on the bf16 pre-activations, its bias already in them.
    std::vector<float> pre, dgelu, got;
    for (std::size_t k = 0; k < sampled; ++k) {
      const std::size_t r = sampled > 1 ? k * (N - 1) / (sampled - 1) : 0;
      const auto dy = download_as_float(ctx, dy_ + r * C, C), xw = download_as_float(ctx, xw_ + r * H, H);
      const auto dz = download_as_float(ctx, dz_ + r * H, H);
      for (std::size_t h = 0; h < H; ++h) {
        double sum = 0;
        for (std::size_t c = 0; c < C; ++c) sum += double{dy[c]} * w[c * H + h];
        dgelu.push_back(static_cast<float>(sum));
        pre.push_back(round_to_bf16(xw[h] + bias[h]));
        got.push_back(dz[h]);
      }
    }
    const auto ref = reference::bias_gelu_reference(pre, std::vector<float>(H, 0.0f), dgelu,
                                                    static_cast<int>(sampled), cfg_.hidden());
    const std::vector<float> dz_all = download_as_float(ctx, dz_, N * H);
    std::vector<double> column_sums(H, 0.0);
    for (std::size_t e = 0; e < N * H; ++e) column_sums[e % H] += dz_all[e];
    std::vector<float> dbias(H);
    ROOFBENCH_CUDA(cudaMemcpy(dbias.data(), dbias_, H * sizeof(float), cudaMemcpyDeviceToHost));
    WorstError errors;
    errors.add("dz (" + std::to_string(sampled) + " rows)", relative_l2_error(got.data(), ref.dz.data(), got.size()));
    errors.add("bias gradient", relative_l2_error(dbias.data(), column_sums.data(), H));
    const std::size_t not_finite = count_not_finite(ctx, dz_, N * H);
    if (not_finite > 0) errors.add(std::to_string(not_finite) + " of dz's elements not finite", std::nan(""));
    return errors.result();
  }

 private:
  static constexpr std::size_t kGateRows = 32;
  const FcGeluBackwardVersion& version_;
  bf16 *dy_ = nullptr, *w_ = nullptr, *xw_ = nullptr, *bias_ = nullptr, *dz_ = nullptr, *dgelu_ = nullptr;
  float *dbias_ = nullptr, *partials_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// The qkv layer's weight gradient dw = dy^T x and its bias gradient, dy's column sums (dy = d_qkv, [N, 3C] bf16;
// x = ln1, [N, C] bf16; dw and the bias gradient fp32):
//   v1 (R2-R4's off sm_90a, where lab_attention_qkv_bias_bf16's v10 does not run): the weight-gradient GEMM, then
//       column_sum's two passes over dy;
//   v2: the GEMM alone, its BGRADB epilogue summing dy's columns as it reads dy.
struct QkvWgradVersion {
  const char* name;
  bool epilogue_sums;  // v2: the bias gradient from the GEMM's epilogue
  const char* kernel;
};
constexpr QkvWgradVersion kQkvWgradVersions[] = {
    {"v1", false, "cuBLASLt weight-gradient GEMM, then column_sum's two passes over dy"},
    {"v2", true, "cuBLASLt weight-gradient GEMM with the BGRADB epilogue summing dy's columns"},
};

class QkvWgradLab final : public MlpLab {
 public:
  explicit QkvWgradLab(const Params& params)
      : MlpLab(params),
        version_(lab::find_version(std::span<const QkvWgradVersion>(kQkvWgradVersions), params.str("version"),
                                   "lab_qkv_wgrad_bf16")) {}

  void setup(Context& ctx) override {
    const std::size_t N = rows(), C = channels();
    dy_ = alloc(ctx, N * 3 * C, BufferRole::input);
    x_ = alloc(ctx, N * C, BufferRole::input);
    dw_ = static_cast<float*>(ctx.alloc(3 * C * C * sizeof(float), BufferRole::output));
    dbias_ = static_cast<float*>(ctx.alloc(3 * C * sizeof(float), BufferRole::output));
    ctx.fill_random(dy_, N * 3 * C, ElementType::bf16, -0.1, 0.1);
    ctx.fill_random(x_, N * C, ElementType::bf16, -2, 2);  // a LayerNorm's output
    if (!version_.epilogue_sums)
      partials_ = static_cast<float*>(
          ctx.alloc(column_partials_floats(rows(), 3 * cfg_.channels) * sizeof(float), BufferRole::scratch));
    lt_.create(ctx);
    run(ctx);  // cuBLASLt's candidates timed here, outside the host's runs and captures
    ctx.synchronize();
  }

  void run(Context& ctx) override {
    const int N = rows(), C = cfg_.channels;
    linear_backward(lt_.context(ctx), nullptr, CUDA_R_16BF, dw_, dy_, x_, nullptr, N, C, 3 * C, 0.0f,
                    GradientOrder::input_first, version_.epilogue_sums ? dbias_ : nullptr);
    if (!version_.epilogue_sums) column_sum(dbias_, dy_, N, 3 * C, partials_, roofbench::cuda::stream(ctx));
  }

  // The GEMM's 2 N C 3C; minimum traffic dy and x read, dw and the bias gradient written.
  Work work() const override {
    const double N = rows(), C = channels();
    Work w = gemm_work(sizeof(bf16) * (N * 3 * C + N * C), sizeof(float) * (3 * C * C + 3 * C));
    w.flops = 2.0 * N * C * 3 * C;
    return w;
  }

  std::vector<Figure> figures() const override { return lt_.kernel_figures(version_.kernel); }

  // kGateRows rows of dw (spread over its 3C) and the whole bias gradient against double sums over every row.
  Check check(Context& ctx) override {
    const std::size_t N = rows(), C = channels();
    const std::vector<float> dy = download_as_float(ctx, dy_, N * 3 * C), x = download_as_float(ctx, x_, N * C);
    const std::vector<float> dw = download(ctx, dw_, 3 * C * C), dbias = download(ctx, dbias_, 3 * C);
    std::vector<double> sums(3 * C, 0.0);
    for (std::size_t e = 0; e < N * 3 * C; ++e) sums[e % (3 * C)] += dy[e];
    std::vector<double> ref;
    std::vector<float> got;
    for (std::size_t k = 0; k < kGateRows; ++k) {
      const std::size_t o = k * (3 * C - 1) / (kGateRows - 1);
      std::vector<double> row(C, 0.0);
      for (std::size_t n = 0; n < N; ++n)
        for (std::size_t i = 0; i < C; ++i) row[i] += double{dy[n * 3 * C + o]} * x[n * C + i];
      ref.insert(ref.end(), row.begin(), row.end());
      const auto first = dw.begin() + static_cast<std::ptrdiff_t>(o * C);
      got.insert(got.end(), first, first + static_cast<std::ptrdiff_t>(C));
    }
    WorstError errors;
    errors.add("dw (" + std::to_string(kGateRows) + " rows)", relative_l2_error(got.data(), ref.data(), got.size()));
    errors.add("bias gradient", relative_l2_error(dbias.data(), sums.data(), dbias.size()));
    return errors.result();
  }

 private:
  static constexpr std::size_t kGateRows = 8;
  const QkvWgradVersion& version_;
  bf16 *dy_ = nullptr, *x_ = nullptr;
  float *dw_ = nullptr, *dbias_ = nullptr, *partials_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// The blocks' GEMMs of R2's and R3's step and nothing else (R4 also runs the recompute's 15): for each of
// the 6 blocks' four linear layers, the forward y = x w^T, the input gradient dx = dy w and the weight
// gradient dw = dy^T x (bf16 operands, bf16 y and dx, fp32 dw), through the trainers' own linear_forward
// and linear_backward (cuBLASLt, algorithms timed once per process). At the power limit a step's time follows
// its energy (--energy), so this is the part of R3's step no change outside the GEMMs can take away. Left
// out: the head's three GEMMs (28 columns) and the embedding's one-hot product. Each block has its own
// inputs, as in the step; the outputs of a layer kind are shared by the blocks (each written once a run
// either way).
class StepGemmsLab final : public Case {
 public:
  explicit StepGemmsLab(const Params& params) : cfg_(lab_config(params)) {
    const int C = cfg_.channels, H = cfg_.hidden();
    kinds_ = {{"qkv", C, 3 * C}, {"attn_proj", C, C}, {"fc", C, H}, {"fc_proj", H, C}};
  }

  void setup(Context& ctx) override {
    const std::size_t N = static_cast<std::size_t>(rows());
    for (Kind& kind : kinds_) {
      const std::size_t in = static_cast<std::size_t>(kind.in), out = static_cast<std::size_t>(kind.out);
      for (int l = 0; l < cfg_.layers; ++l) {
        Inputs inputs{alloc(ctx, N * in, BufferRole::input), alloc(ctx, N * out, BufferRole::input),
                      alloc(ctx, out * in, BufferRole::input)};
        // Activations of unit scale, gradients and weights at about the model's (|w| < 0.1).
        ctx.fill_random(inputs.x, N * in, ElementType::bf16);
        ctx.fill_random(inputs.dy, N * out, ElementType::bf16, -kSmallRange, kSmallRange);
        ctx.fill_random(inputs.w, out * in, ElementType::bf16, -kSmallRange, kSmallRange);
        kind.blocks.push_back(inputs);
      }
      kind.y = alloc(ctx, N * out, BufferRole::output);
      kind.dx = alloc(ctx, N * in, BufferRole::output);
      kind.dw = alloc_floats(ctx, out * in, BufferRole::output);
    }
    lt_.create(ctx);
    // The first call times cuBLASLt's candidates (layers.hpp): here, outside the host's runs and captures.
    run(ctx);
    ctx.synchronize();
  }

  void run(Context& ctx) override {
    const LtContext lt = lt_.context(ctx);
    for (int l = 0; l < cfg_.layers; ++l)
      for (const Kind& kind : kinds_) {
        const Inputs& in = kind.blocks[static_cast<std::size_t>(l)];
        linear_forward(lt, kind.y, CUDA_R_16BF, in.x, in.w, rows(), kind.in, kind.out);
        linear_backward(lt, kind.dx, CUDA_R_16BF, kind.dw, in.dy, in.x, in.w, rows(), kind.in, kind.out);
      }
  }

  // Three GEMMs of 2 N in out each; minimum traffic: each GEMM's operands read and its result written once.
  Work work() const override {
    const double N = rows();
    Work w;
    for (const Kind& kind : kinds_) {
      const double in = kind.in, out = kind.out;
      w.flops += cfg_.layers * 3 * 2 * N * in * out;
      // bf16: x, w read and y written; dy, w read and dx written; dy, x read. fp32: dw written.
      const double halves = (N * in + in * out + N * out) + (N * out + in * out + N * in) + (N * out + N * in);
      w.bytes += cfg_.layers * (sizeof(bf16) * halves + sizeof(float) * in * out);
      w.bytes_read += cfg_.layers * sizeof(bf16) * (halves - N * out - N * in);  // all but y and dx
    }
    w.items = N;
    w.item_name = "tokens";
    return w;
  }

  std::vector<Figure> figures() const override {
    const std::string choices = lt_.choices_line();
    return {{"gemms", "the 6 blocks' forward, input-gradient and weight-gradient GEMMs (72), bf16 operands"},
            {"matmul_algorithms", choices}};
  }

  // The outputs hold the last block's products: kSamples entries of each y, dx and dw, spread over the
  // matrix, against double sums of the bf16 inputs as stored; every element of them scanned for one left
  // unwritten. Host memory: the last block's inputs as floats (dw's sums run down every row), not its outputs.
  Check check(Context& ctx) override {
    const std::size_t N = static_cast<std::size_t>(rows());
    WorstError errors;
    for (const Kind& kind : kinds_) {
      const std::size_t in = static_cast<std::size_t>(kind.in), out = static_cast<std::size_t>(kind.out);
      const Inputs& last = kind.blocks.back();
      const auto x = download_as_float(ctx, last.x, N * in), dy = download_as_float(ctx, last.dy, N * out);
      const auto w = download_as_float(ctx, last.w, out * in);
      std::vector<std::size_t> at_y, at_dx, at_dw;
      std::vector<double> want_y, want_dx, want_dw;
      for (std::size_t k = 0; k < kSamples; ++k) {
        at_y.push_back(spread(k, N * out));
        at_dx.push_back(spread(k, N * in));
        at_dw.push_back(spread(k, out * in));
        const std::size_t r = at_y[k] / out, o = at_y[k] % out;
        double sum = 0;
        for (std::size_t i = 0; i < in; ++i) sum += static_cast<double>(x[r * in + i]) * w[o * in + i];
        want_y.push_back(sum);
        const std::size_t rx = at_dx[k] / in, ix = at_dx[k] % in;
        sum = 0;
        for (std::size_t j = 0; j < out; ++j) sum += static_cast<double>(dy[rx * out + j]) * w[j * in + ix];
        want_dx.push_back(sum);
        want_dw.push_back(reference::weight_gradient_entry(dy, x, rows(), kind.in, kind.out,
                                                           static_cast<int>(at_dw[k] / in),
                                                           static_cast<int>(at_dw[k] % in)));
      }
      const std::size_t not_finite = count_not_finite(ctx, kind.y, N * out) + count_not_finite(ctx, kind.dx, N * in) +
                                     count_not_finite(ctx, kind.dw, out * in);
      if (not_finite > 0)
        errors.add(kind.name + ": " + std::to_string(not_finite) + " elements not finite", std::nan(""));
      const auto relative = [&](const auto* device, const std::vector<std::size_t>& at,
                                const std::vector<double>& want) {
        return relative_l2_error(download_entries(ctx, device, at).data(), want.data(), kSamples);
      };
      errors.add(kind.name + " y", relative(kind.y, at_y, want_y));
      errors.add(kind.name + " dx", relative(kind.dx, at_dx, want_dx));
      errors.add(kind.name + " dw", relative(kind.dw, at_dw, want_dw));
    }
    return errors.result();
  }

  void teardown(Context&) override { ROOFBENCH_CUBLASLT(lt_.handle.destroy()); }

 private:
  static constexpr std::size_t kSamples = 256;
  static constexpr double kSmallRange = 0.1;
  struct Inputs {
    bf16 *x, *dy, *w;
  };
  struct Kind {
    std::string name;
    int in, out;
    std::vector<Inputs> blocks = {};
    bf16 *y = nullptr, *dx = nullptr;
    float* dw = nullptr;
  };
  static bf16* alloc(Context& ctx, std::size_t count, BufferRole role) {
    return static_cast<bf16*>(ctx.alloc(count * sizeof(bf16), role));
  }
  // Sample k of kSamples, spread over [0, count) (the first and the last entries among them).
  static std::size_t spread(std::size_t k, std::size_t count) { return k * (count - 1) / (kSamples - 1); }
  int rows() const { return cfg_.batch * cfg_.context; }

  Config cfg_;
  std::vector<Kind> kinds_;
  LabLt lt_;
};

template <typename Lab>
CaseSpec lab_case(std::string name, std::string description, std::vector<std::string> versions,
                  Precision precision, double tolerance = 0, std::vector<std::int64_t> batches = {64}) {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.axes = {Axis::strings("version", std::move(versions)), Axis::ints("batch", std::move(batches))};
  spec.device = DeviceNeed::gpu();
  spec.precision = precision;
  spec.tolerance = tolerance;
  spec.make = [](const Params& params) -> std::unique_ptr<Case> { return std::make_unique<Lab>(params); };
  return spec;
}

// Not a version lab: the step's GEMMs alone, at R2's batch and R3's.
CaseSpec step_gemms_case() {
  CaseSpec spec;
  spec.name = "lab_step_gemms_bf16";
  spec.description =
      "kernel lab: R2's and R3's 72 block GEMMs alone (forward, input and weight gradients of qkv, attn_proj, fc "
      "and fc_proj in each of the 6 blocks, bf16 on cuBLASLt as the trainers run them): with --energy, the share of "
      "a step's energy that only the GEMMs can change";
  spec.axes = {Axis::ints("batch", {64, 512})};
  spec.device = DeviceNeed::gpu();
  spec.precision = Precision::bf16;
  spec.make = [](const Params& params) -> std::unique_ptr<Case> { return std::make_unique<StepGemmsLab>(params); };
  return spec;
}

}  // namespace

std::vector<CaseSpec> lab_cases() {
  return {
      lab_case<AttentionLab<float>>("lab_attention",
                                    "kernel lab: the fused causal attention with RoPE, forward + backward, at the "
                                    "training shape; v1 SIMT fp32, v8 TF32 mma.sync m16n8k8 with the scores in "
                                    "registers (R1's)",
                                    lab::version_names(lab::fp32_attention_versions()), Precision::tf32),
      // bf16 tensors: a case of its own, since the gate's tolerance follows the case's precision; batch 512
      // is R3's and R4's shape.
      lab_case<AttentionLab<bf16>>("lab_attention_bf16",
                                   "kernel lab: the bf16 fused attention (R2's tensors), forward + backward, at "
                                   "the training shape; v7 mma.sync with the scores in registers, cp.async rows, "
                                   "the forward one block per head with its softmax online, v9 v7 with a persistent "
                                   "backward fetching each block's next head ahead, v10 (sm_90a) a "
                                   "forward on TMA and wgmma with v9's backward, v11 v10 persistent with a producer "
                                   "warp group, v12 v11's forward with a persistent TMA and wgmma backward, v13 v9's "
                                   "forward with v12's backward, v14 v9's forward with v12's backward steps a head a "
                                   "warp group, two blocks an SM, v15 v10's forward a head a warp group, three "
                                   "blocks an SM, with v12's backward, v16 v14's backward with v15's forward from 4 "
                                   "heads a resident block, v9's below, v17 v16 with the next head's v and dout "
                                   "loaded during the backward's query phase, v18 v17 with each head's lse scaled "
                                   "once its boxes land, v19 v15's forward with the next head's q and k loaded "
                                   "during half 1 and v during half 0's scores, with v17's backward, v20 v19's "
                                   "forward with v18's backward, v21 v18 with dq's RoPE factors fetched under the "
                                   "dq product, v22 v18 with the preparation's bias and RoPE factors fetched by "
                                   "16-byte loads, v23 v22 with its forward at four blocks an SM, v24 v23 with those "
                                   "loads once the boxes have landed, v25 v22 with dq stored from the registers and "
                                   "the next head's q loaded with its v and dout, v26 v22 "
                                   "without the L2 prefetch of the next head's boxes, v27 v26 with dk's and dq's RoPE "
                                   "factors asked of the L1 ahead of their loads, v28 v27 with the next head's boxes "
                                   "asked of the L2 half a head ahead, v29 v26 with the forward "
                                   "loading each head's q a head ahead into a tile of its own, v30 v29 with the "
                                   "backward loading the next head's out once query half 0 has read its tile, v31 v30 "
                                   "without a block barrier for it, v32 v29 with the backward loading each head's "
                                   "q a head ahead into a tile of its own, v33 v32 with both query halves' dq "
                                   "products issued at once, v34 v29 with those products issued "
                                   "at once, v35 v34 with key half 1's scores issued before key half 0's gradients "
                                   "are stored, v36 v34 with dq staged in dS^T's first tile and the next head's q "
                                   "loaded with its v and dout, v37 v34 with dk's and dq's RoPE factors fetched "
                                   "under their products, v38 v37 with those factors from a "
                                   "lane-ordered copy of the table, 16 bytes a load, v39 v34 with a masked chunk's "
                                   "exponents dropped by a select, not branched around, v40 v38 and v39 together, v41 "
                                   "v40 with dk's factors fetched as v37's, v42 v38 with that select in key half 1 "
                                   "alone, v43 v38 with each row's delta from its scores, out unread, v44 (R2-R4's on "
                                   "sm_90a) v43 with v39's select, v45 v44 with a head's rows landing in two parts, "
                                   "v46 v44 with a branch on whether a chunk is masked, no compare in the unmasked "
                                   "ones, v47 v45 and v46 together, v48 v46's branch in key half 1 alone, v49 v44's "
                                   "backward steps by two warp groups a block sharing a ring of three head slots, v50 "
                                   "v44 with its forward's steps by three warp groups a block sharing four slots, v51 "
                                   "v50's forward and v49's backward, v52 v49 with v46's branch; "
                                   "batches 128 and 256 between R2's and R3's, where v29's forward changes",
                                   lab::version_names(lab::bf16_attention_versions()), Precision::bf16, 0,
                                   {64, 128, 256, 512}),
      // fp32 arithmetic throughout; erff and the fp32 column sums over 8192 rows stay well inside 1e-4.
      lab_case<ElementwiseLab<float>>("lab_elementwise",
                               "kernel lab: the MLP's bias + GELU forward, GELU backward and fc bias gradient at "
                               "the training shape; v1 scalar, three launches, v2 16-byte and fused, v3 v2 with "
                               "the bias in the fc GEMM's epilogue, so GELU's forward only reads z (R1's)",
                               lab::version_names(lab::fp32_elementwise_versions()), Precision::fp32, 1e-4),
      lab_case<ElementwiseLab<bf16>>("lab_elementwise_bf16",
                                   "kernel lab: lab_elementwise on R2's bf16 tensors; v1 bias added by the GELU "
                                   "pass, v2 bias in the fc GEMM's epilogue, v3 v2 with GELU and GELU' from a "
                                   "per-block table of every bf16 value's, v4 v3's tables with the bias added by "
                                   "both passes and not stored (R2-R4's)",
                                   lab::version_names(lab::bf16_elementwise_versions()), Precision::bf16),
      lab_case<WgradLab>("lab_wgrad",
                         "kernel lab: a block's four weight-gradient GEMMs dw = dy^T x at the training shape; v1 "
                         "MN-major operands, v2 dy transposed, v3 the narrower operand transposed (R1's)",
                         lab::version_names(lab::wgrad_versions()), Precision::tf32),
      // bf16 tensors and outputs, fp32 accumulation: the default bf16 tolerance. Batch 512 is R3's and R4's.
      lab_case<FcGeluLab>("lab_fc_gelu_bf16",
                          "kernel lab: the MLP's fc GEMM + bias + exact GELU forward on bf16 tensors, z and GELU(z) "
                          "both written; v1 cuBLASLt with the bias in its epilogue, then the GELU table pass, "
                          "v4 (R2-R4's without sm_90a) cuBLASLt without the epilogue, the bias added by the GELU "
                          "pass, v5 one "
                          "sm_90a GEMM whose epilogue writes both, a block a tile, v6 v5 walking the tiles, v7 on "
                          "128 x 256 tiles, v8 v7 with 16-byte stores, v9 ping-pong warp groups, v10 and v11 v6 "
                          "and v9 with a batched epilogue, v12 v11 on a wider table, v13 v12 with x resident, v14 "
                          "(R2-R4's on sm_90a) v12 storing by TMA, v15 both, v16 v15 in pairs sharing w, v17 v14 "
                          "double-buffering its stores, v18-v20 v14 in clusters sharing w (v19 deeper) or w and x, "
                          "v21 v14 asking for its bias early, v22 v14 on five stages, v23 v14 with GELU in helper "
                          "warps, v24 v23 with a box a half, v25 v14 computing GELU by erff, v26 v14 storing by warp, "
                          "v27 v26 on pairs of warp groups",
                          lab::version_names(std::span<const FcGeluVersion>(kFcGeluVersions)), Precision::bf16, 0,
                          {64, 512}),
      lab_case<FcGeluBackwardLab>(
          "lab_fc_gelu_backward_bf16",
          "kernel lab: the MLP's backward from fc_proj's output gradient to fc's pre-activation gradient and bias "
          "gradient on bf16 tensors; v1 (R2-R4's without sm_90a) cuBLASLt's input-gradient GEMM, then the GELU "
          "backward pass, v2 one sm_90a GEMM whose epilogue applies GELU' and sums the columns, v3 and v4 v2 in "
          "clusters sharing w, or w and dy, v5 v2 asking for its bias early, v6 v3 computing GELU', v7 v3 asking "
          "for xw early, v8 (R2-R4's on sm_90a) v3 on a packed table, v9 both",
          lab::version_names(std::span<const FcGeluBackwardVersion>(kFcGeluBackwardVersions)), Precision::bf16, 0,
          {64, 512}),
      lab_case<QkvWgradLab>("lab_qkv_wgrad_bf16",
                            "kernel lab: the qkv layer's weight gradient and bias gradient (dy's column sums) on bf16 "
                            "tensors; v1 (R2-R4's off sm_90a) cuBLASLt's GEMM, then a column-sum pass over dy, v2 the "
                            "GEMM summing dy's columns in its BGRADB epilogue",
                            lab::version_names(std::span<const QkvWgradVersion>(kQkvWgradVersions)), Precision::bf16,
                            0, {64, 512}),
      lab_case<QkvBiasLab>("lab_attention_qkv_bias_bf16",
                           "kernel lab: the bf16 attention's backward with qkv's bias gradient (dqkv's column sums); "
                           "v1 the keeper's backward, then a column-sum pass over dqkv, v2 v26's backward summing the "
                           "columns as it stores dqkv, v3 to v16 lab_attention_bf16's v34, v37 to v42, v44 to v49 and "
                           "v52 summing them (v10, the keeper's, R2-R4's on sm_90a)",
                           lab::version_names(std::span<const QkvBiasVersion>(kQkvBiasVersions)), Precision::bf16, 0,
                           {64, 512}),
      // fp32 sums in two orders against double: well inside 1e-5 over 8192 to 65536 rows.
      lab_case<EmbeddingBackwardLab>("lab_embedding_backward",
                                     "kernel lab: the token embedding's backward, dx's rows summed by their token "
                                     "onto the head's share of dwte; v1 (every rung's) a one-hot matrix and cuBLAS's "
                                     "fp32 GEMM, v2 the rows gathered by token into sums in shared memory",
                                     lab::version_names(std::span<const EmbeddingBackwardVersion>(
                                         kEmbeddingBackwardVersions)),
                                     Precision::fp32, 1e-5, {64, 512}),
      step_gemms_case(),
  };
}

}  // namespace roofbench::gpt::cuda
