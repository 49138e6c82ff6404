// The GPT trained on the GPU, one training step at a time, in two rungs of the "gpt" ladder:
//   R0 eager: one kernel or cuBLAS call per operation, attention with its T x T scores in memory, AdamW
//             launched once per parameter tensor: what PyTorch eager runs.
//   R1 fused: the fusions a compiler makes (bias + GELU, residual + LayerNorm, softmax + cross-entropy +
//             its gradient, attention in shared memory, one AdamW launch over the flat parameters) and the
//             whole step, batch draw included, captured once into a CUDA graph and replayed.
// Both keep parameters, gradients and Adam moments in fp32 (flat, model.hpp's layout) and run their
// matmuls on TF32 tensor cores.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "layers.hpp"
#include "model.hpp"
#include "roofbench/case_support/cublas_handles.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda {

// Where a trainer's device memory comes from: the benchmark hands out ctx.alloc (so the host's
// high-water mark covers the whole step), tests and gate-only trainers a DeviceArena.
using DeviceAllocator = std::function<void*(std::size_t bytes, BufferRole role)>;

// cudaMalloc'd blocks freed together when the arena goes.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena();
  DeviceAllocator allocator();

 private:
  std::vector<void*> blocks_;
};

// RoPE's cos/sin tables of cfg ([T, head_dim / 2] each) computed in double on the host and copied into
// `table`'s device buffers, and their lane-ordered copy where table.lane_ordered is given; synchronous on `stream`.
void upload_rope_table(const Config& cfg, RopeTable table, cudaStream_t stream);

// eager: R0; fused: R1; bf16: R2 and R3 (R1 with autocast's bf16); bf16_checkpoint: R4 (bf16 with each
// block's activations recomputed in the backward).
enum class Rung { eager, fused, bf16, bf16_checkpoint };
const char* to_string(Rung rung);

// How R1 and up run a step: replayed as the one CUDA graph captured at construction, or enqueued kernel by
// kernel, which is what a rung built on them needs when it hooks into the backward (R5's all-reduces).
// R0 is always enqueued.
enum class StepReplay { graph, enqueued };

// The training text on the device, staged once.
struct DeviceCorpus {
  const std::uint8_t* tokens = nullptr;
  std::size_t count = 0;
};

// Losses of the last steps stay on the device in a ring of this many (a power of two) until read.
inline constexpr int kLossHistory = 512;

class Trainer {
 public:
  virtual ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  const Config& config() const { return cfg_; }
  std::size_t parameter_count() const { return offsets_.total; }

  // A fresh start, synchronous: parameters from reference::init_parameters(cfg, seed) rounded to fp32,
  // Adam moments and the step counter zero.
  void initialize(std::uint64_t seed);

  // One training step on `stream` (no host sync, no allocation): draw a fresh batch on the device,
  // forward, backward, AdamW. Replays the step's CUDA graph once capture_step_graph() has recorded it,
  // unless `enqueued` (the same kernels launched one by one, for a profiler that counts no graph's kernels).
  void train_step(bool enqueued = false);

  // Records the step into a CUDA graph that train_step() replays from then on (R1 and up), after a step
  // has run (start's), so that every kernel is loaded and cuBLAS has picked its algorithms. The graph holds
  // buffer addresses, not values: initialize() later needs no re-capture. Synchronous; outside any capture.
  void capture_step_graph();
  // What every rung does once built: initialise from `init_seed`, run one step (on sane numbers: it loads
  // the kernels and fixes cuBLASLt's algorithms, so that neither happens inside a capture or a timed run),
  // for StepReplay::graph capture the step, and initialise again to undo that step.
  void start(std::uint64_t init_seed, StepReplay replay);

  // For gates and tests. Forward and backward on the given batch of cfg.batch sequences: loss,
  // logits and every gradient, no update. Token ids in device memory, [batch * T] each.
  void compute_gradients(const std::uint8_t* inputs, const std::uint8_t* targets);
  // Forward only on the first `batch` <= cfg.batch sequences; logits() then holds [batch * T, vocab].
  void forward(const std::uint8_t* inputs, int batch);
  // `batch` fresh windows drawn on the device from a stream of batches separate from training's.
  void draw_gate_batch(std::uint8_t* inputs, std::uint8_t* targets, int batch);

