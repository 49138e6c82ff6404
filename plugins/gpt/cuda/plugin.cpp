// The gpt plugin: one training step of the small GPT (model.hpp) per run(), in the rungs of the "gpt"
// ladder. The corpus is staged on the device once; every step draws a fresh batch there.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "activation_plan.hpp"
#include "corpus.hpp"
#include "lab_cases.hpp"
#include "model.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"
#include "trainer.hpp"
#include "training_gates.hpp"
#if defined(ROOFBENCH_GPT_WITH_NCCL)
#include "data_parallel.hpp"
#endif

namespace roofbench::gpt::cuda {
namespace {

// A rung checked against another on the same parameters and batch, logits and every gradient, each held to
// its bound.
struct Comparison {
  Rung rung;
  const char* name;  // "R0", "R1", ...
  double logits_bound, grads_bound;
};

// What a training-step case is: its trainer, and the batch where it runs the expensive gates (the comparison
// with another rung, the 300-step learning run; 0: none). Off that batch, a sweep point is gated against
// the fp64 reference only.
struct RungSpec {
  Rung rung;
  std::vector<Comparison> compare;
  int gate_batch;
};

// R1 vs R0: TF32 matmuls re-associated by fusion, not a wrong answer.
constexpr Comparison kVsEager{Rung::eager, "R0", 1e-2, 1e-2};
// bf16 vs R1: bf16 operands (8 significant bits) against TF32 ones, through six blocks and back.
constexpr Comparison kVsFused{Rung::fused, "R1", 2e-2, 5e-2};
// R4 vs R3: the same kernels on the same values (the recomputation repeats the forward bit for bit); the
// bound allows only for a library choosing another algorithm.
constexpr Comparison kVsBf16{Rung::bf16, "R3", 1e-5, 1e-5};

class GptTrainingStep final : public Case {
 public:
  GptTrainingStep(RungSpec spec, const Params& params) : rung_(spec.rung), spec_(std::move(spec)) {
    cfg_.batch = static_cast<int>(params.integer("batch"));
    cfg_.validate();
  }

  void setup(Context& ctx) override {
    const std::vector<std::uint8_t> tokens = load_training_corpus(cfg_);
    unigram_entropy_ = unigram_entropy_nats(tokens);
    auto* corpus = static_cast<std::uint8_t*>(ctx.alloc(tokens.size(), BufferRole::input));
    ctx.copy_to_device(corpus, tokens.data(), tokens.size());
    const std::size_t gate_tokens = static_cast<std::size_t>(cfg_.batch) * cfg_.context;
    gate_inputs_ = static_cast<std::uint8_t*>(ctx.alloc(gate_tokens, BufferRole::scratch));
    gate_targets_ = static_cast<std::uint8_t*>(ctx.alloc(gate_tokens, BufferRole::scratch));
    // ctx.alloc, so the host's high-water mark covers everything a step touches. The allocator is used
    // only while the trainer is built.
    const DeviceAllocator alloc = [&ctx](std::size_t bytes, BufferRole role) { return ctx.alloc(bytes, role); };
    trainer_ = make_trainer(rung_, cfg_, alloc, roofbench::cuda::stream(ctx), DeviceCorpus{corpus, tokens.size()}, ctx.seed(),
                            kInitSeed);
    corpus_ = DeviceCorpus{corpus, tokens.size()};
  }

  void run(Context& ctx) override { trainer_->train_step(ctx.counting_kernels()); }

  Work work() const override { return training_step_work(cfg_); }  // training_gates.hpp counts it

  // The model's sizes, the gate's figures, then how the rung runs.
  std::vector<Figure> figures() const override {
    std::vector<Figure> out = numbers();
    out.insert(out.end(), gate_figures_.begin(), gate_figures_.end());
    for (Figure& text : texts()) out.push_back(std::move(text));
    return out;
  }

  std::vector<Figure> numbers() const {
    std::vector<Figure> out{{"parameters", static_cast<double>(parameter_count(cfg_))}};
    if (rung_ == Rung::bf16 || rung_ == Rung::bf16_checkpoint) {
      const ActivationPlan plan{cfg_.layers, rung_ == Rung::bf16_checkpoint};
      out.push_back({"kept_activation_bytes", static_cast<double>(kept_activation_bytes(cfg_, plan))});
    }
    return out;
  }

  std::vector<Figure> texts() const {
    std::vector<Figure> out = rung_facts();
    std::string choices;
    if (trainer_)
      for (const std::string& line : trainer_->matmul_choices()) choices += (choices.empty() ? "" : "; ") + line;
    if (!choices.empty()) out.push_back({"matmul_algorithms", choices});
    return out;
  }

