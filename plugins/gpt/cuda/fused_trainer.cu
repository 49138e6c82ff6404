// R1, fused: what a compiler makes of the same step. Biases ride along with the next kernel that touches
// the tensor anyway (qkv's inside the attention kernels, with RoPE; the projections' inside the fused
// residual + LayerNorm; fc's with GELU), attention never writes its scores, cross-entropy is one pass,
// AdamW one launch over the flat parameters, and the whole step, batch draw included, is one CUDA graph
// replayed by train_step(): no per-kernel launch cost on the host. The blocks' weight-gradient GEMMs get a
// K-major operand, transposed into scratch first, so that cuBLAS can run Hopper kernels (WgradLayout).
#include "roofbench/cuda.hpp"
#include "rungs.hpp"

namespace roofbench::gpt::cuda {

namespace {

class FusedTrainer final : public Trainer {
 public:
  FusedTrainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream, DeviceCorpus corpus,
               std::uint64_t data_seed)
      : Trainer(cfg, alloc, stream, corpus, data_seed) {
    check_fused_attention_shape(attention_shape(cfg_.batch));
    set_wgrad_layout(kFusedWgradLayout);
    fused_attention_configure();
    const std::size_t stats = static_cast<std::size_t>(cfg_.batch) * cfg_.heads * cfg_.context;
    for (int l = 0; l < cfg_.layers; ++l) lse_.push_back(alloc_floats(stats, BufferRole::output));
    delta_ = alloc_floats(stats, BufferRole::output);
  }

 protected:
  void forward_pass(const std::uint8_t* inputs, int batch) override {
    const int N = positions(batch), C = cfg_.channels, H = cfg_.hidden();
    const float eps = static_cast<float>(cfg_.ln_eps);
    const AttentionShape shape = attention_shape(batch);
    embedding_forward(resid_[0], inputs, param(offsets_.wte), N, C, stream_);
    const LayerOffsets& first = offsets_.layers[0];
    layernorm_forward(layers_[0].ln1, layers_[0].ln1_mean, layers_[0].ln1_rstd, resid_[0], param(first.ln1_w),
                      param(first.ln1_b), N, C, eps, stream_);
    for (int l = 0; l < cfg_.layers; ++l) {
      const LayerOffsets& o = offsets_.layers[l];
      const LayerActivations& a = layers_[l];
      linear_forward(cublas_.get(), a.qkv, a.ln1, param(o.qkv_w), N, C, 3 * C);
      fused_attention_forward(a.attn_out, lse_[l], a.qkv, param(o.qkv_b), rope_, shape, stream_);
      linear_forward(cublas_.get(), branch_, a.attn_out, param(o.attn_proj_w), N, C, C);
      residual_layernorm_forward(a.mid, a.ln2, a.ln2_mean, a.ln2_rstd, resid_[l], branch_, param(o.attn_proj_b),
                                 param(o.ln2_w), param(o.ln2_b), N, C, eps, stream_);
      // fc's bias in the GEMM's epilogue, so GELU reads z once (elementwise v3).
      linear_forward_bias(lt_context(), CUDA_R_32F, a.fc, a.ln2, param(o.fc_w), param(o.fc_b), N, C, H);
      gelu_forward_vectorized(a.gelu, a.fc, static_cast<std::size_t>(N) * H, stream_);
      linear_forward(cublas_.get(), branch_, a.gelu, param(o.fc_proj_w), N, H, C);
      // The residual add closing this block fuses with the LayerNorm opening the next (or the final one).
      const bool last = l + 1 == cfg_.layers;
      float* next_ln = last ? lnf_ : layers_[l + 1].ln1;
      float* next_mean = last ? lnf_mean_ : layers_[l + 1].ln1_mean;
      float* next_rstd = last ? lnf_rstd_ : layers_[l + 1].ln1_rstd;
      const float* next_w = param(last ? offsets_.lnf_w : offsets_.layers[l + 1].ln1_w);
      const float* next_b = param(last ? offsets_.lnf_b : offsets_.layers[l + 1].ln1_b);
      residual_layernorm_forward(resid_[l + 1], next_ln, next_mean, next_rstd, a.mid, branch_, param(o.fc_proj_b),
                                 next_w, next_b, N, C, eps, stream_);
    }
    logits_forward(batch);
  }

