#include "reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <random>

#include "corpus.hpp"

namespace roofbench::gpt::reference {
namespace {

// Small enough for finite differences over every tensor, big enough to have two heads, two blocks and
// RoPE pairs past the first.
const Config kTiny{.vocab = 28, .context = 8, .channels = 16, .layers = 2, .heads = 2, .batch = 2};

std::vector<std::uint8_t> random_tokens(const Config& cfg, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> tokens(static_cast<std::size_t>(cfg.batch * cfg.context));
  for (auto& t : tokens) t = static_cast<std::uint8_t>(rng() % static_cast<std::uint64_t>(cfg.vocab));
  return tokens;
}

double loss_at(const Config& cfg, const std::vector<double>& params, const std::vector<std::uint8_t>& inputs,
               const std::vector<std::uint8_t>& targets) {
  return loss(cfg, forward(cfg, params, inputs, cfg.batch), targets);
}

TEST(GptReference, InitialLossIsNearUniform) {
  const auto params = init_parameters(kTiny, 1);
  const double initial = loss_at(kTiny, params, random_tokens(kTiny, 2), random_tokens(kTiny, 3));
  EXPECT_NEAR(initial, std::log(28.0), 0.05);
}

TEST(GptReference, InitialisationIsDeterministicAndFollowsInitKind) {
  const auto params = init_parameters(kTiny, 7);
  EXPECT_EQ(params, init_parameters(kTiny, 7));
  EXPECT_NE(params, init_parameters(kTiny, 8));
  const auto off = parameter_offsets(kTiny);
  EXPECT_EQ(params[off.layers[0].ln1_w], 1.0);
  EXPECT_EQ(params[off.layers[0].ln1_b], 0.0);
  EXPECT_EQ(params[off.layers[1].fc_b], 0.0);
  double sum_sq = 0;
  const std::size_t n = static_cast<std::size_t>(kTiny.vocab * kTiny.channels);
  for (std::size_t i = off.wte; i < off.wte + n; ++i) sum_sq += params[i] * params[i];
  EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(n)), kInitStd, 0.003);
}

// Every tensor, at its first, middle and last entry, against a central difference. The point is random
// (not the initialisation, where LayerNorm weights are exactly one) so every term of the backward counts.
TEST(GptReference, GradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> jitter(0.0, 0.3);
  auto params = init_parameters(kTiny, 5);
  for (auto& p : params) p += jitter(rng);
  const auto inputs = random_tokens(kTiny, 12), targets = random_tokens(kTiny, 13);

  const auto grads = backward(kTiny, params, forward(kTiny, params, inputs, kTiny.batch), targets);
  // Fourth-order stencil: truncation ~h^4 and rounding ~1e-16/h both stay far below the tolerance.
  const double h = 1e-3;
  double worst = 0;
  for (const auto& slot : layout(kTiny)) {
    for (std::size_t i : {slot.offset, slot.offset + slot.count / 2, slot.offset + slot.count - 1}) {
      auto shifted = [&](double delta) {
        auto p = params;
        p[i] += delta;
        return loss_at(kTiny, p, inputs, targets);
      };
      const double numeric = (8 * (shifted(h) - shifted(-h)) - (shifted(2 * h) - shifted(-2 * h))) / (12 * h);
      const double error = std::abs(grads[i] - numeric) / std::max({std::abs(grads[i]), std::abs(numeric), 1e-6});
      worst = std::max(worst, error);
      EXPECT_LT(error, 1e-6) << slot.name << "[" << i - slot.offset << "]: backward " << grads[i] << ", numeric "
                             << numeric;
    }
  }
  std::cout << "worst relative gradient error: " << worst << "\n";
}

