// R2 (bf16), R3 (bf16 at a bigger batch) and R4 (bf16 with activation checkpointing): R1's fused step with
// bf16 compute as torch.autocast(dtype=torch.bfloat16) applies it.
//   bf16: every matmul's operands (cuBLASLt bf16 tensor cores, fp32 accumulation, algorithms timed) and
//         the attention's (v44, the keeper layers.hpp names, on bf16 tensor cores); the
//         tensors those read are stored bf16: the LayerNorm outputs, qkv, the attention output, fc's x w^T
//         (its bias added, in fp32 and rounded to bf16 as a separate bias add is, by both GELU passes: so the
//         pre-activation is rounded twice, where autocast's addmm rounds x w^T + bias once: apart by up to
//         half a bf16 step of x w^T) and GELU, dlogits and the activations' gradients that feed a matmul.
//         The weights get a bf16 copy at the start of every step.
//   fp32: the master weights, their gradients and the Adam moments (AdamW is R1's), the residual stream and
//         its gradient, LayerNorm statistics, softmax and its log-sum-exp, the logits and the loss, the
//         embedding and its backward (autocast leaves embedding lookups fp32).
// At the limit a step's time is its energy over about 690 W: R3's 72 block GEMMs alone take about 8.4 J of
// its 14.5 J a step (lab_step_gemms_bf16 measures that share with --energy), so the LayerNorms, GELU,
// attention, optimizer and the rest cost about 6 J.
// Checkpointing (R4): activation_plan.hpp's bookkeeping; one activation set, each lower block recomputed
// from its input before its backward, and the backward's gradient scratch placed in that set's buffers once
// read for the last time (home_of; plugins/gpt/README.md counts the bytes). The whole step is one CUDA
// graph, as in R1.
// The weight-gradient GEMMs stay on the one stream: these rungs run at the 700 W power limit, so work moved
// beside other work is paid for in clock (on a second stream R3 took 21.49 ms against 21.63, within the
// noise); only less energy per step makes the step shorter. For the same reason qkv's bias gradient is not a
// cuBLASLt BGRADB epilogue, whose GEMM costs what a column-sum pass saves (plugins/gpt/README.md lists these
// measurements); on the sm_90a path the attention backward sums dqkv's columns as it stores them.
#include <array>
#include <utility>
#include <vector>

#include "activation_plan.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/hopper_host.hpp"
#include "rungs.hpp"

namespace roofbench::gpt::cuda {
namespace {

// Whether the bf16 trainers' fc + GELU kernels run here on a model of `channels` (their K, a multiple of 64).
bool fc_gelu_sm90a_runs(int channels) {
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  return hopper::hopper_path_available(device) && channels % 64 == 0;
}

class Bf16Trainer final : public Trainer {
 public:
  Bf16Trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream, DeviceCorpus corpus,
              std::uint64_t data_seed, bool checkpoint)
      : Trainer(cfg, alloc, stream, corpus, data_seed, ActivationStorage::bf16),
        plan_{cfg_.layers, checkpoint} {
    check_fused_attention_shape(attention_shape(cfg_.batch));
    fused_attention_configure();
    fc_gelu_sm90a_ = fc_gelu_sm90a_runs(cfg_.channels);
    if (fc_gelu_sm90a_) fc_gelu_forward_sm90a_configure();
    const std::size_t N = static_cast<std::size_t>(N_), C = static_cast<std::size_t>(cfg_.channels);
    const std::size_t H = static_cast<std::size_t>(cfg_.hidden());
    const std::size_t stats = static_cast<std::size_t>(cfg_.batch) * cfg_.heads * cfg_.context;
    auto halves = [&](std::size_t count) { return static_cast<bf16*>(alloc_bytes_(count * 2, BufferRole::output)); };
    weights_ = static_cast<bf16*>(alloc_bytes_(offsets_.total * 2, BufferRole::output));
    for (int set = 0; set < plan_.sets(); ++set) {
      Activations a{};
      a.ln1 = halves(N * C);
      a.ln1_mean = alloc_floats(N, BufferRole::output);
      a.ln1_rstd = alloc_floats(N, BufferRole::output);
      a.qkv = halves(N * 3 * C);
      a.attn_out = halves(N * C);
      a.lse = alloc_floats(stats, BufferRole::output);
      a.mid = alloc_floats(N * C, BufferRole::output);
      a.ln2 = halves(N * C);
      a.ln2_mean = alloc_floats(N, BufferRole::output);
      a.ln2_rstd = alloc_floats(N, BufferRole::output);
      a.fc = halves(N * H);
      a.gelu = halves(N * H);
      sets_.push_back(a);
    }
    place_scratch(halves);
    delta_ = alloc_floats(stats, BufferRole::output);
  }

