// Attention prefill (B x T queries against their own T keys) and decode (one query per sequence against a
// KV cache), each through several implementations of the same computation.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "attention_gate.hpp"
#include "cases.hpp"
#include "cudnn_attention.hpp"
#include "roofbench/case_support/cublas_on_stream.hpp"
#include "roofbench/case_support/formats.hpp"
#include "roofbench/case_support/input_copies.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench::transformer {

using kernels::AttentionFault;
using kernels::AttentionShape;
using kernels::AttentionType;

kernels::AttentionShape parse_prefill_shape(const std::string& text, bool causal) {
  AttentionShape shape;
  char x1 = 0, x2 = 0, x3 = 0;
  std::istringstream in(text);
  in >> shape.batch >> x1 >> shape.heads >> x2 >> shape.q_len >> x3 >> shape.head_dim;
  if (!in || x1 != 'x' || x2 != 'x' || x3 != 'x' || !(in >> std::ws).eof() || shape.batch <= 0 || shape.heads <= 0 ||
      shape.q_len <= 0 || shape.head_dim <= 0)
    throw Error("transformer: shape must be BxHxTxD like 8x12x1024x64, got '" + text + "'");
  shape.kv_len = shape.q_len;
  shape.causal = causal;
  return shape;
}

std::int64_t prefill_tokens(const std::string& heads) { return heads == "16x128" ? 16384 : 8192; }

kernels::AttentionShape prefill_shape(const std::string& heads, std::int64_t t, bool causal) {
  const std::int64_t tokens = prefill_tokens(heads);
  const std::size_t x = heads.find('x');
  if (x == std::string::npos) throw Error("transformer: heads must be HxD like 12x64, got '" + heads + "'");
  if (t <= 0 || tokens % t != 0)
    throw Error("transformer: t must divide the " + std::to_string(tokens) + " tokens, got " + std::to_string(t));
  return parse_prefill_shape(std::to_string(tokens / t) + "x" + heads.substr(0, x) + "x" + std::to_string(t) +
                                 heads.substr(x),
                             causal);
}

std::string best_fused_version(const AttentionShape& shape, int device_index) {
  const std::string hopper = best_hopper_fused_version(shape.head_dim, shape.causal);
  try {
    kernels::check_fused_supports(shape, hopper);
  } catch (const std::invalid_argument&) {
    return kBestFusedVersion;
  }
  return kernels::fused_unavailable_reason(hopper, device_index).empty() ? hopper : kBestFusedVersion;
}

std::string best_split_kv_version(const AttentionShape& shape, int sm_count, bool bulk_copy) {
  if (shape.batch * shape.heads < sm_count) return "v3";
  // v7's run per block: the cache over 4 blocks per SM.
  const std::int64_t balanced_run = shape.batch * shape.heads * shape.kv_len / (std::int64_t(sm_count) * 4);
  if (balanced_run >= kLongestRunForSplits) return "v7";
  return bulk_copy ? "v9" : "v2";  // v2: the middle band's fastest without bulk copies
}

bool has_bulk_copy(int device_index) {
  int major = 0;
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index));
  return major >= 9;
}

namespace {

ElementType element_of(AttentionType type) { return type == AttentionType::bf16 ? ElementType::bf16 : ElementType::f16; }

// Owns Q, K, V and O, counts the work and runs the gate; subclasses launch.
class AttentionCase : public Case {
 public:
  AttentionCase(AttentionType type, AttentionShape shape, AttentionFault fault)
      : type_(type), element_(element_of(type)), shape_(shape), fault_(fault) {
    if (shape_.q_len > 1)  // prefill names heads and t only: the batch is in the shape
      facts_.push_back({"shape", std::to_string(shape_.batch) + "x" + std::to_string(shape_.heads) + "x" +
                                     std::to_string(shape_.q_len) + "x" + std::to_string(shape_.head_dim) +
                                     " (batch x heads x t x head dim)"});
  }

