// What both rungs share: buffers, initialisation, the step's outline and the layers whose backward is the
// same in both (linear layers, GELU, the output head).
#include <algorithm>
#include <cmath>
#include <string>

#include "reference.hpp"
#include "roofbench/cuda.hpp"
#include "rungs.hpp"
#include "trainer.hpp"

namespace roofbench::gpt::cuda {

DeviceArena::~DeviceArena() {
  for (void* block : blocks_) cudaFree(block);  // a destructor must not throw: nothing to do on failure
}

DeviceAllocator DeviceArena::allocator() {
  return [this](std::size_t bytes, BufferRole) {
    void* block = nullptr;
    ROOFBENCH_CUDA(cudaMalloc(&block, bytes));
    blocks_.push_back(block);
    return block;
  };
}

void upload_rope_table(const Config& cfg, RopeTable table, cudaStream_t stream) {
  const std::size_t T = static_cast<std::size_t>(cfg.context), half = static_cast<std::size_t>(cfg.head_dim() / 2);
  // RoPE's angles in double, once, exactly as the reference computes them.
  std::vector<float> cos_table(T * half), sin_table(T * half);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(t) * std::pow(cfg.rope_base, -2.0 * static_cast<double>(i) / cfg.head_dim());
      cos_table[t * half + i] = static_cast<float>(std::cos(angle));
      sin_table[t * half + i] = static_cast<float>(std::sin(angle));
    }
  ROOFBENCH_CUDA(cudaMemcpyAsync(const_cast<float*>(table.cos), cos_table.data(), cos_table.size() * sizeof(float),
                                 cudaMemcpyHostToDevice, stream));
  ROOFBENCH_CUDA(cudaMemcpyAsync(const_cast<float*>(table.sin), sin_table.data(), sin_table.size() * sizeof(float),
                                 cudaMemcpyHostToDevice, stream));
  const std::vector<float> lane_ordered =
      table.lane_ordered != nullptr ? rope_lane_ordered(cos_table, sin_table, cfg.head_dim()) : std::vector<float>{};
  if (!lane_ordered.empty())
    ROOFBENCH_CUDA(cudaMemcpyAsync(const_cast<float*>(table.lane_ordered), lane_ordered.data(),
                                   lane_ordered.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  ROOFBENCH_CUDA(cudaStreamSynchronize(stream));  // the host tables go out of scope
}

const char* to_string(Rung rung) {
  switch (rung) {
    case Rung::eager:
      return "eager";
    case Rung::fused:
      return "fused";
    case Rung::bf16:
      return "bf16";
    case Rung::bf16_checkpoint:
      return "bf16_checkpoint";
  }
  return "unknown";
}

namespace {
// cuBLAS's recommended workspace on Hopper; handing it over up front means no call, captured ones
// included, ever allocates.
constexpr std::size_t kCublasWorkspaceBytes = 32u << 20;
constexpr std::uint64_t kGateStreamSalt = 0x6761746562617463ull;  // "gatebatc": gate batches differ from training's
}  // namespace

float* Trainer::alloc_floats(std::size_t count, BufferRole role) {
  return static_cast<float*>(alloc_bytes_(count * sizeof(float), role));
}

Trainer::Trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream, DeviceCorpus corpus,
                 std::uint64_t data_seed, ActivationStorage storage)
    : cfg_(cfg),
      offsets_(parameter_offsets(cfg)),
      stream_(stream),
      corpus_(corpus),
      data_seed_(data_seed),
      N_(cfg.batch * cfg.context),
      alloc_bytes_(alloc) {
  cfg_.validate();
  if (corpus_.count <= static_cast<std::size_t>(cfg_.context))
    throw Error("gpt: the corpus holds " + std::to_string(corpus_.count) + " tokens, fewer than one window of " +
                std::to_string(cfg_.context + 1));
  const std::size_t P = offsets_.total, N = static_cast<std::size_t>(N_);
  const std::size_t C = static_cast<std::size_t>(cfg_.channels), V = static_cast<std::size_t>(cfg_.vocab);
  const std::size_t H = static_cast<std::size_t>(cfg_.hidden()), T = static_cast<std::size_t>(cfg_.context);
  const std::size_t half = static_cast<std::size_t>(cfg_.head_dim() / 2);

  ROOFBENCH_CUBLAS(cublasCreate(cublas_.replace()));
  ROOFBENCH_CUBLASLT(cublasLtCreate(cublas_lt_.replace()));
  cublas_workspace_ = alloc(kCublasWorkspaceBytes, BufferRole::scratch);
  bind_stream(stream_);

  // Parameters, Adam moments, counters and tables are state the step reads first: inputs. Everything
  // the step writes before reading is an output, so the host's poisoning checks that claim.
  params_ = alloc_floats(P, BufferRole::input);
  adam_m_ = alloc_floats(P, BufferRole::input);
  adam_v_ = alloc_floats(P, BufferRole::input);
  grads_ = alloc_floats(P, BufferRole::output);
  counters_ = static_cast<unsigned long long*>(alloc(2 * sizeof(unsigned long long), BufferRole::input));
  loss_ = alloc_floats(1, BufferRole::output);
  loss_history_ = alloc_floats(kLossHistory, BufferRole::output);
  float* rope_cos = alloc_floats(T * half, BufferRole::input);
  float* rope_sin = alloc_floats(T * half, BufferRole::input);
  // The bf16 keeper's sm_90a backward reads the lane-ordered copy (layers.hpp's RopeTable).
  float* rope_by_lane = half == kRopeLaneOrderedPairs ? alloc_floats(2 * T * half, BufferRole::input) : nullptr;
  rope_ = RopeTable{rope_cos, rope_sin, rope_by_lane};
  inputs_ = static_cast<std::uint8_t*>(alloc(N, BufferRole::output));
  targets_ = static_cast<std::uint8_t*>(alloc(N, BufferRole::output));

  auto activation = [&](std::size_t width) { return alloc_floats(N * width, BufferRole::output); };
  // What every rung keeps in fp32: the residual stream and its gradient, LayerNorm statistics, the
  // logits, the losses and the embedding's one-hot operand.
  for (int l = 0; l <= cfg_.layers; ++l) resid_.push_back(activation(C));
  lnf_mean_ = activation(1);
  lnf_rstd_ = activation(1);
  logits_ = activation(V);
  losses_ = activation(1);
  d_resid_ = activation(C);
  onehot_ = activation(V);
  const std::size_t widest = std::max({2 * C, 3 * C, H});
  partials_ = alloc_floats(std::max({column_partials_floats(N_, static_cast<int>(widest)),
                                     layernorm_partials_floats(N_, static_cast<int>(C)),
                                     fc_gelu_backward_partials_floats(N_, static_cast<int>(H)),
                                     attention_bias_partials_floats(attention_shape(cfg_.batch))}),
                           BufferRole::scratch);
  upload_rope_table(cfg_, rope_, stream_);
  if (storage == ActivationStorage::bf16) return;  // the bf16 rungs allocate their own activations

  for (int l = 0; l < cfg_.layers; ++l) {
    LayerActivations a{};
    a.ln1 = activation(C);
    a.ln1_mean = activation(1);
    a.ln1_rstd = activation(1);
    a.qkv = activation(3 * C);
    a.attn_out = activation(C);
    a.mid = activation(C);
    a.ln2 = activation(C);
    a.ln2_mean = activation(1);
    a.ln2_rstd = activation(1);
    a.fc = activation(H);
    a.gelu = activation(H);
    layers_.push_back(a);
  }
  lnf_ = activation(C);
  d_logits_ = activation(V);
  d_fc_ = activation(H);
  // Scratch whose lives never overlap shares memory, by the order every rung's step keeps (the bf16 rungs'
  // buffers share the same way). branch (a linear layer's output before its residual add) lives in the
  // forward. A block's backward: fc_proj's dgrad writes d_gelu, GELU's backward reads it and writes d_fc,
  // fc's dgrad writes d_ln, LN2's backward reads it, attn_proj's dgrad writes d_attn_out, the attention's
  // backward reads it and writes d_qkv, qkv's dgrad reads that and writes d_ln, LN1's backward reads it.
  // So [N, C] holds branch, d_ln and d_attn_out, and [N, 4C] d_gelu and d_qkv ([N, 3C]: the hidden width is
  // 4C by the model's definition, model.hpp).
  d_ln_ = activation(C);
  d_attn_out_ = d_ln_;
  branch_ = d_ln_;
  d_gelu_ = activation(H);
  d_qkv_ = d_gelu_;
}

Trainer::~Trainer() {
  if (graph_) cudaGraphExecDestroy(graph_);  // a destructor must not throw
}

LtContext Trainer::lt_context() const {
  return LtContext{cublas_lt_.get(), LtWorkspace{cublas_workspace_, kCublasWorkspaceBytes}, stream_, &lt_choices_};
}

// The recording happens on a stream of our own: the caller's may be the legacy default stream, which cannot
// be captured; the graph is then launched on the caller's stream all the same.
void Trainer::capture_step_graph() {
  const cudaStream_t launch_stream = stream_;
  cudaStream_t capture_stream = nullptr;
  ROOFBENCH_CUDA(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaError_t status = cudaSuccess;
  try {
    bind_stream(capture_stream);
    ROOFBENCH_CUDA(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_step();
    } catch (...) {
      cudaStreamEndCapture(capture_stream, &graph);  // leave the stream usable; report the first error
      throw;
    }
    ROOFBENCH_CUDA(cudaStreamEndCapture(capture_stream, &graph));
    status = cudaGraphInstantiate(&graph_, graph, 0);
  } catch (...) {
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(capture_stream);
    bind_stream(launch_stream);
    throw;
  }
  cudaGraphDestroy(graph);
  cudaStreamDestroy(capture_stream);
  bind_stream(launch_stream);
  ROOFBENCH_CUDA(status);
}

void Trainer::start(std::uint64_t init_seed, StepReplay replay) {
  initialize(init_seed);
  // One step first: it loads the kernels and times cuBLASLt's candidates here (that timing synchronises,
  // so it may run neither inside a capture nor in the host's first timed run, behind its stream hold).
  enqueue_step();
  ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
  if (replay == StepReplay::graph) capture_step_graph();
  initialize(init_seed);
}

void Trainer::bind_stream(cudaStream_t stream) {
  stream_ = stream;
  ROOFBENCH_CUBLAS(cublasSetStream(cublas_.get(), stream_));
  // cublasSetStream drops a user workspace back to cuBLAS's own pool: hand ours over again every time.
  ROOFBENCH_CUBLAS(cublasSetWorkspace(cublas_.get(), cublas_workspace_, kCublasWorkspaceBytes));
}

void Trainer::initialize(std::uint64_t seed) {
  const std::vector<double> init = reference::init_parameters(cfg_, seed);
  const std::vector<float> rounded(init.begin(), init.end());
  const std::size_t bytes = rounded.size() * sizeof(float);
  ROOFBENCH_CUDA(cudaMemcpyAsync(params_, rounded.data(), bytes, cudaMemcpyHostToDevice, stream_));
  ROOFBENCH_CUDA(cudaMemsetAsync(adam_m_, 0, bytes, stream_));
  ROOFBENCH_CUDA(cudaMemsetAsync(adam_v_, 0, bytes, stream_));
  ROOFBENCH_CUDA(cudaMemsetAsync(counters_, 0, 2 * sizeof(unsigned long long), stream_));
  ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
}

void Trainer::enqueue_step() {
  draw_batch(inputs_, targets_, corpus_.tokens, corpus_.count, cfg_.batch, cfg_.context, data_seed_, &counters_[0],
             stream_);
  forward_pass(inputs_, cfg_.batch);
  loss_and_backward(inputs_, targets_);
  if (hooks_.backward_done) hooks_.backward_done();
  optimizer_step();
}

void Trainer::train_step(bool enqueued) {
  if (graph_ && !enqueued)
    ROOFBENCH_CUDA(cudaGraphLaunch(graph_, stream_));
  else
    enqueue_step();
}

void Trainer::compute_gradients(const std::uint8_t* inputs, const std::uint8_t* targets) {
  forward_pass(inputs, cfg_.batch);
  loss_and_backward(inputs, targets);
  if (hooks_.backward_done) hooks_.backward_done();
}

void Trainer::forward(const std::uint8_t* inputs, int batch) {
  if (batch < 1 || batch > cfg_.batch)
    throw Error("gpt: forward on " + std::to_string(batch) + " sequences; buffers hold " +
                std::to_string(cfg_.batch));
  forward_pass(inputs, batch);
}

void Trainer::draw_gate_batch(std::uint8_t* inputs, std::uint8_t* targets, int batch) {
  draw_batch(inputs, targets, corpus_.tokens, corpus_.count, batch, cfg_.context, data_seed_ ^ kGateStreamSalt,
             &counters_[1], stream_);
}

AttentionShape Trainer::attention_shape(int batch) const {
  return AttentionShape{batch, cfg_.context, cfg_.heads, cfg_.head_dim()};
}

void Trainer::logits_forward(int batch) {
  linear_forward(cublas_.get(), logits_, lnf_, param(offsets_.wte), positions(batch), cfg_.channels, cfg_.vocab);
}

void Trainer::head_backward(float* top_bias_grad) {
  const int C = cfg_.channels;
  // wte's gradient starts here (beta 0); the embedding's backward adds its share last.
  linear_backward(cublas_.get(), d_ln_, grad(offsets_.wte), d_logits_, lnf_, param(offsets_.wte), N_, C, cfg_.vocab);
  layernorm_backward(d_resid_, grad(offsets_.lnf_w), grad(offsets_.lnf_b), d_ln_, resid_[cfg_.layers], lnf_mean_,
                     lnf_rstd_, param(offsets_.lnf_w), N_, C, 0.0f, partials_, stream_, nullptr, top_bias_grad);
}

void Trainer::set_wgrad_layout(WgradLayout layout) {
  const int C = cfg_.channels, H = cfg_.hidden();
  // The largest operand the layout transposes in the blocks' four linear layers: qkv, attn_proj, fc, fc_proj.
  const std::size_t floats =
      std::max({wgrad_scratch_floats(layout, N_, C, 3 * C), wgrad_scratch_floats(layout, N_, C, C),
                wgrad_scratch_floats(layout, N_, C, H), wgrad_scratch_floats(layout, N_, H, C)});
  wgrad_ = layout;
  wgrad_scratch_ = floats > 0 ? alloc_floats(floats, BufferRole::scratch) : nullptr;
}

void Trainer::linear_grads(float* dx, float* dw, const float* dy, const float* x, const float* w, int in, int out) {
  linear_backward_kmajor(cublas_.get(), dx, dw, dy, x, w, N_, in, out, wgrad_, wgrad_scratch_);
}

void Trainer::mlp_backward_to_ln2(int layer) {
  const LayerOffsets& o = offsets_.layers[layer];
  const LayerActivations& a = layers_[layer];
  const int C = cfg_.channels, H = cfg_.hidden();
  column_sum(grad(o.fc_proj_b), d_resid_, N_, C, partials_, stream_);
  linear_grads(d_gelu_, grad(o.fc_proj_w), d_resid_, a.gelu, param(o.fc_proj_w), H, C);
  gelu_backward(d_fc_, d_gelu_, a.fc, static_cast<std::size_t>(N_) * H, stream_);
  column_sum(grad(o.fc_b), d_fc_, N_, H, partials_, stream_);
  linear_grads(d_ln_, grad(o.fc_w), d_fc_, a.ln2, param(o.fc_w), C, H);
}

void Trainer::attn_proj_backward(int layer) {
  const LayerOffsets& o = offsets_.layers[layer];
  const int C = cfg_.channels;
  column_sum(grad(o.attn_proj_b), d_resid_, N_, C, partials_, stream_);
  linear_grads(d_attn_out_, grad(o.attn_proj_w), d_resid_, layers_[layer].attn_out, param(o.attn_proj_w), C, C);
}

void Trainer::qkv_backward(int layer) {
  const LayerOffsets& o = offsets_.layers[layer];
  const int C = cfg_.channels;
  column_sum(grad(o.qkv_b), d_qkv_, N_, 3 * C, partials_, stream_);
  linear_grads(d_ln_, grad(o.qkv_w), d_qkv_, layers_[layer].ln1, param(o.qkv_w), C, 3 * C);
}

std::unique_ptr<Trainer> make_trainer(Rung rung, const Config& cfg, const DeviceAllocator& alloc,
                                      cudaStream_t stream, DeviceCorpus corpus, std::uint64_t data_seed,
                                      std::uint64_t init_seed, StepReplay replay) {
  if (rung == Rung::fused) return make_fused_trainer(cfg, alloc, stream, corpus, data_seed, init_seed, replay);
  if (rung == Rung::bf16 || rung == Rung::bf16_checkpoint)
    return make_bf16_trainer(cfg, alloc, stream, corpus, data_seed, init_seed, rung == Rung::bf16_checkpoint,
                             replay);
  auto trainer = make_eager_trainer(cfg, alloc, stream, corpus, data_seed);
  trainer->start(init_seed, StepReplay::enqueued);  // R0 always enqueues its step
  return trainer;
}

}  // namespace roofbench::gpt::cuda
