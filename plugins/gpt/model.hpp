// The GPT that the gpt plugin trains: its shape, its parameter layout, its vocabulary and its optimiser.
// Header-only and free of CUDA so the GPU rungs and the double-precision CPU reference share one truth.
//
// The math (both implementations follow it exactly; N = batch * context positions, C channels):
//   x = wte[tokens]                                                  [N, C]
//   per block:
//     a   = LN1(x);  qkv = a qkv_w^T + qkv_b                         [N, 3C]: q | k | v, head h owns
//                                                                    channels h*hd .. h*hd+hd-1 of each
//     RoPE on q and k, per head, on ADJACENT channel pairs (2i, 2i+1), i in [0, hd/2):
//       angle = pos * rope_base^(-2i/hd);  (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos)
//     per head: causal softmax(q k^T / sqrt(hd)) over keys j <= i, times v; heads concatenated
//     x  += attn_out attn_proj_w^T + attn_proj_b
//     m   = LN2(x);  h = GELU(m fc_w^T + fc_b), exact GELU 0.5 z (1 + erf(z / sqrt 2))
//     x  += h fc_proj_w^T + fc_proj_b
//   logits = LNf(x) wte^T                                            (tied, no bias)
//   loss   = mean over all N positions of -log softmax(logits)[target]
// LayerNorm: (x - mean) / sqrt(biased variance + ln_eps) * w + b. Linear weights are [out, in] row-major.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__CUDACC__)
#define ROOFBENCH_GPT_HOST_DEVICE __host__ __device__
#else
#define ROOFBENCH_GPT_HOST_DEVICE
#endif

namespace roofbench::gpt {

struct Config {
  int vocab = 28;
  int context = 128;   // T: tokens per sequence
  int channels = 512;  // C
  int layers = 6;
  int heads = 8;
  int batch = 64;  // sequences per training step
  double rope_base = 10000;
  double ln_eps = 1e-5;

  int head_dim() const { return channels / heads; }
  int hidden() const { return 4 * channels; }