 protected:
  void forward_pass(const std::uint8_t* inputs, int batch) override {
    const int N = positions(batch), C = cfg_.channels;
    const float eps = static_cast<float>(cfg_.ln_eps);
    cast_to_bf16(weights_, params_, offsets_.total, stream_);
    embedding_forward(resid_[0], inputs, param(offsets_.wte), N, C, stream_);
    const LayerOffsets& first = offsets_.layers[0];
    Activations& a0 = sets_[plan_.set_of(0)];
    layernorm_forward(a0.ln1, a0.ln1_mean, a0.ln1_rstd, resid_[0], param(first.ln1_w), param(first.ln1_b), N, C, eps,
                      stream_);
    for (int l = 0; l < cfg_.layers; ++l) {
      block_body_forward(l, batch);
      const LayerOffsets& o = offsets_.layers[l];
      const Activations& a = sets_[plan_.set_of(l)];
      linear_forward(lt_context(), branch16_, CUDA_R_16BF, a.gelu, weight(o.fc_proj_w), N, cfg_.hidden(), C);
      // The residual add closing this block fuses with the LayerNorm opening the next (or the final one).
      const bool last = l + 1 == cfg_.layers;
      Activations* next = last ? nullptr : &sets_[plan_.set_of(l + 1)];
      residual_layernorm_forward(resid_[l + 1], last ? lnf16_ : next->ln1, last ? lnf_mean_ : next->ln1_mean,
                                 last ? lnf_rstd_ : next->ln1_rstd, a.mid, branch16_, param(o.fc_proj_b),
                                 param(last ? offsets_.lnf_w : offsets_.layers[l + 1].ln1_w),
                                 param(last ? offsets_.lnf_b : offsets_.layers[l + 1].ln1_b), N, C, eps, stream_);
    }
    // The logits in fp32 (autocast hands the bf16 matmul's output to an fp32 cross-entropy; fp32 straight
    // from the accumulator loses nothing).
    linear_forward(lt_context(), logits_, CUDA_R_32F, lnf16_, weight(offsets_.wte), N, C, cfg_.vocab);
  }

  void loss_and_backward(const std::uint8_t* inputs, const std::uint8_t* targets) override {
    const int C = cfg_.channels, V = cfg_.vocab, H = cfg_.hidden();
    const AttentionShape shape = attention_shape(cfg_.batch);
    fused_cross_entropy(losses_, d_logits16_, logits_, targets, N_, V, stream_);
    mean_loss(loss_, loss_history_, kLossHistory, &counters_[0], losses_, N_, stream_);
    // The head: wte's gradient starts here (beta 0); the embedding's backward adds its share last.
    linear_backward(lt_context(), d_ln16_, CUDA_R_16BF, grad(offsets_.wte), d_logits16_, lnf16_,
                    weight(offsets_.wte), N_, C, V);
    // Each LayerNorm's backward also sums its dx, the residual stream's gradient, over the rows: the bias
    // gradient of the projection below (the top block's fc_proj here, attn_proj after LN2, the lower
    // block's fc_proj after LN1), out of the same pass.
    layernorm_backward(d_resid_, grad(offsets_.lnf_w), grad(offsets_.lnf_b), d_ln16_, resid_[cfg_.layers],
                       lnf_mean_, lnf_rstd_, param(offsets_.lnf_w), N_, C, 0.0f, partials_, stream_, d_resid16_,
                       grad(offsets_.layers[cfg_.layers - 1].fc_proj_b));
    for (int l = cfg_.layers - 1; l >= 0; --l) {
      if (plan_.recomputes(l)) recompute_block(l);
      const LayerOffsets& o = offsets_.layers[l];
      const Activations& a = sets_[plan_.set_of(l)];
      // The MLP half: fc_proj, GELU (with fc's bias gradient), fc, LN2.
      if (fc_gelu_sm90a_) {
        // fc_proj's weight gradient first (it reads gelu, whose memory R4's d_fc takes), then one kernel for its
        // input gradient and GELU's backward.
        linear_backward(lt_context(), nullptr, CUDA_R_16BF, grad(o.fc_proj_w), d_resid16_, a.gelu,
                        weight(o.fc_proj_w), N_, H, C);
        fc_gelu_backward_sm90a(d_fc16_, grad(o.fc_b), partials_, d_resid16_, weight(o.fc_proj_w), a.fc,
                               weight(o.fc_b), N_, C, H, stream_);
      } else {
        linear_backward(lt_context(), d_gelu16_, CUDA_R_16BF, grad(o.fc_proj_w), d_resid16_, a.gelu,
                        weight(o.fc_proj_w), N_, H, C, 0.0f, fc_proj_order_);
        gelu_backward_add_bias(d_fc16_, grad(o.fc_b), d_gelu16_, a.fc, weight(o.fc_b), N_, H, partials_, stream_);
      }
      linear_backward(lt_context(), d_ln16_, CUDA_R_16BF, grad(o.fc_w), d_fc16_, a.ln2, weight(o.fc_w), N_, C, H);
      // beta 1: the LayerNorm's input gradient lands on the residual stream's directly (and its bf16 copy).
      layernorm_backward(d_resid_, grad(o.ln2_w), grad(o.ln2_b), d_ln16_, a.mid, a.ln2_mean, a.ln2_rstd,
                         param(o.ln2_w), N_, C, 1.0f, partials_, stream_, d_resid16_, grad(o.attn_proj_b));
      // The attention half: attn_proj, attention, qkv, LN1.
      linear_backward(lt_context(), d_attn_out16_, CUDA_R_16BF, grad(o.attn_proj_w), d_resid16_, a.attn_out,
                      weight(o.attn_proj_w), N_, C, C);
      fused_attention_backward_and_bias_gradient(d_qkv16_, grad(o.qkv_b), partials_, delta_, d_attn_out16_,
                                                 a.attn_out, a.lse, a.qkv, param(o.qkv_b), rope_, shape, stream_);
      linear_backward(lt_context(), d_ln16_, CUDA_R_16BF, grad(o.qkv_w), d_qkv16_, a.ln1, weight(o.qkv_w), N_, C,
                      3 * C);
      // The bf16 copy of the stream's gradient feeds the block below; the embedding's backward reads fp32.
      layernorm_backward(d_resid_, grad(o.ln1_w), grad(o.ln1_b), d_ln16_, resid_[l], a.ln1_mean, a.ln1_rstd,
                         param(o.ln1_w), N_, C, 1.0f, partials_, stream_, l > 0 ? d_resid16_ : nullptr,
                         l > 0 ? grad(offsets_.layers[l - 1].fc_proj_b) : nullptr);
      // Block l's gradients are final (its fc_proj_b was written by the LayerNorm backward above it).
      if (hooks_.block_backward_done) hooks_.block_backward_done(l);
    }
    embedding_backward(cublas_.get(), grad(offsets_.wte), d_resid_, inputs, onehot_, N_, C, V, stream_);
  }

