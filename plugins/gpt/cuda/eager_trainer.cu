// R0, eager: what PyTorch eager runs for this model. One launch per operation: every linear layer is one
// cuBLASLt call with its bias in the epilogue (nn.Linear's addmm does that; PyTorch eager's profile of
// this step on the H200 has no broadcast bias add among its 575 launches, its 96 broadcast products a step
// being RoPE's), residual adds and GELU are their own kernels, attention materialises its T x T scores
// between batched cuBLAS matmuls, the loss is log_softmax + nll, and AdamW runs once per parameter tensor.
// The heads stay where they lie in qkv's rows, as PyTorch's view(B, T, heads, hd).transpose(1, 2) leaves
// them: the per-head matmuls take one pointer per (sequence, head) (cublasGemmBatchedEx), RoPE rotates q
// and k in place, and the products write their outputs straight into the rows of attn_out and d_qkv, with
// no copy of the heads into [B, heads, T, hd] and back (eight copies a layer, 1.41 ms of a 9.48 ms step).
// Where it still differs from PyTorch eager (that profile: 10.36 ms of kernels a step): PyTorch's scaled_dot_product_attention is one fused kernel each way (the memory-efficient one,
// 1.21 ms a step) where R0 materialises the scores; its RoPE runs as many small elementwise kernels (those
// 96 products among them) where R0 runs one a direction for q and k together; and its AdamW runs foreach (a
// few launches over every tensor, 0.53 ms a step) against R0's 75 (0.42 ms).
#include <cmath>
#include <utility>
#include <vector>

#include "rungs.hpp"

namespace roofbench::gpt::cuda {
namespace {

class EagerTrainer final : public Trainer {
 public:
  EagerTrainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream, DeviceCorpus corpus,
               std::uint64_t data_seed)
      : Trainer(cfg, alloc, stream, corpus, data_seed) {
    const std::size_t N = static_cast<std::size_t>(N_), C = static_cast<std::size_t>(cfg_.channels);
    const std::size_t block = static_cast<std::size_t>(cfg_.context) * cfg_.context;
    const std::size_t scores = static_cast<std::size_t>(cfg_.batch) * cfg_.heads * block;
    scores_ = alloc_floats(scores, BufferRole::output);
    // Head h of sequence b: in rows of ld floats at row b * T, channel h * hd; in the scores, block b * heads + h.
    const std::size_t T = static_cast<std::size_t>(cfg_.context), hd = static_cast<std::size_t>(cfg_.head_dim());
    const auto in_rows = [&](const float* rows, std::size_t ld) { return head_pointers(rows, T * ld, hd); };
    const auto in_blocks = [&](const float* blocks) { return head_pointers(blocks, cfg_.heads * block, block); };
    for (int l = 0; l < cfg_.layers; ++l) {
      const LayerActivations& a = layers_[l];
      LayerHeads h{};
      h.probs = alloc_floats(scores, BufferRole::output);
      h.q = in_rows(a.qkv, 3 * C);
      h.k = in_rows(a.qkv + C, 3 * C);
      h.v = in_rows(a.qkv + 2 * C, 3 * C);
      h.out = in_rows(a.attn_out, C);
      h.probs_blocks = in_blocks(h.probs);
      heads_.push_back(h);
    }
    scores_blocks_ = in_blocks(scores_);
    d_out_ = in_rows(d_attn_out_, C);
    d_q_ = in_rows(d_qkv_, 3 * C);
    d_k_ = in_rows(d_qkv_ + C, 3 * C);
    d_v_ = in_rows(d_qkv_ + 2 * C, 3 * C);
    d_ln_input_ = alloc_floats(N * C, BufferRole::output);
    logprobs_ = alloc_floats(N * static_cast<std::size_t>(cfg_.vocab), BufferRole::output);
    for (const TensorSlot& slot : layout(cfg_)) slots_.push_back({slot.offset, slot.count});
  }