  void setup(Context& ctx) override {
    const std::size_t bytes = case_support::element_bytes(element_);
    q_ = ctx.alloc(std::size_t(shape_.q_elements()) * bytes, BufferRole::input);
    k_ = ctx.alloc(std::size_t(shape_.kv_elements()) * bytes, BufferRole::input);
    v_ = ctx.alloc(std::size_t(shape_.kv_elements()) * bytes, BufferRole::input);
    o_ = ctx.alloc(std::size_t(shape_.q_elements()) * bytes, BufferRole::output);
    // Scores with a spread of about 1.3 (not 0.3, as [-1, 1) would give): a softmax that is far from
    // uniform, so a mask or a rescale that goes wrong moves the output well past the tolerance.
    ctx.fill_random(q_, std::size_t(shape_.q_elements()), element_, -2, 2);
    ctx.fill_random(k_, std::size_t(shape_.kv_elements()), element_, -2, 2);
    ctx.fill_random(v_, std::size_t(shape_.kv_elements()), element_);
    copies_.add(q_, std::size_t(shape_.q_elements()) * bytes, BufferRole::input);
    copies_.add(k_, std::size_t(shape_.kv_elements()) * bytes, BufferRole::input);
    copies_.add(v_, std::size_t(shape_.kv_elements()) * bytes, BufferRole::input);
    copies_.add(o_, std::size_t(shape_.q_elements()) * bytes, BufferRole::output);
    scan_.setup(ctx);
    prepare(ctx);
  }

  Work work() const override {
    Work w;
    w.flops = shape_.flops();
    w.bytes = shape_.min_bytes(case_support::element_bytes(element_));
    w.bytes_read = shape_.min_bytes_read(case_support::element_bytes(element_));
    w.items = double(shape_.batch * shape_.q_len);
    w.item_name = "tokens";
    // Decode reads the KV cache and writes one row per sequence.
    w.read_dominated = shape_.q_len == 1;
    return w;
  }

  Check check(Context& ctx) override {
    return check_attention(
        ctx, {.shape = shape_, .type = element_, .q = q_, .k = k_, .v = v_, .o = o_, .must_check = gate_pairs()}, scan_,
        gate_figures_);
  }

  // Decode, cold: runs read Q, K and V and write O in copies taken in turn (input_copies.hpp). Prefill,
  // bound by its FLOPs, keeps the flush.
  Rotation* rotation() override { return shape_.q_len == 1 ? &copies_ : nullptr; }

  // The gate's counts, then how the point ran.
  std::vector<Figure> figures() const override {
    std::vector<Figure> figures = gate_figures_;
    figures.insert(figures.end(), facts_.begin(), facts_.end());
    return figures;
  }

 protected:
  virtual void prepare(Context&) {}
  // (batch, head) pairs the gate must compare besides its sample: where this kernel's work splits.
  virtual std::vector<std::int64_t> gate_pairs() const { return {}; }

  AttentionType type_;
  ElementType element_;
  AttentionShape shape_;
  AttentionFault fault_;
  void *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *o_ = nullptr;
  case_support::InputCopies copies_;
  case_support::NonfiniteScan scan_;
  std::vector<Figure> gate_figures_;
  std::vector<Figure> facts_;  // texts
};

// What a framework without a fused kernel runs: S = Q K^T (fp32) through cuBLAS, a masked softmax
// kernel writing P in the input type, O = P V through cuBLAS. The T x T scores go through memory.
class NaiveAttention final : public AttentionCase {
 public:
  using AttentionCase::AttentionCase;

  void run(Context& ctx) override {
    const cublasHandle_t handle = cublas_.on(ctx);
    const auto [b, h, tq, tk, d, causal] = shape_;
    (void)causal;
    const int batch = int(b * h);
    const cudaDataType_t type = element_ == ElementType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    // Row-major S [tq, tk] is column-major S^T = K Q^T, with K and Q column-major [d, t].
    ROOFBENCH_CUBLAS(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(tk), int(tq), int(d), &one, k_,
                                                type, int(d), tk * d, q_, type, int(d), tq * d, &zero, scores_,
                                                CUDA_R_32F, int(tk), tq * tk, batch, CUBLAS_COMPUTE_32F,
                                                CUBLAS_GEMM_DEFAULT));
    kernels::launch_masked_softmax(type_, shape_, scores_, probabilities_, float(1.0 / std::sqrt(double(d))),
                                   cuda::stream(ctx), fault_);
    // Row-major O [tq, d] is column-major O^T = V^T P^T.
    ROOFBENCH_CUBLAS(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(d), int(tq), int(tk), &one, v_,
                                                type, int(d), tk * d, probabilities_, type, int(tk), tq * tk, &zero, o_,
                                                type, int(d), tq * d, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  void teardown(Context&) override { cublas_.teardown(); }

 private:
  void prepare(Context& ctx) override {
    if (shape_.batch * shape_.heads > INT_MAX || shape_.q_len > INT_MAX || shape_.kv_len > INT_MAX)
      throw Error("transformer: naive attention's sizes exceed cuBLAS's int");
    const std::size_t score_count = std::size_t(shape_.batch * shape_.heads * shape_.q_len * shape_.kv_len);
    scores_ = static_cast<float*>(ctx.alloc(score_count * sizeof(float), BufferRole::scratch));
    probabilities_ = ctx.alloc(score_count * case_support::element_bytes(element_), BufferRole::scratch);
    cublas_.setup(ctx);
    facts_.push_back({"kernels", "cublasGemmStridedBatchedEx (S in fp32), masked softmax, cublasGemmStridedBatchedEx"});
  }

  case_support::CublasOnStream cublas_;
  float* scores_ = nullptr;
  void* probabilities_ = nullptr;
};

class FusedAttention final : public AttentionCase {
 public:
  // An empty version: the keeper for the device the case gets (best_fused_version), chosen at setup.
  FusedAttention(std::string version, AttentionType type, AttentionShape shape, AttentionFault fault)
      : AttentionCase(type, shape, fault), version_(std::move(version)) {
    try {
      kernels::check_fused_supports(shape_, version_.empty() ? kBestFusedVersion : version_);
    } catch (const std::invalid_argument& e) {
      throw NotApplicable(e.what());
    }
    if (!version_.empty()) add_kernel_fact();
  }
  void run(Context& ctx) override {
    kernels::launch_fused_attention(version_, type_, shape_, q_, k_, v_, o_, cuda::stream(ctx), fault_);
  }