  // A shape the math above cannot run is a caller's bug; say which rule it breaks.
  void validate() const {
    if (vocab <= 0 || context <= 0 || channels <= 0 || layers <= 0 || heads <= 0 || batch <= 0)
      throw std::invalid_argument("gpt::Config: every size must be positive");
    if (channels % heads != 0) throw std::invalid_argument("gpt::Config: channels must divide into heads");
    if (head_dim() % 2 != 0) throw std::invalid_argument("gpt::Config: RoPE needs an even head_dim");
  }
};

// ---- Vocabulary: characters, case-folded; 28 tokens. ----
inline constexpr int kSpaceToken = 26;    // every whitespace character
inline constexpr int kUnknownToken = 27;  // everything that is neither a letter nor whitespace
inline constexpr int kVocabSize = 28;

ROOFBENCH_GPT_HOST_DEVICE inline int token_of(unsigned char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') return kSpaceToken;
  return kUnknownToken;
}

// For printing samples and failures: '_' stands for the unknown token.
inline char char_of(int token) {
  if (token >= 0 && token < 26) return static_cast<char>('a' + token);
  return token == kSpaceToken ? ' ' : '_';
}

// ---- Parameter layout: every parameter in ONE flat array, in the order layout() lists. ----
enum class InitKind { normal, zero, one };  // normal: N(0, kInitStd)
inline constexpr double kInitStd = 0.02;

struct TensorSlot {
  std::string name;  // "wte", "h3.qkv_w", "lnf_b", ...
  std::size_t offset = 0, count = 0;
  std::vector<int> shape;
  InitKind init = InitKind::zero;
};

// Offsets (in elements) of one block's tensors in the flat array.
struct LayerOffsets {
  std::size_t ln1_w, ln1_b, qkv_w, qkv_b, attn_proj_w, attn_proj_b;
  std::size_t ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
};

struct ParameterOffsets {
  std::size_t wte = 0;
  std::vector<LayerOffsets> layers;
  std::size_t lnf_w = 0, lnf_b = 0;
  std::size_t total = 0;  // the parameter count
};

// The one place the order is written down; layout() and parameter_offsets() both read it from here.
inline std::pair<std::vector<TensorSlot>, ParameterOffsets> describe_parameters(const Config& cfg) {
  cfg.validate();
  const int C = cfg.channels, V = cfg.vocab, H = cfg.hidden();
  std::vector<TensorSlot> slots;
  ParameterOffsets offsets;
  auto add = [&](std::string name, std::vector<int> shape, InitKind init) {
    std::size_t count = 1;
    for (int extent : shape) count *= static_cast<std::size_t>(extent);
    slots.push_back({std::move(name), offsets.total, count, std::move(shape), init});
    offsets.total += count;
    return slots.back().offset;
  };
  offsets.wte = add("wte", {V, C}, InitKind::normal);
  for (int l = 0; l < cfg.layers; ++l) {
    // Appended, not "h" + ...: GCC 12 at -O3 misreports a -Wrestrict overlap in operator+(const char*, string&&).
    const std::string p = std::string("h").append(std::to_string(l)).append(".");
    LayerOffsets o{};
    o.ln1_w = add(p + "ln1_w", {C}, InitKind::one);
    o.ln1_b = add(p + "ln1_b", {C}, InitKind::zero);
    o.qkv_w = add(p + "qkv_w", {3 * C, C}, InitKind::normal);
    o.qkv_b = add(p + "qkv_b", {3 * C}, InitKind::zero);
    o.attn_proj_w = add(p + "attn_proj_w", {C, C}, InitKind::normal);
    o.attn_proj_b = add(p + "attn_proj_b", {C}, InitKind::zero);
    o.ln2_w = add(p + "ln2_w", {C}, InitKind::one);
    o.ln2_b = add(p + "ln2_b", {C}, InitKind::zero);
    o.fc_w = add(p + "fc_w", {H, C}, InitKind::normal);
    o.fc_b = add(p + "fc_b", {H}, InitKind::zero);
    o.fc_proj_w = add(p + "fc_proj_w", {C, H}, InitKind::normal);
    o.fc_proj_b = add(p + "fc_proj_b", {C}, InitKind::zero);
    offsets.layers.push_back(o);
  }
  offsets.lnf_w = add("lnf_w", {C}, InitKind::one);
  offsets.lnf_b = add("lnf_b", {C}, InitKind::zero);
  return {std::move(slots), std::move(offsets)};
}

inline std::vector<TensorSlot> layout(const Config& cfg) { return describe_parameters(cfg).first; }
inline ParameterOffsets parameter_offsets(const Config& cfg) { return describe_parameters(cfg).second; }
inline std::size_t parameter_count(const Config& cfg) { return describe_parameters(cfg).second.total; }

// ---- Optimiser: torch.optim.AdamW's update, step by step. ----
struct AdamW {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled, applied to every parameter (biases and LayerNorms too)
};

// 1 - beta^t for both moments at step t (t starts at 1): computed once per step on the host rather than
// once per element.
struct AdamWBiasCorrection {
  double first = 1, second = 1;
};
inline AdamWBiasCorrection adamw_bias_correction(const AdamW& opt, int step) {
  return {1 - std::pow(opt.beta1, step), 1 - std::pow(opt.beta2, step)};
}

// One element's update. Templated so the GPU can run it in fp32 and the reference in double, both in
// torch.optim.AdamW's order: decay, moments, bias-corrected step.
template <typename Real>
ROOFBENCH_GPT_HOST_DEVICE inline void adamw_update(Real& param, Real grad, Real& m, Real& v, const AdamW& opt,
                                                   AdamWBiasCorrection correction) {
  const Real lr = static_cast<Real>(opt.lr), beta1 = static_cast<Real>(opt.beta1), beta2 = static_cast<Real>(opt.beta2);
  param -= lr * static_cast<Real>(opt.weight_decay) * param;
  m = beta1 * m + (Real(1) - beta1) * grad;
  v = beta2 * v + (Real(1) - beta2) * grad * grad;
  const Real m_hat = m / static_cast<Real>(correction.first);
  const Real v_hat = v / static_cast<Real>(correction.second);
  param -= lr * m_hat / (std::sqrt(v_hat) + static_cast<Real>(opt.eps));
}

}  // namespace roofbench::gpt