  std::vector<Figure> rung_facts() const {
    const std::string fused_attention = std::string("fused, ") + fp32_attention_keeper_name();
    const std::string bf16_attention = std::string("fused, ") + bf16_attention_keeper_name();
    const Figure qkv_bias{"qkv_bias_gradient", bf16_qkv_bias_gradient_name()};
    switch (rung_) {
      case Rung::eager:
        return {{"compute", "fp32 storage, TF32 matmuls"}, {"attention", "T x T scores in memory (eager)"}};
      case Rung::fused:
        return {{"compute", "fp32 storage, TF32 matmuls"}, {"attention", fused_attention}};
      case Rung::bf16:
        return {{"compute", "bf16 autocast: bf16 matmuls and attention, fp32 master weights"},
                {"attention", bf16_attention},
                qkv_bias,
                {"mlp_fc", bf16_fc_gelu_keeper_name(cfg_.channels)}};
      case Rung::bf16_checkpoint:
        return {{"compute", "bf16 autocast: bf16 matmuls and attention, fp32 master weights"},
                {"attention", bf16_attention},
                qkv_bias,
                {"mlp_fc", bf16_fc_gelu_keeper_name(cfg_.channels)},
                {"activations", "each block's input kept, the rest recomputed in the backward"}};
    }
    return {};
  }

  Check check(Context& ctx) override {
    Check result;
    gate_figures_.clear();
    std::ostringstream detail;
    result.rel_l2_error = logits_vs_reference(ctx, *trainer_, gate_inputs_, gate_targets_, detail);
    if (cfg_.batch == spec_.gate_batch) {
      for (const Comparison& other : spec_.compare) compare_with(ctx, other, result, detail);
      learning(ctx, result, detail);
    } else if (spec_.gate_batch > 0) {
      detail << "(the comparison and learning gates run at batch " << spec_.gate_batch << ")";
    }
    result.detail = detail.str();
    return result;
  }

  void teardown(Context&) override { trainer_.reset(); }

 private:
  template <typename T>
  std::vector<T> to_host(Context& ctx, const T* device, std::size_t count) {
    std::vector<T> host(count);
    ctx.copy_to_host(host.data(), device, count * sizeof(T));
    return host;
  }

  // (b) This rung against another on the same parameters and batch: logits and every gradient.
  void compare_with(Context& ctx, const Comparison& other, Check& result, std::ostringstream& detail) {
    DeviceArena arena;  // outside ctx.alloc: the gate's second model is not part of this rung's step
    auto baseline = make_trainer(other.rung, cfg_, arena.allocator(), roofbench::cuda::stream(ctx), corpus_, ctx.seed(), kInitSeed);
    const std::size_t P = trainer_->parameter_count();
    ROOFBENCH_CUDA(cudaMemcpyAsync(baseline->params(), trainer_->params(), P * sizeof(float),
                                   cudaMemcpyDeviceToDevice, roofbench::cuda::stream(ctx)));
    trainer_->draw_gate_batch(gate_inputs_, gate_targets_, cfg_.batch);
    trainer_->compute_gradients(gate_inputs_, gate_targets_);
    baseline->compute_gradients(gate_inputs_, gate_targets_);
    ctx.synchronize();
    const std::size_t logit_count = static_cast<std::size_t>(cfg_.batch) * cfg_.context * cfg_.vocab;
    const auto logits = to_host(ctx, trainer_->logits(), logit_count);
    const auto baseline_logits = to_host(ctx, baseline->logits(), logit_count);
    const auto grads = to_host(ctx, trainer_->grads(), P);
    const auto baseline_grads = to_host(ctx, baseline->grads(), P);
    const double logits_error = relative_l2_error(logits.data(), baseline_logits.data(), logit_count);
    const double grads_error = relative_l2_error(grads.data(), baseline_grads.data(), P);
    gate_figures_.push_back({std::string("logits_rel_err_vs_") + other.name, logits_error});
    gate_figures_.push_back({std::string("grads_rel_err_vs_") + other.name, grads_error});
    const bool logits_agree = logits_error <= other.logits_bound, grads_agree = grads_error <= other.grads_bound;
    detail << "vs " << other.name << " on the same parameters and batch: logits rel L2 "
           << format_gate_number(logits_error) << (logits_agree ? "" : " (FAILED)") << " (bound "
           << other.logits_bound << "), gradients rel L2 " << format_gate_number(grads_error)
           << (grads_agree ? "" : " (FAILED)") << " (bound " << other.grads_bound << "). ";
    if (!logits_agree || !grads_agree) result.passed_extra = false;
  }

  // (c) 300 steps from a fresh start must learn (training_gates.hpp's judge_learning).
  void learning(Context& ctx, Check& result, std::ostringstream& detail) {
    trainer_->initialize(kInitSeed);
    for (int step = 0; step < kLearningSteps; ++step) trainer_->train_step();  // no host read in the loop
    ctx.synchronize();
    judge_learning(to_host(ctx, trainer_->loss_history(), kLossHistory), unigram_entropy_, result, gate_figures_, detail);
  }