 protected:
  void forward_pass(const std::uint8_t* inputs, int batch) override {
    const int N = positions(batch), C = cfg_.channels, H = cfg_.hidden();
    const float eps = static_cast<float>(cfg_.ln_eps);
    embedding_forward(resid_[0], inputs, param(offsets_.wte), N, C, stream_);
    for (int l = 0; l < cfg_.layers; ++l) {
      const LayerOffsets& o = offsets_.layers[l];
      const LayerActivations& a = layers_[l];
      layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, resid_[l], param(o.ln1_w), param(o.ln1_b), N, C, eps, stream_);
      linear_forward_bias(lt_context(), CUDA_R_32F, a.qkv, a.ln1, param(o.qkv_w), param(o.qkv_b), N, C, 3 * C);
      attention_forward(l, batch);
      linear_forward_bias(lt_context(), CUDA_R_32F, branch_, a.attn_out, param(o.attn_proj_w), param(o.attn_proj_b), N,
                          C, C);
      add(a.mid, resid_[l], branch_, static_cast<std::size_t>(N) * C, stream_);
      layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.mid, param(o.ln2_w), param(o.ln2_b), N, C, eps, stream_);
      linear_forward_bias(lt_context(), CUDA_R_32F, a.fc, a.ln2, param(o.fc_w), param(o.fc_b), N, C, H);
      gelu_forward(a.gelu, a.fc, static_cast<std::size_t>(N) * H, stream_);
      linear_forward_bias(lt_context(), CUDA_R_32F, branch_, a.gelu, param(o.fc_proj_w), param(o.fc_proj_b), N, H, C);
      add(resid_[l + 1], a.mid, branch_, static_cast<std::size_t>(N) * C, stream_);
    }
    layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, resid_[cfg_.layers], param(offsets_.lnf_w),
                      param(offsets_.lnf_b), N, C, eps, stream_);
    logits_forward(batch);
  }

  void loss_and_backward(const std::uint8_t* inputs, const std::uint8_t* targets) override {
    const int C = cfg_.channels, V = cfg_.vocab;
    const std::size_t resid_elements = static_cast<std::size_t>(N_) * C;
    log_softmax_forward(logprobs_, logits_, N_, V, stream_);
    nll_forward(losses_, logprobs_, targets, N_, V, stream_);
    mean_loss(loss_, loss_history_, kLossHistory, &counters_[0], losses_, N_, stream_);
    cross_entropy_backward(d_logits_, logprobs_, targets, N_, V, stream_);
    head_backward();
    for (int l = cfg_.layers - 1; l >= 0; --l) {
      const LayerOffsets& o = offsets_.layers[l];
      const LayerActivations& a = layers_[l];
      mlp_backward_to_ln2(l);
      layernorm_backward(d_ln_input_, grad(o.ln2_w), grad(o.ln2_b), d_ln_, a.mid, a.ln2_mean, a.ln2_rstd,
                         param(o.ln2_w), N_, C, 0.0f, partials_, stream_);
      add(d_resid_, d_resid_, d_ln_input_, resid_elements, stream_);
      attn_proj_backward(l);
      attention_backward(l);
      qkv_backward(l);
      layernorm_backward(d_ln_input_, grad(o.ln1_w), grad(o.ln1_b), d_ln_, resid_[l], a.ln1_mean, a.ln1_rstd,
                         param(o.ln1_w), N_, C, 0.0f, partials_, stream_);
      add(d_resid_, d_resid_, d_ln_input_, resid_elements, stream_);
      if (hooks_.block_backward_done) hooks_.block_backward_done(l);
    }
    embedding_backward(cublas_.get(), grad(offsets_.wte), d_resid_, inputs, onehot_, N_, C, V, stream_);
  }

  // torch.optim.AdamW without foreach: one launch per parameter tensor.
  void optimizer_step() override {
    for (const auto& [offset, count] : slots_)
      adamw(params_ + offset, grads_ + offset, adam_m_ + offset, adam_v_ + offset, count, opt_, &counters_[0],
            stream_);
  }

 private:
  // One device pointer per (sequence, head) of a full batch, sequence-major: what cublasGemmBatchedEx reads.
  using Pointers = void* const*;
  struct LayerHeads {
    Pointers q, k, v;     // the heads of qkv's rows [N, 3C], q and k rotated in place
    Pointers out;         // the heads of attn_out [N, C]
    float* probs;         // [B, heads, T, T]
    Pointers probs_blocks;
  };

  // base + b * sequence_stride + h * head_stride for every (sequence b, head h), on the device.
  Pointers head_pointers(const float* base, std::size_t sequence_stride, std::size_t head_stride) {
    std::vector<const float*> host;
    for (std::size_t b = 0; b < static_cast<std::size_t>(cfg_.batch); ++b)
      for (std::size_t h = 0; h < static_cast<std::size_t>(cfg_.heads); ++h)
        host.push_back(base + b * sequence_stride + h * head_stride);
    const std::size_t bytes = host.size() * sizeof(void*);
    void* device = alloc_bytes_(bytes, BufferRole::input);
    ROOFBENCH_CUDA(cudaMemcpyAsync(device, host.data(), bytes, cudaMemcpyHostToDevice, stream_));
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));  // `host` goes out of scope
    return static_cast<Pointers>(device);
  }

  float scale() const { return 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim())); }

  // One per-head product of a layer: [T, *] blocks, one per (sequence, head), batched over the first
  // `batch` sequences.
  void per_head(int batch, bool trans_a, bool trans_b, int M, int N, int K, Pointers A, int lda, Pointers B, int ldb,
                Pointers out, int ldc) const {
    RowMajorGemm g;
    g.trans_a = trans_a, g.trans_b = trans_b;
    g.M = M, g.N = N, g.K = K;
    g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    g.batch = batch * cfg_.heads;
    gemm(cublas_.get(), g, BatchPointers{A, B, out});
  }

  void attention_forward(int l, int batch) {
    const AttentionShape s = attention_shape(batch);
    const int T = cfg_.context, hd = cfg_.head_dim(), C = cfg_.channels;
    const LayerHeads& h = heads_[l];
    rope_forward(layers_[l].qkv, 3 * C, 2 * C, rope_, s, stream_);  // q and k
    per_head(batch, false, true, T, T, hd, h.q, 3 * C, h.k, 3 * C, scores_blocks_, T);  // q k^T
    causal_softmax_forward(h.probs, scores_, scale(), s, stream_);
    per_head(batch, false, false, T, hd, T, h.probs_blocks, T, h.v, 3 * C, h.out, C);  // p v
  }

  void attention_backward(int l) {
    const AttentionShape s = attention_shape(cfg_.batch);
    const int T = cfg_.context, hd = cfg_.head_dim(), C = cfg_.channels, B = cfg_.batch;
    const LayerHeads& h = heads_[l];
    float* d_scores = scores_;  // dp, then ds in place
    const Pointers d_scores_blocks = scores_blocks_;  // the same blocks, by their backward name
    per_head(B, false, true, T, T, hd, d_out_, C, h.v, 3 * C, d_scores_blocks, T);           // dp = dout v^T
    per_head(B, true, false, T, hd, T, h.probs_blocks, T, d_out_, C, d_v_, 3 * C);          // dv = p^T dout
    causal_softmax_backward(d_scores, d_scores, h.probs, scale(), s, stream_);
    per_head(B, false, false, T, hd, T, d_scores_blocks, T, h.k, 3 * C, d_q_, 3 * C);        // dq = ds k
    per_head(B, true, false, T, hd, T, d_scores_blocks, T, h.q, 3 * C, d_k_, 3 * C);         // dk = ds^T q
    rope_backward(d_qkv_, 3 * C, 2 * C, rope_, s, stream_);  // dq and dk
  }

  std::vector<LayerHeads> heads_;
  float* scores_;
  Pointers scores_blocks_;
  Pointers d_out_;            // the heads of d_attn_out_ [N, C]
  Pointers d_q_, d_k_, d_v_;  // the heads of d_qkv_ [N, 3C]
  float* d_ln_input_;  // a LayerNorm's input gradient before the residual add
  float* logprobs_;
  std::vector<std::pair<std::size_t, std::size_t>> slots_;  // (offset, count) of every parameter tensor
};

}  // namespace

std::unique_ptr<Trainer> make_eager_trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream,
                                            DeviceCorpus corpus, std::uint64_t data_seed) {
  return std::make_unique<EagerTrainer>(cfg, alloc, stream, corpus, data_seed);
}

}  // namespace roofbench::gpt::cuda
