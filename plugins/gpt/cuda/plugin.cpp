// The gpt plugin: one training step of the small GPT (model.hpp) per run(), in the rungs of the "gpt"
// ladder. The corpus is staged on the device once; every step draws a fresh batch there.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "corpus.hpp"
#include "model.hpp"
#include "reference.hpp"
#include "roofbench/cuda_check.hpp"
#include "roofbench/plugin.hpp"
#include "trainer.hpp"

namespace roofbench::gpt::cuda {
namespace {

constexpr std::uint64_t kInitSeed = 0;  // every rung starts from the same model, like torch.manual_seed(0)
constexpr int kLearningSteps = 300;
constexpr int kLossWindow = 20;
constexpr int kGateSequences = 2;        // the CPU reference's forward is slow: two sequences suffice
constexpr double kRungAgreement = 1e-2;  // R1 vs R0: TF32 matmuls re-associated by fusion, not a wrong answer

std::filesystem::path corpus_path() {
  const char* path = std::getenv("ROOFBENCH_GPT_CORPUS");
  return path && *path ? std::filesystem::path(path) : kDefaultCorpus;
}

std::string format(double value) {
  std::ostringstream out;
  out.precision(4);
  out << value;
  return out.str();
}

double mean(const std::vector<float>& values, std::size_t first, std::size_t count) {
  double sum = 0;
  for (std::size_t i = first; i < first + count; ++i) sum += values[i];
  return sum / static_cast<double>(count);
}

class GptTrainingStep final : public Case {
 public:
  GptTrainingStep(Rung rung, const Params& params) : rung_(rung) {
    cfg_.batch = static_cast<int>(params.integer("batch"));
    cfg_.validate();
  }

  void setup(Context& ctx) override {
    std::vector<std::uint8_t> tokens;
    try {
      tokens = load_corpus(cfg_, corpus_path());
    } catch (const std::exception& e) {  // the host reports roofbench::Error against the benchmark
      throw Error(std::string("gpt: corpus (set ROOFBENCH_GPT_CORPUS to override): ") + e.what());
    }
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

  // FLOPs of one training step, counted from the shapes (N = batch * T positions):
  //   forward  F = N (L 2 (C 3C + C C + C 4C + 4C C) + 2 C V)      the linear layers and the tied output
  //              + L 2 2 B heads T T hd                             attention: q k^T and p v, the FULL
  //                                                                 T x T (causal skipping not credited)
  //   backward = 2 F (two matmuls per forward matmul), so a step is 3 F.
  // Elementwise work (LayerNorm, GELU, softmax, AdamW) is not counted: it is bandwidth, not FLOPs.
  // Bytes: the minimum a step must move: parameters read by the forward (4P), gradients written (4P),
  // AdamW reading parameters, gradients and both moments and writing three of them back (28P), and the
  // batch's input and target tokens (one byte each).
  Work work() const override {
    const double N = static_cast<double>(cfg_.batch) * cfg_.context, C = cfg_.channels, V = cfg_.vocab;
    const double L = cfg_.layers, T = cfg_.context, hd = cfg_.head_dim();
    const double forward = N * (L * 2 * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + 2 * C * V) +
                           L * 2 * 2 * cfg_.batch * cfg_.heads * T * T * hd;
    const double P = static_cast<double>(parameter_count(cfg_));
    Work w;
    w.flops = 3 * forward;
    w.bytes = 4 * P + 4 * P + 28 * P + 2 * N;
    w.items = N;
    w.item_name = "tokens";
    return w;
  }

  std::vector<Counter> counters() const override {
    return {{"parameters", static_cast<double>(parameter_count(cfg_))}};
  }

  Check check(Context& ctx) override {
    Check result;
    std::ostringstream detail;
    result.rel_l2_error = forward_vs_reference(ctx, detail);
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

  // (a) The forward of a fresh batch against the double-precision CPU reference on the same parameters.
  double forward_vs_reference(Context& ctx, std::ostringstream& detail) {
    trainer_->draw_gate_batch(gate_inputs_, gate_targets_, kGateSequences);
    trainer_->forward(gate_inputs_, kGateSequences);
    ctx.synchronize();
    const std::size_t positions = static_cast<std::size_t>(kGateSequences) * cfg_.context;
    const auto logits = to_host(ctx, trainer_->logits(), positions * cfg_.vocab);
    const auto inputs = to_host(ctx, gate_inputs_, positions);
    const auto params = to_host(ctx, static_cast<const float*>(trainer_->params()), trainer_->parameter_count());
    const std::vector<double> params64(params.begin(), params.end());
    const auto reference_run = reference::forward(cfg_, params64, inputs, kGateSequences);
    const double error = relative_l2_error(logits.data(), reference_run.logits.data(), logits.size());
    detail << "logits of " << kGateSequences << " fresh sequences vs the fp64 CPU reference: rel L2 "
           << format(error) << ". ";
    return error;
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
    detail << "vs R0 on the same parameters and batch: logits rel L2 " << format(logits_error)
           << (logits_agree ? "" : " (FAILED)") << ", gradients rel L2 " << format(grads_error)
           << (grads_agree ? "" : " (FAILED)") << " (bound " << kRungAgreement << "). ";
    if (!logits_agree || !grads_agree) result.passed_extra = false;
  }

  // (c) Speed that breaks the model is not speed: 300 steps from a fresh start must lower the loss below
  // where it started and below the unigram entropy (what a model blind to context reaches at best).
  void learning(Context& ctx, Check& result, std::ostringstream& detail) {
    trainer_->initialize(kInitSeed);
    for (int step = 0; step < kLearningSteps; ++step) trainer_->train_step();  // no host read in the loop
    ctx.synchronize();
    const auto history = to_host(ctx, trainer_->loss_history(), kLossHistory);
    const double first = mean(history, 0, kLossWindow);
    const double last = mean(history, kLearningSteps - kLossWindow, kLossWindow);
    result.counters.push_back({"loss_first20", first});
    result.counters.push_back({"loss_last20", last});
    result.counters.push_back({"unigram_entropy", unigram_entropy_});
    const bool learned = std::isfinite(last) && last < first && last < unigram_entropy_;
    detail << "learning: mean loss of the first " << kLossWindow << " steps " << format(first) << ", of the last "
           << format(last) << " (unigram entropy " << format(unigram_entropy_) << ")"
           << (learned ? "" : ": FAILED, the loss did not fall below both") << ".";
    if (!learned) result.passed_extra = false;
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
}

}  // namespace
}  // namespace roofbench::gpt::cuda

ROOFBENCH_PLUGIN("gpt", roofbench::gpt::cuda::describe)