 private:
  // A version of Hopper's own instructions (sm_90a) is not applicable on other devices, with the reason.
  void prepare(Context& ctx) override {
    if (version_.empty()) {
      version_ = best_fused_version(shape_, ctx.device().index);
      add_kernel_fact();
    }
    const std::string why = kernels::fused_unavailable_reason(version_, ctx.device().index);
    if (!why.empty()) throw NotApplicable("transformer: " + why);
    if (kernels::fused_version_needs_sm90a(version_)) {
      const int blocks = kernels::fused_blocks_per_sm(version_, type_, int(shape_.head_dim));
      facts_.push_back({"blocks_per_sm", std::to_string(blocks)});
    }
  }
  void add_kernel_fact() {
    const std::string form = kernels::fused_version_form(version_);
    facts_.push_back({"kernel", "fused_" + version_ + (form.empty() ? "" : " (" + form + ")")});
  }

  std::string version_;
};

class SplitKvDecode final : public AttentionCase {
 public:
  // An empty version: the best for the shape on the device it gets (best_split_kv_version).
  SplitKvDecode(std::string version, AttentionShape shape, AttentionFault fault)
      : AttentionCase(AttentionType::bf16, shape, fault), version_(std::move(version)) {
    const auto& versions = kernels::split_kv_versions();
    if (!version_.empty() && std::find(versions.begin(), versions.end(), version_) == versions.end())
      throw Error("transformer: no split_kv version '" + version_ + "'");
  }
  void run(Context& ctx) override {
    kernels::launch_split_kv_decode(type_, shape_, plan_, q_, k_, v_, o_, workspace_, cuda::stream(ctx), fault_);
  }

 private:
  void prepare(Context& ctx) override {
    int sms = 0;
    ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.device().index));
    const bool bulk_copy = has_bulk_copy(ctx.device().index);
    if (version_.empty()) version_ = best_split_kv_version(shape_, sms, bulk_copy);
    plan_ = kernels::plan_split_kv(shape_, sms, version_);
    if (plan_.bulk_stages > 0 && !bulk_copy)
      throw NotApplicable("transformer: split_kv " + version_ +
                          " stages the cache through cp.async.bulk, which needs sm_90 or later");
    workspace_ = ctx.alloc(plan_.workspace_bytes, BufferRole::scratch);
    kernels::zero_split_kv_workspace(plan_, shape_, workspace_, cuda::stream(ctx));
    facts_.push_back({"kernel", "split_kv_" + version_});
    if (plan_.balanced_blocks_per_sm > 0)
      facts_.push_back({"runs", std::to_string(plan_.blocks) + " blocks of " + std::to_string(plan_.split_len) +
                                    " keys over all (batch, head)s"});
    else
      facts_.push_back({"splits", std::to_string(plan_.splits) + " of " + std::to_string(plan_.split_len) + " keys"});
  }

  std::vector<std::int64_t> gate_pairs() const override {
    if (plan_.balanced_blocks_per_sm == 0) return {};
    return run_boundary_pairs(plan_.blocks, plan_.split_len, shape_.kv_len, shape_.batch * shape_.heads, 8);
  }

  std::string version_;
  kernels::SplitKvPlan plan_;
  void* workspace_ = nullptr;
};

class CudnnAttentionCase final : public AttentionCase {
 public:
  using AttentionCase::AttentionCase;
  void run(Context& ctx) override { graph_.run(cuda::stream(ctx), q_, k_, v_, o_); }
  void teardown(Context&) override { graph_.destroy(); }