  void loss_and_backward(const std::uint8_t* inputs, const std::uint8_t* targets) override {
    const int C = cfg_.channels, V = cfg_.vocab;
    const AttentionShape shape = attention_shape(cfg_.batch);
    fused_cross_entropy(losses_, d_logits_, logits_, targets, N_, V, stream_);
    mean_loss(loss_, loss_history_, kLossHistory, &counters_[0], losses_, N_, stream_);
    // Each LayerNorm's backward also sums its dx, the residual stream's gradient, over the rows: the bias
    // gradient of the projection below (the top block's fc_proj here, attn_proj after LN2, the lower
    // block's fc_proj after LN1), out of the same pass.
    head_backward(grad(offsets_.layers[cfg_.layers - 1].fc_proj_b));
    for (int l = cfg_.layers - 1; l >= 0; --l) {
      const LayerOffsets& o = offsets_.layers[l];
      const LayerActivations& a = layers_[l];
      mlp_backward_to_ln2_fused(l);
      // beta 1: the LayerNorm's input gradient lands on the residual stream's directly.
      layernorm_backward(d_resid_, grad(o.ln2_w), grad(o.ln2_b), d_ln_, a.mid, a.ln2_mean, a.ln2_rstd,
                         param(o.ln2_w), N_, C, 1.0f, partials_, stream_, nullptr, grad(o.attn_proj_b));
      linear_grads(d_attn_out_, grad(o.attn_proj_w), d_resid_, a.attn_out, param(o.attn_proj_w), C, C);
      fused_attention_backward(d_qkv_, delta_, d_attn_out_, a.attn_out, lse_[l], a.qkv, param(o.qkv_b), rope_,
                               shape, stream_);
      column_sum_vec4(grad(o.qkv_b), d_qkv_, N_, 3 * C, partials_, stream_);
      linear_grads(d_ln_, grad(o.qkv_w), d_qkv_, a.ln1, param(o.qkv_w), C, 3 * C);
      layernorm_backward(d_resid_, grad(o.ln1_w), grad(o.ln1_b), d_ln_, resid_[l], a.ln1_mean, a.ln1_rstd,
                         param(o.ln1_w), N_, C, 1.0f, partials_, stream_, nullptr,
                         l > 0 ? grad(offsets_.layers[l - 1].fc_proj_b) : nullptr);
    }
    embedding_backward(cublas_.get(), grad(offsets_.wte), d_resid_, inputs, onehot_, N_, C, V, stream_);
  }

  // One launch for every parameter: the flat layout makes the multi-tensor optimiser a plain loop.
  void optimizer_step() override {
    adamw(params_, grads_, adam_m_, adam_v_, offsets_.total, opt_, &counters_[0], stream_);
  }

 private:
  // Trainer::mlp_backward_to_ln2 with fc_proj's bias gradient already summed by the LayerNorm backward above
  // and GELU's backward fused with fc's bias gradient (one pass over d_gelu and fc instead of two over d_fc).
  void mlp_backward_to_ln2_fused(int layer) {
    const LayerOffsets& o = offsets_.layers[layer];
    const LayerActivations& a = layers_[layer];
    const int C = cfg_.channels, H = cfg_.hidden();
    linear_grads(d_gelu_, grad(o.fc_proj_w), d_resid_, a.gelu, param(o.fc_proj_w), H, C);
    gelu_backward_bias_grad(d_fc_, grad(o.fc_b), d_gelu_, a.fc, N_, H, partials_, stream_);
    linear_grads(d_ln_, grad(o.fc_w), d_fc_, a.ln2, param(o.fc_w), C, H);
  }

  std::vector<float*> lse_;  // per layer [B, heads, T]: the forward's softmax statistics
  float* delta_;             // [B, heads, T] scratch of the attention backward
};

}  // namespace

std::unique_ptr<Trainer> make_fused_trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream,
                                            DeviceCorpus corpus, std::uint64_t data_seed, std::uint64_t init_seed,
                                            StepReplay replay) {
  auto trainer = std::make_unique<FusedTrainer>(cfg, alloc, stream, corpus, data_seed);
  trainer->start(init_seed, replay);
  return trainer;
}

}  // namespace roofbench::gpt::cuda