  void optimizer_step() override {
    adamw(params_, grads_, adam_m_, adam_v_, offsets_.total, opt_, &counters_[0], stream_);
  }

 private:
  // One set of a block's activations (activation_plan.hpp's block_activation_bytes counts them).
  struct Activations {
    bf16* ln1;
    float* ln1_mean;
    float* ln1_rstd;
    bf16* qkv;       // raw (before bias; the attention kernels add bias and RoPE)
    bf16* attn_out;
    float* lse;      // [B, heads, T]
    float* mid;      // the residual stream after the attention half, fp32
    bf16* ln2;
    float* ln2_mean;
    float* ln2_rstd;
    bf16* fc;    // x w^T, fc's bias not yet added (the pre-activation is bf16(fc + bias))
    bf16* gelu;
  };

  const bf16* weight(std::size_t offset) const { return weights_ + offset; }

  // The bf16 buffers outside the activation sets where activation_plan.hpp's home_of puts them: memory of
  // their own (from `halves`, in Bf16Buffer's order) or their home's; R4's homes in its one set (fc, gelu).
  template <typename Halves>
  void place_scratch(const Halves& halves) {
    const std::size_t N = static_cast<std::size_t>(N_);
    std::array<bf16*, kBf16Buffers> at{};
    at[static_cast<int>(Bf16Buffer::fc)] = sets_.front().fc;
    at[static_cast<int>(Bf16Buffer::gelu)] = sets_.front().gelu;
    for (int i = 0; i < kBf16Buffers; ++i) {
      const auto b = static_cast<Bf16Buffer>(i);
      if (home_of(b, plan_) == b && !at[i]) at[i] = halves(N * bf16_buffer_width(b, cfg_));
    }
    const auto place = [&](Bf16Buffer b) { return at[static_cast<int>(home_of(b, plan_))]; };
    lnf16_ = place(Bf16Buffer::lnf16);
    d_logits16_ = place(Bf16Buffer::d_logits16);
    d_resid16_ = place(Bf16Buffer::d_resid16);
    d_fc16_ = place(Bf16Buffer::d_fc16);
    branch16_ = place(Bf16Buffer::branch16);
    d_ln16_ = place(Bf16Buffer::d_ln16);
    d_attn_out16_ = place(Bf16Buffer::d_attn_out16);
    d_gelu16_ = place(Bf16Buffer::d_gelu16);
    d_qkv16_ = place(Bf16Buffer::d_qkv16);
    fc_proj_order_ = fc_proj_weight_gradient_first(plan_) ? GradientOrder::weight_first : GradientOrder::input_first;
  }

