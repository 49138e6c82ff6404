// What every training-step case of the gpt plugin shares, whatever its rung: the corpus, the work one step
// does, and the gates (the forward against the fp64 CPU reference, the learning run). One copy, so that
// R0, R1 and R5 are held to the same bar.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "corpus.hpp"
#include "model.hpp"
#include "reference.hpp"
#include "roofbench/plugin.hpp"
#include "trainer.hpp"

namespace roofbench::gpt::cuda {

inline constexpr std::uint64_t kInitSeed = 0;  // every rung starts from the same model, like torch.manual_seed(0)
inline constexpr int kLearningSteps = 300;
inline constexpr int kLossWindow = 20;
inline constexpr int kGateSequences = 2;  // the CPU reference's forward is slow: two sequences suffice

inline std::string format_gate_number(double value) {
  std::ostringstream out;
  out.precision(4);
  out << value;
  return out.str();
}

inline double mean_of(const std::vector<float>& values, std::size_t first, std::size_t count) {
  double sum = 0;
  for (std::size_t i = first; i < first + count; ++i) sum += values[i];
  return sum / static_cast<double>(count);
}

// The training text, from ROOFBENCH_GPT_CORPUS or the default path.
inline std::vector<std::uint8_t> load_training_corpus(const Config& cfg) {
  const char* path = std::getenv("ROOFBENCH_GPT_CORPUS");
  try {
    return load_corpus(cfg, path && *path ? std::filesystem::path(path) : kDefaultCorpus);
  } catch (const std::exception& e) {  // the host reports roofbench::Error against the benchmark
    throw Error(std::string("gpt: corpus (set ROOFBENCH_GPT_CORPUS to override): ") + e.what());
  }
}

// The work of one training step on one GPU, counted from the shapes (N = batch * T positions):
//   forward  F = N (L 2 (C 3C + C C + C 4C + 4C C) + 2 C V)      the linear layers and the tied output
//              + L 2 2 B heads T T hd                             attention: q k^T and p v, the FULL
//                                                                 T x T (causal skipping not credited)
//   backward = 2 F (two matmuls per forward matmul), so a step is 3 F.
// Attention counts the full T x T products although the kernels compute only the causal half: the MFU
// convention (6 x parameters + attention), which keeps the step's MFU comparable with published ones; at
// T = 128 attention is about 4% of the count, so the step's FLOP/s reads about 2% above what runs.
// Elementwise work (LayerNorm, GELU, softmax, AdamW) is not counted: it is bandwidth, not FLOPs.
// Bytes: the minimum a step must move: parameters read by the forward (4P), gradients written (4P),
// AdamW reading parameters, gradients and both moments and writing three of them back (28P), and the
// batch's input and target tokens (one byte each).
inline Work training_step_work(const Config& cfg) {
  const double N = static_cast<double>(cfg.batch) * cfg.context, C = cfg.channels, V = cfg.vocab;
  const double L = cfg.layers, T = cfg.context, hd = cfg.head_dim();
  const double forward = N * (L * 2 * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + 2 * C * V) +
                         L * 2 * 2 * cfg.batch * cfg.heads * T * T * hd;
  const double P = static_cast<double>(parameter_count(cfg));
  Work w;
  w.flops = 3 * forward;
  w.bytes = 4 * P + 4 * P + 28 * P + 2 * N;
  w.items = N;
  w.item_name = "tokens";
  return w;
}

// Gate (a): the forward of kGateSequences fresh sequences against the double-precision CPU reference on
// the same parameters. Returns the logits' relative L2 error. The trainer's device must be current and its
// stream must be ctx.stream(rank); gate_inputs/gate_targets hold kGateSequences * T tokens each.
inline double logits_vs_reference(Context& ctx, Trainer& trainer, std::uint8_t* gate_inputs,
                                  std::uint8_t* gate_targets, std::ostringstream& detail, int rank = 0) {
  const Config& cfg = trainer.config();
  trainer.draw_gate_batch(gate_inputs, gate_targets, kGateSequences);
  trainer.forward(gate_inputs, kGateSequences);
  ctx.synchronize(rank);
  const std::size_t positions = static_cast<std::size_t>(kGateSequences) * cfg.context;
  std::vector<float> logits(positions * cfg.vocab), params(trainer.parameter_count());
  std::vector<std::uint8_t> inputs(positions);
  ctx.copy_to_host(logits.data(), trainer.logits(), logits.size() * sizeof(float), rank);
  ctx.copy_to_host(inputs.data(), gate_inputs, inputs.size(), rank);
  ctx.copy_to_host(params.data(), trainer.params(), params.size() * sizeof(float), rank);
  const std::vector<double> params64(params.begin(), params.end());
  const auto reference_run = reference::forward(cfg, params64, inputs, kGateSequences);
  const double error = relative_l2_error(logits.data(), reference_run.logits.data(), logits.size());
  detail << "logits of " << kGateSequences << " fresh sequences vs the fp64 CPU reference: rel L2 "
         << format_gate_number(error) << ". ";
  return error;
}

// Gate (c), the verdict: speed that breaks the model is not speed. `loss_history` holds the losses of
// kLearningSteps steps from a fresh start (step s at s - 1); the mean of the last kLossWindow must lie
// below the mean of the first kLossWindow and below the unigram entropy (what a model blind to context
// reaches at best). Adds the figures and the detail; a failure clears passed_extra.
inline void judge_learning(const std::vector<float>& loss_history, double unigram_entropy, Check& result,
                           std::vector<Figure>& figures, std::ostringstream& detail) {
  const double first = mean_of(loss_history, 0, kLossWindow);
  const double last = mean_of(loss_history, kLearningSteps - kLossWindow, kLossWindow);
  figures.push_back({"loss_first20", first});
  figures.push_back({"loss_last20", last});
  figures.push_back({"unigram_entropy", unigram_entropy});
  const bool learned = std::isfinite(last) && last < first && last < unigram_entropy;
  detail << "learning: mean loss of the first " << kLossWindow << " steps " << format_gate_number(first)
         << ", of the last " << format_gate_number(last) << " (unigram entropy " << format_gate_number(unigram_entropy)
         << ")" << (learned ? "" : ": FAILED, the loss did not fall below both") << ".";
  if (!learned) result.passed_extra = false;
}

}  // namespace roofbench::gpt::cuda
