// R0, eager: what PyTorch eager runs for this model. One launch per operation: every linear layer is one
// cuBLASLt call with its bias in the epilogue (nn.Linear's addmm does that; PyTorch eager's profile of
// this step on the H200 has no broadcast bias add among its 575 launches, its 96 broadcast products a step
// being RoPE's), residual adds and GELU are their own kernels, the heads are split into [B, heads, T, hd]
// copies, attention materialises its T x T scores between batched cuBLAS matmuls, the loss is
// log_softmax + nll, and AdamW runs once per parameter tensor.
// Where it still differs from PyTorch eager (that profile: 10.36 ms of kernels a step against R0's 8.85):
// PyTorch's scaled_dot_product_attention is one fused kernel each way (the memory-efficient one, 1.21 ms
// a step) on strided views, where R0's head copies alone take 1.42 ms; its RoPE runs as many small
// elementwise kernels (those 96 products among them) where R0 runs one per tensor; and its AdamW runs
// foreach (a few launches over every tensor, 0.53 ms a step) against R0's 75 (0.42 ms).
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
    const std::size_t scores = static_cast<std::size_t>(cfg_.batch) * cfg_.heads * cfg_.context * cfg_.context;
    for (int l = 0; l < cfg_.layers; ++l) {
      HeadTensors h{};
      h.q = alloc_floats(N * C, BufferRole::output);
      h.k = alloc_floats(N * C, BufferRole::output);
      h.v = alloc_floats(N * C, BufferRole::output);
      h.probs = alloc_floats(scores, BufferRole::output);
      heads_.push_back(h);
    }
    scores_ = alloc_floats(scores, BufferRole::output);
    heads_scratch_ = alloc_floats(N * C, BufferRole::output);
    d_q_ = alloc_floats(N * C, BufferRole::output);
    d_k_ = alloc_floats(N * C, BufferRole::output);
    d_v_ = alloc_floats(N * C, BufferRole::output);
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
  struct HeadTensors {
    float* q;      // [B, heads, T, hd], rotated
    float* k;      // [B, heads, T, hd], rotated
    float* v;      // [B, heads, T, hd]
    float* probs;  // [B, heads, T, T]
  };

  float scale() const { return 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim())); }

  // The per-head matmuls of one layer: [T, *] blocks, one per (sequence, head), batched.
  RowMajorGemm per_head(int batch, bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                        const float* B, int ldb, float* out, int ldc) const {
    RowMajorGemm g;
    g.trans_a = trans_a, g.trans_b = trans_b;
    g.M = M, g.N = N, g.K = K;
    g.A = A, g.lda = lda, g.stride_a = (trans_a ? K : M) * static_cast<long long>(lda);
    g.B = B, g.ldb = ldb, g.stride_b = (trans_b ? N : K) * static_cast<long long>(ldb);
    g.C = out, g.ldc = ldc, g.stride_c = static_cast<long long>(M) * ldc;
    g.batch = batch * cfg_.heads;
    return g;
  }

  void attention_forward(int l, int batch) {
    const AttentionShape s = attention_shape(batch);
    const int T = cfg_.context, hd = cfg_.head_dim(), C = cfg_.channels;
    const HeadTensors& h = heads_[l];
    const LayerActivations& a = layers_[l];
    rows_to_heads(h.q, a.qkv, 3 * C, 0, s, stream_);
    rows_to_heads(h.k, a.qkv, 3 * C, C, s, stream_);
    rows_to_heads(h.v, a.qkv, 3 * C, 2 * C, s, stream_);
    rope_forward(h.q, rope_, s, stream_);
    rope_forward(h.k, rope_, s, stream_);
    gemm(cublas_.get(), per_head(batch, false, true, T, T, hd, h.q, hd, h.k, hd, scores_, T));  // q k^T
    causal_softmax_forward(h.probs, scores_, scale(), s, stream_);
    gemm(cublas_.get(), per_head(batch, false, false, T, hd, T, h.probs, T, h.v, hd, heads_scratch_, hd));  // p v
    heads_to_rows(a.attn_out, C, 0, heads_scratch_, s, stream_);
  }

  void attention_backward(int l) {
    const AttentionShape s = attention_shape(cfg_.batch);
    const int T = cfg_.context, hd = cfg_.head_dim(), C = cfg_.channels, B = cfg_.batch;
    const HeadTensors& h = heads_[l];
    float* d_out = heads_scratch_;
    float* d_scores = scores_;  // dp, then ds in place
    rows_to_heads(d_out, d_attn_out_, C, 0, s, stream_);
    gemm(cublas_.get(), per_head(B, false, true, T, T, hd, d_out, hd, h.v, hd, d_scores, T));   // dp = dout v^T
    gemm(cublas_.get(), per_head(B, true, false, T, hd, T, h.probs, T, d_out, hd, d_v_, hd));   // dv = p^T dout
    causal_softmax_backward(d_scores, d_scores, h.probs, scale(), s, stream_);
    gemm(cublas_.get(), per_head(B, false, false, T, hd, T, d_scores, T, h.k, hd, d_q_, hd));   // dq = ds k
    gemm(cublas_.get(), per_head(B, true, false, T, hd, T, d_scores, T, h.q, hd, d_k_, hd));    // dk = ds^T q
    rope_backward(d_q_, rope_, s, stream_);
    rope_backward(d_k_, rope_, s, stream_);
    heads_to_rows(d_qkv_, 3 * C, 0, d_q_, s, stream_);
    heads_to_rows(d_qkv_, 3 * C, C, d_k_, s, stream_);
    heads_to_rows(d_qkv_, 3 * C, 2 * C, d_v_, s, stream_);
  }

  std::vector<HeadTensors> heads_;
  float* scores_;
  float* heads_scratch_;
  float* d_q_;
  float* d_k_;
  float* d_v_;
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