TEST(GptReference, LaterTokensDoNotChangeEarlierLogits) {
  const auto params = init_parameters(kTiny, 21);
  auto inputs = random_tokens(kTiny, 22);
  const auto before = forward(kTiny, params, inputs, kTiny.batch).logits;
  const std::size_t changed = 5, V = static_cast<std::size_t>(kTiny.vocab);
  inputs[changed] = static_cast<std::uint8_t>((inputs[changed] + 1) % kTiny.vocab);  // sequence 0
  const auto after = forward(kTiny, params, inputs, kTiny.batch).logits;
  for (std::size_t i = 0; i < changed * V; ++i) EXPECT_EQ(before[i], after[i]) << "position " << i / V;
  EXPECT_NE(before[changed * V], after[changed * V]);
  const std::size_t sequence = static_cast<std::size_t>(kTiny.context) * V;
  for (std::size_t i = sequence; i < 2 * sequence; ++i) EXPECT_EQ(before[i], after[i]) << "sequence 1 changed";
}

TEST(GptReference, FirstAdamWStepMovesEachParameterByLr) {
  const AdamW opt;
  std::vector<double> params{1.0, -2.0, 0.5}, grads{0.3, -4.0, 0.0}, m(3), v(3);
  adamw_step(params, grads, m, v, 1, opt);
  // Step 1: m_hat = g and v_hat = g^2, so the step is lr * g / (|g| + eps) after the decay.
  for (std::size_t i = 0; i < 3; ++i) {
    const double p0 = i == 0 ? 1.0 : i == 1 ? -2.0 : 0.5;
    const double expected = p0 * (1 - opt.lr * opt.weight_decay) - opt.lr * grads[i] / (std::abs(grads[i]) + opt.eps);
    EXPECT_NEAR(params[i], expected, 1e-15);
  }
}

TEST(GptReference, TrainingOnAFixedBatchDrivesTheLossDown) {
  if (!std::filesystem::is_directory(kDefaultCorpus)) GTEST_SKIP() << kDefaultCorpus << " is missing";
  const Config cfg{.vocab = 28, .context = 16, .channels = 32, .layers = 2, .heads = 2, .batch = 4};
  const auto batch = draw_batch(load_corpus(cfg), cfg, cfg.batch, 3);
  auto params = init_parameters(cfg, 4);
  std::vector<double> m(params.size()), v(params.size());
  const AdamW opt{.lr = 1e-2};
  double first = 0, last = 0;
  for (int step = 1; step <= 300; ++step) {
    const auto acts = forward(cfg, params, batch.inputs, cfg.batch);
    last = loss(cfg, acts, batch.targets);
    if (step == 1) first = last;
    adamw_step(params, backward(cfg, params, acts, batch.targets), m, v, step, opt);
  }
  std::cout << "loss " << first << " -> " << last << "\n";
  EXPECT_NEAR(first, std::log(28.0), 0.1);
  EXPECT_LT(last, 0.5 * first);
}

TEST(GptReference, DefaultWidthForwardOfOneSequence) {
  const Config cfg;
  const auto params = init_parameters(cfg, 1);
  Config one = cfg;
  one.batch = 1;
  const auto inputs = random_tokens(one, 2), targets = random_tokens(one, 3);
  // Processor time, not wall time: CI machines are shared, and this is what a quieter one would take.
  const std::clock_t start = std::clock();
  const auto acts = forward(cfg, params, inputs, 1);
  const std::clock_t forward_done = std::clock();
  const auto grads = backward(cfg, params, acts, targets);
  const std::clock_t backward_done = std::clock();
  EXPECT_NEAR(loss(cfg, acts, targets), std::log(28.0), 0.1);
  EXPECT_EQ(grads.size(), parameter_count(cfg));
  auto seconds = [](std::clock_t from, std::clock_t to) { return static_cast<double>(to - from) / CLOCKS_PER_SEC; };
  std::cout << "default width, 1 x 128 tokens, processor seconds (all threads): forward "
            << seconds(start, forward_done) << ", backward " << seconds(forward_done, backward_done) << "\n";
}

}  // namespace
}  // namespace roofbench::gpt::reference
