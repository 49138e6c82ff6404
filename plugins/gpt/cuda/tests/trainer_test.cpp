// Whole training steps on a tiny config: each rung's gradient against the double-precision CPU reference,
// and the two rungs training alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "activation_plan.hpp"
#include "corpus.hpp"
#include "gpu_test_util.hpp"
#include "reference.hpp"
#include "trainer.hpp"

namespace roofbench::gpt::cuda {
namespace {

using testing::Device;
using testing::rel_l2;
using testing::tiny_config;
using testing::tiny_corpus;

// The tiny model's corpus on the device, trainers of either rung from the same seeds, and room for a batch.
struct TinyModel {
  std::unique_ptr<Trainer> make(Rung rung) { return make_trainer(rung, cfg, dev.allocator(), nullptr, corpus, 42, 7); }

  const Config cfg = tiny_config();
  Device dev;
  const std::vector<std::uint8_t> tokens = tiny_corpus();
  const DeviceCorpus corpus{dev.upload(tokens), tokens.size()};
  const std::size_t N = static_cast<std::size_t>(cfg.batch) * cfg.context;
  std::uint8_t* inputs = dev.alloc<std::uint8_t>(N);
  std::uint8_t* targets = dev.alloc<std::uint8_t>(N);
};

class GptTrainer : public ::testing::TestWithParam<Rung> {};

TEST_P(GptTrainer, GradientsMatchReference) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  TinyModel tiny;
  const Config& cfg = tiny.cfg;
  const std::size_t N = tiny.N;
  auto trainer = tiny.make(GetParam());
  trainer->draw_gate_batch(tiny.inputs, tiny.targets, cfg.batch);
  trainer->compute_gradients(tiny.inputs, tiny.targets);

  const auto params = Device::download(static_cast<const float*>(trainer->params()), trainer->parameter_count());
  const std::vector<double> params64(params.begin(), params.end());
  const auto host_inputs = Device::download(tiny.inputs, N), host_targets = Device::download(tiny.targets, N);
  const auto acts = reference::forward(cfg, params64, host_inputs, cfg.batch);
  const double loss = reference::loss(cfg, acts, host_targets);
  const auto grads = reference::backward(cfg, params64, acts, host_targets);