  // Block l's forward from its LN1 output (already in its set) through GELU: everything its backward reads.
  void block_body_forward(int l, int batch) {
    const int N = positions(batch), C = cfg_.channels, H = cfg_.hidden();
    const float eps = static_cast<float>(cfg_.ln_eps);
    const LayerOffsets& o = offsets_.layers[l];
    Activations& a = sets_[plan_.set_of(l)];
    linear_forward(lt_context(), a.qkv, CUDA_R_16BF, a.ln1, weight(o.qkv_w), N, C, 3 * C);
    fused_attention_forward(a.attn_out, a.lse, a.qkv, param(o.qkv_b), rope_, attention_shape(batch), stream_);
    linear_forward(lt_context(), branch16_, CUDA_R_16BF, a.attn_out, weight(o.attn_proj_w), N, C, C);
    residual_layernorm_forward(a.mid, a.ln2, a.ln2_mean, a.ln2_rstd, resid_[l], branch16_, param(o.attn_proj_b),
                               param(o.ln2_w), param(o.ln2_b), N, C, eps, stream_);
    // fc's bias (bf16, as autocast casts it) is added with GELU, not in cuBLASLt's epilogue, which made this GEMM
    // the slowest of its shape (layers.hpp's gelu_forward_add_bias); on sm_90a one kernel writes both outputs.
    if (fc_gelu_sm90a_) {
      fc_gelu_forward_sm90a(a.fc, a.gelu, a.ln2, weight(o.fc_w), weight(o.fc_b), N, C, H, stream_);
    } else {
      linear_forward(lt_context(), a.fc, CUDA_R_16BF, a.ln2, weight(o.fc_w), N, C, H);
      gelu_forward_add_bias(a.gelu, a.fc, weight(o.fc_b), N, H, stream_);
    }
  }

  // R4: block l's activations again, from its input resid_[l] (kept through the step). Its LN1 runs on its
  // own here; in the forward it was fused with the residual add below it, the same arithmetic on the same
  // values, so the recomputed activations are the forward's bit for bit.
  void recompute_block(int l) {
    const LayerOffsets& o = offsets_.layers[l];
    Activations& a = sets_[plan_.set_of(l)];
    layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, resid_[l], param(o.ln1_w), param(o.ln1_b), N_, cfg_.channels,
                      static_cast<float>(cfg_.ln_eps), stream_);
    block_body_forward(l, cfg_.batch);
  }

  ActivationPlan plan_;
  bf16* weights_ = nullptr;  // the bf16 copy of params_, made at the start of every forward
  std::vector<Activations> sets_;
  // The bf16 counterparts of the base's fp32 buffers of the same roles (which this rung leaves unallocated).
  bf16* lnf16_ = nullptr;
  bf16* branch16_ = nullptr;
  bf16* d_logits16_ = nullptr;
  bf16* d_resid16_ = nullptr;  // the bf16 copy of d_resid_ (fp32), refreshed by every LN backward
  bf16* d_ln16_ = nullptr;     // a LayerNorm's output gradient: a bf16 matmul's dx, read by the LN backward
  bf16* d_attn_out16_ = nullptr;
  bf16* d_qkv16_ = nullptr;
  bf16* d_gelu16_ = nullptr;
  bf16* d_fc16_ = nullptr;
  float* delta_ = nullptr;
  GradientOrder fc_proj_order_ = GradientOrder::input_first;
  bool fc_gelu_sm90a_ = false;  // fc + GELU forward and backward as sm_90a kernels (bf16_fc_gelu_keeper_name)
};

}  // namespace

const char* bf16_fc_gelu_keeper_name(int channels) {
  return fc_gelu_sm90a_runs(channels)
             ? "sm_90a: fc's GEMM with the bias and GELU in its epilogue (lab_fc_gelu_bf16 v14), fc_proj's input "
               "gradient with GELU's backward in its (lab_fc_gelu_backward_bf16 v8)"
             : "cuBLASLt's GEMMs, then the GELU passes adding the bias (lab_fc_gelu_bf16 v4, lab_fc_gelu_backward_bf16 "
               "v1; no sm_90a path here)";
}

std::unique_ptr<Trainer> make_bf16_trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream,
                                           DeviceCorpus corpus, std::uint64_t data_seed, std::uint64_t init_seed,
                                           bool checkpoint, StepReplay replay) {
  auto trainer = std::make_unique<Bf16Trainer>(cfg, alloc, stream, corpus, data_seed, checkpoint);
  trainer->start(init_seed, replay);
  return trainer;
}

}  // namespace roofbench::gpt::cuda