 private:
  void prepare(Context& ctx) override {
    graph_.build(type_, shape_, ctx, q_, k_, v_, o_);  // throws NotApplicable with cuDNN's reason when refused
    for (Figure& fact : graph_.facts()) facts_.push_back(std::move(fact));
  }
  CudnnAttention graph_;
};

}  // namespace

std::unique_ptr<Case> make_prefill_attention(const std::string& impl, AttentionType type, const AttentionShape& shape,
                                             AttentionFault fault) {
  if (impl == "naive") return std::make_unique<NaiveAttention>(type, shape, fault);
  if (impl == "cudnn") return std::make_unique<CudnnAttentionCase>(type, shape, fault);
  if (impl == "fused") return std::make_unique<FusedAttention>("", type, shape, fault);
  if (impl.rfind("fused_", 0) == 0) return std::make_unique<FusedAttention>(impl.substr(6), type, shape, fault);
  throw Error("transformer: no prefill implementation '" + impl + "'");
}

std::unique_ptr<Case> make_decode_attention(const std::string& impl, const AttentionShape& shape, AttentionFault fault) {
  if (impl == "naive") return std::make_unique<NaiveAttention>(AttentionType::bf16, shape, fault);
  if (impl == "split_kv") return std::make_unique<SplitKvDecode>("", shape, fault);
  if (impl.rfind("split_kv_", 0) == 0) return std::make_unique<SplitKvDecode>(impl.substr(9), shape, fault);
  if (impl == "cudnn") return std::make_unique<CudnnAttentionCase>(AttentionType::bf16, shape, fault);
  throw Error("transformer: no decode implementation '" + impl + "'");
}

void add_attention_cases(Plugin& plugin) {
  std::vector<std::string> prefill_impls = {"naive", "fused"};
  for (const std::string& v : kernels::fused_versions()) prefill_impls.push_back("fused_" + v);
  prefill_impls.push_back("cudnn");
  // heads x head dim, and T: a sweep the report draws as one line per (impl, mask, heads); batch x T is
  // 8192 tokens at GPT-2 small's 12 x 64 heads, 16384 at 16 x 128 (the FlashAttention papers' B4 T4096 d128).
  const Axis heads = Axis::strings("heads", {"12x64", "16x128"});
  const Axis lengths = Axis::ints("t", {128, 512, 1024, 2048, 4096, 8192});
  for (const auto& [name, type, precision] :
       {std::tuple{"attention_prefill_bf16", AttentionType::bf16, Precision::bf16},
        std::tuple{"attention_prefill_fp16", AttentionType::fp16, Precision::fp16}}) {
    CaseSpec spec;
    spec.name = name;
    spec.description = std::string("attention forward over batch x t = 8192 tokens at GPT-2 small's 12 x 64 heads, ") +
                       "16384 at 16 x 128, " + to_string(precision) +
                       ", causal or full; FLOPs count only the unmasked pairs; the shape is in the facts";
    spec.axes = {Axis::strings("impl", prefill_impls), Axis::strings("mask", {"causal", "full"}), heads, lengths};
    spec.device = DeviceNeed::gpu();
    spec.precision = precision;
    spec.make = [type](const Params& p) {
      return make_prefill_attention(p.str("impl"), type, prefill_shape(p.str("heads"), p.integer("t"), p.str("mask") == "causal"));
    };
    plugin.add(std::move(spec));
  }

  CaseSpec decode;
  decode.name = "attention_decode_bf16";
  decode.description =
      "one query token per sequence against its KV cache (12 heads x 64, bf16): reads the cache, ~1 FLOP/byte";
  std::vector<std::string> decode_impls = {"naive", "split_kv"};
  for (const std::string& v : kernels::split_kv_versions()) decode_impls.push_back("split_kv_" + v);
  decode_impls.push_back("cudnn");
  decode.axes = {Axis::strings("impl", decode_impls), Axis::ints("batch", {1, 8, 32, 64, 128, 256}),
                 Axis::ints("kv", {1024, 4096, 16384})};
  decode.device = DeviceNeed::gpu();
  decode.precision = Precision::bf16;
  decode.make = [](const Params& p) {
    const AttentionShape shape{.batch = p.integer("batch"), .heads = 12, .q_len = 1, .kv_len = p.integer("kv"),
                               .head_dim = 64, .causal = true};
    return make_decode_attention(p.str("impl"), shape);
  };
  plugin.add(std::move(decode));
}

}  // namespace roofbench::transformer