  // TF32 rungs: the TF32 tolerance; bf16 ones: operands with 8 significant bits instead of 11.
  const bool bf16 = GetParam() == Rung::bf16 || GetParam() == Rung::bf16_checkpoint;
  EXPECT_LT(rel_l2(Device::download(trainer->logits(), N * cfg.vocab), acts.logits), bf16 ? 2e-2 : 5e-3);
  EXPECT_NEAR(Device::download(trainer->loss(), 1)[0], loss, (bf16 ? 1e-2 : 1e-3) * loss);
  EXPECT_LT(rel_l2(Device::download(trainer->grads(), trainer->parameter_count()), grads), bf16 ? 5e-2 : 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Rungs, GptTrainer,
                         ::testing::Values(Rung::eager, Rung::fused, Rung::bf16, Rung::bf16_checkpoint),
                         [](const ::testing::TestParamInfo<Rung>& info) { return std::string(to_string(info.param)); });

// R4 recomputes R3's activations with the same kernels on the same values: the same logits and gradients,
// and the same training, bit for bit up to a library's choice of algorithm. The cuBLASLt matmuls' choices
// are made once per process, so the two run the same ones, and say which.
TEST(GptTrainers, CheckpointingComputesTheSameGradients) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  TinyModel tiny;
  auto plain = tiny.make(Rung::bf16), checkpointed = tiny.make(Rung::bf16_checkpoint);
  EXPECT_EQ(checkpointed->matmul_choices(), plain->matmul_choices());
  ASSERT_FALSE(plain->matmul_choices().empty());
  for (const std::string& line : plain->matmul_choices()) {
    std::printf("%s\n", line.c_str());
    EXPECT_NE(line.find(" of "), std::string::npos) << line;
  }
  plain->draw_gate_batch(tiny.inputs, tiny.targets, tiny.cfg.batch);
  plain->compute_gradients(tiny.inputs, tiny.targets);
  checkpointed->compute_gradients(tiny.inputs, tiny.targets);
  const std::size_t P = plain->parameter_count(), L = tiny.N * tiny.cfg.vocab;
  EXPECT_LT(rel_l2(Device::download(checkpointed->logits(), L), Device::download(plain->logits(), L)), 1e-6);
  EXPECT_LT(rel_l2(Device::download(checkpointed->grads(), P), Device::download(plain->grads(), P)), 1e-6);
  for (int s = 0; s < 5; ++s) {
    plain->train_step();
    checkpointed->train_step();
  }
  const auto plain_losses = Device::download(plain->loss_history(), 5);
  const auto checkpointed_losses = Device::download(checkpointed->loss_history(), 5);
  for (int s = 0; s < 5; ++s) EXPECT_NEAR(checkpointed_losses[s], plain_losses[s], 1e-6 * plain_losses[s]) << s;
}

// R4 places its gradient scratch in its activation set's dead buffers (activation_plan.hpp): it allocates
// what R3 does less five activation sets and the scratch the plan leaves out, byte for byte.
TEST(GptTrainers, CheckpointingAllocatesWhatThePlanCounts) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  TinyModel tiny;
  const auto allocated = [&](Rung rung) {
    std::size_t bytes = 0;
    const DeviceAllocator& inner = tiny.dev.allocator();
    const DeviceAllocator counting = [&](std::size_t n, BufferRole role) {
      bytes += n;
      return inner(n, role);
    };
    make_trainer(rung, tiny.cfg, counting, nullptr, tiny.corpus, 42, 7);
    return bytes;
  };
  const ActivationPlan r3{tiny.cfg.layers, false}, r4{tiny.cfg.layers, true};
  const std::size_t saved = kept_activation_bytes(tiny.cfg, r3) - kept_activation_bytes(tiny.cfg, r4) +
                            bf16_scratch_bytes(tiny.cfg, r3) - bf16_scratch_bytes(tiny.cfg, r4);
  EXPECT_EQ(allocated(Rung::bf16) - allocated(Rung::bf16_checkpoint), saved);
}

// R2 trains like R1: losses within bf16's precision over a few steps.
TEST(GptTrainers, Bf16TrainsLikeFused) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  TinyModel tiny;
  auto fused = tiny.make(Rung::fused), bf16 = tiny.make(Rung::bf16);
  for (int s = 0; s < 5; ++s) {
    fused->train_step();
    bf16->train_step();
  }
  const auto fused_losses = Device::download(fused->loss_history(), 5);
  const auto bf16_losses = Device::download(bf16->loss_history(), 5);
  for (int s = 0; s < 5; ++s) EXPECT_NEAR(bf16_losses[s], fused_losses[s], 2e-2 * fused_losses[s]) << s;
}

TEST(GptTrainers, EagerAndFusedTrainAlike) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  TinyModel tiny;
  auto eager = tiny.make(Rung::eager), fused = tiny.make(Rung::fused);
  const int steps = 5;
  for (int s = 0; s < steps; ++s) {
    eager->train_step();
    fused->train_step();  // a graph replay: each must draw the next batch, not the captured one
  }
  const auto eager_losses = Device::download(eager->loss_history(), steps);
  const auto fused_losses = Device::download(fused->loss_history(), steps);
  for (int s = 0; s < steps; ++s) {
    EXPECT_TRUE(std::isfinite(fused_losses[s])) << "step " << s;
    EXPECT_NEAR(fused_losses[s], eager_losses[s], 1e-2 * eager_losses[s]) << "step " << s;
  }
  EXPECT_NE(fused_losses[0], fused_losses[1]);  // fresh batches (and an update) between steps
  const std::size_t P = eager->parameter_count();
  EXPECT_LT(rel_l2(Device::download(static_cast<const float*>(fused->params()), P),
                   Device::download(static_cast<const float*>(eager->params()), P)),
            1e-3);
}

}  // namespace
}  // namespace roofbench::gpt::cuda