  float* params() const { return params_; }
  const float* grads() const { return grads_; }
  const float* logits() const { return logits_; }
  const float* loss() const { return loss_; }
  // The loss of training step s (counted from 1 since initialize()) is at (s - 1) % kLossHistory.
  const float* loss_history() const { return loss_history_; }
  cudaStream_t stream() const { return stream_; }
  // The cuBLASLt matmuls' algorithm choices this trainer has run (layers.hpp's LtContext), a line each: its
  // step's, and any other shape it met, such as a gate's forward at another batch.
  const std::set<std::string>& matmul_choices() const { return lt_choices_; }

  // Where a rung built on this one (R5, data parallel) learns that parts of the flat gradient are final
  // on stream(), so that it can reduce them while the rest of the backward runs. Called on the host while
  // the step is enqueued, in every backward (train_step and compute_gradients). The eager and bf16 trainers
  // call block_backward_done (the fused one does not); a step replayed as a graph calls no hook at all, so a
  // rung that hooks in builds its trainer with StepReplay::enqueued.
  struct StepHooks {
    // After block `layer`'s backward: its gradients are final, and for the top block LNf's too (the head
    // writes them first). Blocks come top down.
    std::function<void(int layer)> block_backward_done;
    // After the whole backward: wte's gradient is final too (the embedding adds its share last). In a
    // training step the optimizer comes next, so this is where it can be made to wait.
    std::function<void()> backward_done;
  };
  void set_step_hooks(StepHooks hooks) { hooks_ = std::move(hooks); }

