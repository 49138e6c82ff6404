// The gpt plugin: one training step of the small GPT (model.hpp) per run(), in the rungs of the "gpt"
// ladder. The corpus is staged on the device once; every step draws a fresh batch there.
#include <cuda_runtime_api.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "corpus.hpp"
#include "lab_cases.hpp"
#include "model.hpp"
#include "roofbench/cuda_check.hpp"
#include "roofbench/plugin.hpp"
#include "trainer.hpp"
#include "training_gates.hpp"
#if defined(ROOFBENCH_GPT_WITH_NCCL)
#include "data_parallel.hpp"
#endif

namespace roofbench::gpt::cuda {
namespace {

constexpr double kRungAgreement = 1e-2;  // R1 vs R0: TF32 matmuls re-associated by fusion, not a wrong answer

class GptTrainingStep final : public Case {
 public:
  GptTrainingStep(Rung rung, const Params& params) : rung_(rung) {
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
    trainer_ = make_trainer(rung_, cfg_, alloc, stream(ctx), DeviceCorpus{corpus, tokens.size()}, ctx.seed(),
                            kInitSeed);
    corpus_ = DeviceCorpus{corpus, tokens.size()};
  }

  void run(Context&) override { trainer_->train_step(); }

  Work work() const override { return training_step_work(cfg_); }  // training_gates.hpp counts it

  std::vector<Counter> counters() const override {
    return {{"parameters", static_cast<double>(parameter_count(cfg_))}};
  }

  Check check(Context& ctx) override {
    Check result;
    std::ostringstream detail;
    result.rel_l2_error = logits_vs_reference(ctx, *trainer_, gate_inputs_, gate_targets_, detail);
    if (rung_ == Rung::fused) compare_with_eager(ctx, result, detail);
    learning(ctx, result, detail);
    result.detail = detail.str();
    return result;
  }

  void teardown(Context&) override { trainer_.reset(); }

 private:
  static cudaStream_t stream(Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

  template <typename T>
  std::vector<T> to_host(Context& ctx, const T* device, std::size_t count) {
    std::vector<T> host(count);
    ctx.copy_to_host(host.data(), device, count * sizeof(T));
    return host;
  }

  // (b) R1 against R0 on the same parameters and batch: logits and every gradient.
  void compare_with_eager(Context& ctx, Check& result, std::ostringstream& detail) {
    DeviceArena arena;  // outside ctx.alloc: the gate's second model is not part of R1's step
    auto eager = make_trainer(Rung::eager, cfg_, arena.allocator(), stream(ctx), corpus_, ctx.seed(), kInitSeed);
    const std::size_t P = trainer_->parameter_count();
    ROOFBENCH_CUDA(cudaMemcpyAsync(eager->params(), trainer_->params(), P * sizeof(float), cudaMemcpyDeviceToDevice,
                                   stream(ctx)));
    trainer_->draw_gate_batch(gate_inputs_, gate_targets_, cfg_.batch);
    trainer_->compute_gradients(gate_inputs_, gate_targets_);
    eager->compute_gradients(gate_inputs_, gate_targets_);
    ctx.synchronize();
    const std::size_t logit_count = static_cast<std::size_t>(cfg_.batch) * cfg_.context * cfg_.vocab;
    const auto fused_logits = to_host(ctx, trainer_->logits(), logit_count);
    const auto eager_logits = to_host(ctx, eager->logits(), logit_count);
    const auto fused_grads = to_host(ctx, trainer_->grads(), P);
    const auto eager_grads = to_host(ctx, eager->grads(), P);
    const double logits_error = relative_l2_error(fused_logits.data(), eager_logits.data(), logit_count);
    const double grads_error = relative_l2_error(fused_grads.data(), eager_grads.data(), P);
    result.counters.push_back({"logits_rel_err_vs_R0", logits_error});
    result.counters.push_back({"grads_rel_err_vs_R0", grads_error});
    const bool logits_agree = logits_error < kRungAgreement, grads_agree = grads_error < kRungAgreement;
    detail << "vs R0 on the same parameters and batch: logits rel L2 " << format_gate_number(logits_error)
           << (logits_agree ? "" : " (FAILED)") << ", gradients rel L2 " << format_gate_number(grads_error)
           << (grads_agree ? "" : " (FAILED)") << " (bound " << kRungAgreement << "). ";
    if (!logits_agree || !grads_agree) result.passed_extra = false;
  }

  // (c) 300 steps from a fresh start must learn (training_gates.hpp's judge_learning).
  void learning(Context& ctx, Check& result, std::ostringstream& detail) {
    trainer_->initialize(kInitSeed);
    for (int step = 0; step < kLearningSteps; ++step) trainer_->train_step();  // no host read in the loop
    ctx.synchronize();
    judge_learning(to_host(ctx, trainer_->loss_history(), kLossHistory), unigram_entropy_, result, detail);
  }

  Rung rung_;
  Config cfg_;
  double unigram_entropy_ = 0;
  DeviceCorpus corpus_;
  std::uint8_t* gate_inputs_ = nullptr;
  std::uint8_t* gate_targets_ = nullptr;
  std::unique_ptr<Trainer> trainer_;
};

CaseSpec training_step_case(Rung rung, std::string name, std::string description) {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.axes = {Axis::ints("batch", {64})};
  spec.device = DeviceNeed::gpu();
  spec.precision = Precision::tf32;
  spec.ladder = "gpt";
  // R1 launches its own graph and R0 is the eager sequence itself: the host must not capture either.
  spec.timing.graphable = false;
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
  plugin.add(training_step_case(Rung::eager, "R0_eager",
                                "eager: one kernel or cuBLAS call per operation, T x T attention scores in "
                                "memory, AdamW per parameter tensor (what PyTorch eager runs)"));
  plugin.add(training_step_case(Rung::fused, "R1_fused",
                                "fused: bias+GELU, residual+LayerNorm, softmax+cross-entropy, attention in "
                                "shared memory, one multi-tensor AdamW, the whole step one CUDA graph"));
#if defined(ROOFBENCH_GPT_WITH_NCCL)
  plugin.add(data_parallel_case());
#endif
  for (CaseSpec& lab : lab_cases()) plugin.add(std::move(lab));
}

}  // namespace
}  // namespace roofbench::gpt::cuda

ROOFBENCH_PLUGIN("gpt", roofbench::gpt::cuda::describe)