  Rung rung_;
  RungSpec spec_;
  Config cfg_;
  double unigram_entropy_ = 0;
  DeviceCorpus corpus_;
  std::uint8_t* gate_inputs_ = nullptr;
  std::uint8_t* gate_targets_ = nullptr;
  std::unique_ptr<Trainer> trainer_;
  std::vector<Figure> gate_figures_;  // check()'s, returned by figures()
};

// ladder: "gpt" for the waterfall's rungs, empty for the fp32 control (beside the ladder, not on it).
CaseSpec training_step_case(RungSpec rung, std::string name, std::string description,
                            std::vector<std::int64_t> batches, std::string ladder = "gpt") {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.axes = {Axis::ints("batch", std::move(batches))};
  spec.device = DeviceNeed::gpu();
  spec.precision = rung.rung == Rung::bf16 || rung.rung == Rung::bf16_checkpoint ? Precision::bf16 : Precision::tf32;
  spec.ladder = std::move(ladder);
  // R1 and up launch their own graph and R0 is the eager sequence itself: the host must not capture any.
  spec.timing.graphable = false;
  // The gates build a second trainer (an fp32 one at batch 512 for R3 and R4), run the fp64 reference's
  // forward on the CPU and train 300 steps: more than a plain benchmark's default allowance.
  spec.timeout_s = 240;
  spec.make = [rung](const Params& params) -> std::unique_ptr<Case> {
    return std::make_unique<GptTrainingStep>(rung, params);
  };
  return spec;
}

void describe(Plugin& plugin) {
  plugin.name = "gpt";
  plugin.description =
      "One AdamW training step of a 6-block, width-512 character GPT (18.9M parameters, context 128), fp32 "
      "storage and TF32 matmuls, on a fresh batch drawn on the device every step";
  plugin.add(training_step_case({Rung::eager, {}, 64}, "R0_eager",
                                "eager: one kernel or cuBLAS call per operation, T x T attention scores in "
                                "memory, AdamW per parameter tensor (what PyTorch eager runs)",
                                {64}));
  plugin.add(training_step_case({Rung::fused, {kVsEager}, 64}, "R1_fused",
                                "fused: bias+GELU, residual+LayerNorm, softmax+cross-entropy, attention in "
                                "shared memory, one multi-tensor AdamW, the whole step one CUDA graph",
                                {64}));
  plugin.add(training_step_case({Rung::bf16, {kVsFused}, 64}, "R2_bf16",
                                "R1 with torch.autocast's bf16: bf16 matmuls (fp32 accumulation) and attention "
                                "on bf16 tensor cores, bf16 activations; LayerNorm statistics, softmax, loss, "
                                "AdamW, master weights and optimiser state fp32",
                                {64}));
  plugin.add(training_step_case({Rung::bf16, {kVsFused}, 512}, "R3_batch",
                                "R2 at batch 512: compared with R1 and trained 300 steps from a fresh start (the "
                                "loss-falls gate on the fast configuration)",
                                {512}));
  // The case study's "sweep the batch size", beside the ladder (the waterfall's R3 is the batch-512 point above):
  // upward until the throughput knee or out of memory, peak memory at every point.
  CaseSpec sweep = training_step_case({Rung::bf16, {}, 0}, "R3_batch_sweep",
                                      "R2's batch swept upward to the throughput knee or out of memory, each point "
                                      "gated against the fp64 reference",
                                      {64, 128, 256, 512, 1024, 2048}, "");
  sweep.sweep_axis = "batch";
  plugin.add(std::move(sweep));
  plugin.add(training_step_case({Rung::bf16_checkpoint, {kVsBf16, kVsFused}, 512}, "R4_checkpoint",
                                "R3 at batch 512 with activation checkpointing: each block keeps only its input, "
                                "the backward recomputes the rest; gradients equal R3's",
                                {512}));
  plugin.add(training_step_case({Rung::fused, {}, 0}, "fp32_control",
                                "the control beside the ladder: R1 (fp32 storage) at batch 512, so that bf16's "
                                "memory saving and speed-up at that batch are measured, not asserted",
                                {512}, ""));
#if defined(ROOFBENCH_GPT_WITH_NCCL)
  for (CaseSpec& data_parallel : data_parallel_cases()) plugin.add(std::move(data_parallel));
#endif
  for (CaseSpec& lab : lab_cases()) plugin.add(std::move(lab));
}

}  // namespace
}  // namespace roofbench::gpt::cuda

ROOFBENCH_PLUGIN("gpt", roofbench::gpt::cuda::describe)