 protected:
  // What the constructor allocates besides what every rung keeps in fp32 (parameters, optimiser state,
  // the residual stream and its gradient, statistics, logits): fp32 activations for R0 and R1 (layers_ and
  // the backward scratch), none for the bf16 rungs, which allocate their own.
  enum class ActivationStorage { fp32, bf16 };
  Trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream, DeviceCorpus corpus,
          std::uint64_t data_seed, ActivationStorage storage = ActivationStorage::fp32);

  // The rung's own parts of a step. forward_pass leaves logits for `batch` sequences; loss_and_backward
  // (after a full-batch forward_pass) computes the loss and every gradient; optimizer_step updates.
  virtual void forward_pass(const std::uint8_t* inputs, int batch) = 0;
  virtual void loss_and_backward(const std::uint8_t* inputs, const std::uint8_t* targets) = 0;
  virtual void optimizer_step() = 0;
  // The eager step, also what R1 captures.
  void enqueue_step();
  // Points every later launch (kernels and cuBLAS) at `stream`.
  void bind_stream(cudaStream_t stream);

  // ---- Shared pieces: the same operation in both rungs runs the same code. ----
  float* alloc_floats(std::size_t count, BufferRole role);
  const float* param(std::size_t offset) const { return params_ + offset; }
  float* grad(std::size_t offset) { return grads_ + offset; }
  int positions(int batch) const { return batch * cfg_.context; }
  // cuBLAS's workspace, lent to the cuBLASLt calls on the same stream.
  LtContext lt_context() const;  // cuBLASLt on stream_ with cuBLAS's workspace
  AttentionShape attention_shape(int batch) const;
  // logits = LNf(x) wte^T on the final residual stream, after the LNf forward.
  void logits_forward(int batch);
  // From dlogits to the residual stream's gradient at the top (d_resid_), and wte's output-side gradient.
  // top_bias_grad, when given, receives the column sums of d_resid_ (the top block's fc_proj bias gradient)
  // out of LNf's backward pass.
  void head_backward(float* top_bias_grad = nullptr);
  // Picks how the blocks' weight gradients reach cuBLAS (layers.hpp's WgradLayout; v1 unless a rung calls
  // this, as R1 does) and allocates the scratch the layout needs. Constructor only: it allocates.
  void set_wgrad_layout(WgradLayout layout);
  // A block's linear layer backward over the full batch (N_ rows): dx as linear_backward, dw in the layout.
  void linear_grads(float* dx, float* dw, const float* dy, const float* x, const float* w, int in, int out);
  // The MLP half's backward down to the gradient of LN2's output (d_ln_): fc_proj, GELU, fc.
  void mlp_backward_to_ln2(int layer);
  // The attention output projection's backward: d_attn_out_ from d_resid_.
  void attn_proj_backward(int layer);
  // From the gradient of qkv (d_qkv_) down to the gradient of LN1's output (d_ln_).
  void qkv_backward(int layer);

  Config cfg_;
  ParameterOffsets offsets_;
  AdamW opt_;
  cudaStream_t stream_;
  // Owned, so that a constructor failing half way (the batch sweep runs up to out of memory) gives them back.
  case_support::CublasHandle cublas_;
  case_support::CublasLtHandle cublas_lt_;  // the cuBLASLt matmuls (the bias epilogue, R2 and up's linears)
  mutable std::set<std::string> lt_choices_;  // what lt_context()'s calls report
  void* cublas_workspace_ = nullptr;
  DeviceCorpus corpus_;
  std::uint64_t data_seed_;
  int N_;  // positions in a full batch
  DeviceAllocator alloc_bytes_;
  StepHooks hooks_;

  float* params_;
  float* grads_;
  float* adam_m_;
  float* adam_v_;
  // [0]: training batches drawn = the AdamW step; [1]: gate batches drawn.
  unsigned long long* counters_;
  float* loss_;
  float* loss_history_;
  RopeTable rope_;
  std::uint8_t* inputs_;
  std::uint8_t* targets_;

  // Activations the backward reads, per layer; resid_[l] enters block l, resid_[L] leaves the last.
  struct LayerActivations {
    float* ln1;  // LN1 output [N, C]
    float* ln1_mean;
    float* ln1_rstd;
    float* qkv;       // [N, 3C]: eager: bias added, q and k rotated in place by its attention; fused: raw
                      // (the attention kernels add bias and RoPE)
    float* attn_out;  // [N, C]
    float* mid;       // residual stream after the attention half [N, C]
    float* ln2;
    float* ln2_mean;
    float* ln2_rstd;
    float* fc;    // [N, 4C] pre-activation, bias added
    float* gelu;  // [N, 4C]
  };
  // fp32 only (ActivationStorage::fp32; null for the bf16 rungs):
  std::vector<LayerActivations> layers_;
  float* lnf_ = nullptr;
  // branch_ and d_attn_out_ share d_ln_'s memory, d_qkv_ d_gelu_'s: their lives never overlap (trainer.cu).
  float* branch_ = nullptr;  // [N, C] a linear layer's output before its residual add
  float* d_logits_ = nullptr;
  float* d_attn_out_ = nullptr;
  float* d_qkv_ = nullptr;
  float* d_fc_ = nullptr;
  float* d_gelu_ = nullptr;
  float* d_ln_ = nullptr;  // gradient of a LayerNorm's output (the bf16 rungs keep theirs in bf16)
  // Every rung:
  std::vector<float*> resid_;  // L + 1 of them
  float* lnf_mean_;
  float* lnf_rstd_;
  float* logits_;
  float* losses_;   // [N]
  // Backward scratch, reused by every layer.
  float* d_resid_;  // the residual stream's gradient, carried down through the blocks
  float* partials_;
  float* onehot_;

 private:
  cudaGraphExec_t graph_ = nullptr;
  WgradLayout wgrad_ = WgradLayout::v1;
  float* wgrad_scratch_ = nullptr;  // the transposed operand of the weight gradient in flight (v2, v3)
};

// A trainer of any rung for `cfg` (cfg.batch sequences per step). Parameters are initialised with
// `init_seed`; batches are drawn from `corpus` with `data_seed`.
std::unique_ptr<Trainer> make_trainer(Rung rung, const Config& cfg, const DeviceAllocator& alloc,
                                      cudaStream_t stream, DeviceCorpus corpus, std::uint64_t data_seed,
                                      std::uint64_t init_seed, StepReplay replay = StepReplay::graph);

}  // namespace roofbench::gpt::cuda
