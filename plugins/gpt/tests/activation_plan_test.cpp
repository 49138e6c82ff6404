// Activation checkpointing's bookkeeping (activation_plan.hpp), simulated on the CPU: the forward writes
// each block's activations into its set, the backward walks the blocks top down, recomputing where the plan
// says; every block's backward must find its own activations in its set.
#include "activation_plan.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace roofbench::gpt {
namespace {

// Which block's activations each set holds as each block's backward runs, in backward order (top down).
std::vector<int> owners_seen_by_backward(const ActivationPlan& plan, int* recomputed) {
  std::vector<int> holder(plan.sets(), -1);
  for (int l = 0; l < plan.layers; ++l) holder[plan.set_of(l)] = l;  // the forward
  std::vector<int> seen;
  *recomputed = 0;
  for (int l = plan.layers - 1; l >= 0; --l) {
    if (plan.recomputes(l)) {
      holder[plan.set_of(l)] = l;
      ++*recomputed;
    }
    seen.push_back(holder[plan.set_of(l)]);
  }
  return seen;
}

TEST(GptActivationPlan, EveryBlockBackwardSeesItsOwnActivations) {
  for (int layers : {1, 2, 6}) {
    for (bool checkpoint : {false, true}) {
      const ActivationPlan plan{layers, checkpoint};
      int recomputed = 0;
      const std::vector<int> seen = owners_seen_by_backward(plan, &recomputed);
      for (int i = 0; i < layers; ++i) EXPECT_EQ(seen[i], layers - 1 - i) << layers << " " << checkpoint;
      // Checkpointing recomputes every block but the top one; without it nothing is recomputed.
      EXPECT_EQ(recomputed, checkpoint ? layers - 1 : 0);
      EXPECT_EQ(plan.sets(), checkpoint ? 1 : layers);
    }
  }
}

TEST(GptActivationPlan, SetsAreDistinctWithoutCheckpointing) {
  const ActivationPlan plan{6, false};
  for (int a = 0; a < 6; ++a)
    for (int b = a + 1; b < 6; ++b) EXPECT_NE(plan.set_of(a), plan.set_of(b));
}

TEST(GptActivationPlan, CheckpointingKeepsLessActivationMemory) {
  Config cfg;
  cfg.batch = 512;
  const std::size_t full = kept_activation_bytes(cfg, {cfg.layers, false});
  const std::size_t kept = kept_activation_bytes(cfg, {cfg.layers, true});
  // One set instead of six: the saving is five sets.
  EXPECT_EQ(full - kept, 5 * block_activation_bytes(cfg));
  // At batch 512: N = 65536 positions; a set is 2 * 14 C + 4 * (C + 4) elements per position plus the lse.
  const std::size_t N = 65536, C = 512;
  EXPECT_EQ(block_activation_bytes(cfg), N * (2 * 14 * C + 4 * (C + 4)) + 4u * 512 * 8 * 128);
  EXPECT_LT(kept, full / 3);
}

}  // namespace
}  // namespace roofbench::gpt

namespace roofbench::gpt {
namespace {

// The bf16 step's use of the buffers activation_plan.hpp places, op by op in the trainer's order
// (bf16_trainer.cu), checked against a plan: every read finds the value the step last wrote to that buffer,
// and no op writes memory it reads unless the op runs in place (GELU's backward, over d_gelu).
class StepSimulation {
 public:
  explicit StepSimulation(const ActivationPlan& plan) : plan_(plan) {}

  // What an op reads and writes; `layer` names the block whose set's fc and gelu it means.
  struct Op {
    std::vector<Bf16Buffer> reads, writes;
    int layer = -1;
    bool in_place = false;  // may write over what it reads
  };

  void run(const Op& op) {
    for (Bf16Buffer b : op.reads) {
      const auto held = memory_.find(where(b, op.layer));
      ASSERT_NE(held, memory_.end()) << describe(b, op.layer) << " read before written";
      EXPECT_EQ(held->second, value(b, op.layer)) << describe(b, op.layer) << " overwritten before its last read";
    }
    for (Bf16Buffer w : op.writes) {
      if (!op.in_place) {
        for (Bf16Buffer r : op.reads) EXPECT_NE(where(w, op.layer), where(r, op.layer)) << describe(w, op.layer);
      }
      memory_[where(w, op.layer)] = value(w, op.layer);
    }
  }

  // block_body_forward: attn_proj's output into branch and the residual add reading it, fc, GELU.
  void block_body_forward(int l) {
    using B = Bf16Buffer;
    run({{}, {B::branch16}, l});
    run({{B::branch16}, {}, l});
    run({{}, {B::fc}, l});
    run({{B::fc}, {B::gelu}, l});
  }

  void forward() {
    using B = Bf16Buffer;
    for (int l = 0; l < plan_.layers; ++l) {
      block_body_forward(l);
      run({{B::gelu}, {B::branch16}, l});  // fc_proj
      run({{B::branch16}, l + 1 == plan_.layers ? std::vector<B>{B::lnf16} : std::vector<B>{}, l});
    }
    run({{B::lnf16}, {}});  // the logits
  }

  void backward() {
    using B = Bf16Buffer;
    run({{}, {B::d_logits16}});                 // the cross-entropy
    run({{B::d_logits16}, {B::d_ln16}});        // the head's dgrad
    run({{B::d_logits16, B::lnf16}, {}});       // wte's gradient
    run({{B::d_ln16}, {B::d_resid16}});         // LNf's backward
    for (int l = plan_.layers - 1; l >= 0; --l) {
      if (plan_.recomputes(l)) block_body_forward(l);
      const Op fc_proj_dx{{B::d_resid16}, {B::d_gelu16}, l}, fc_proj_dw{{B::d_resid16, B::gelu}, {}, l};
      run(fc_proj_weight_gradient_first(plan_) ? fc_proj_dw : fc_proj_dx);
      run(fc_proj_weight_gradient_first(plan_) ? fc_proj_dx : fc_proj_dw);
      run({{B::d_gelu16, B::fc}, {B::d_fc16}, l, home_of(B::d_fc16, plan_) == home_of(B::d_gelu16, plan_)});
      run({{B::d_fc16}, {B::d_ln16}, l});  // fc's dgrad, then its weight gradient
      run({{B::d_fc16}, {}, l});
      run({{B::d_ln16}, {B::d_resid16}, l});  // LN2's backward
      run({{B::d_resid16}, {B::d_attn_out16}, l});
      run({{B::d_resid16}, {}, l});
      run({{B::d_attn_out16}, {B::d_qkv16}, l});  // the attention's backward
      run({{B::d_qkv16}, {}, l});                  // qkv's bias gradient
      run({{B::d_qkv16}, {B::d_ln16}, l});
      run({{B::d_qkv16}, {}, l});
      run({{B::d_ln16}, l > 0 ? std::vector<B>{B::d_resid16} : std::vector<B>{}, l});  // LN1's backward
    }
  }

 private:
  // Memory: a home, and for the set's fc and gelu the set.
  std::pair<int, int> where(Bf16Buffer b, int layer) const {
    const Bf16Buffer home = home_of(b, plan_);
    const bool in_set = home == Bf16Buffer::fc || home == Bf16Buffer::gelu;
    return {static_cast<int>(home), in_set ? plan_.set_of(layer) : -1};
  }
  // A value: the buffer, and for the set's own buffers the block.
  static std::pair<int, int> value(Bf16Buffer b, int layer) {
    const bool per_block = b == Bf16Buffer::fc || b == Bf16Buffer::gelu;
    return {static_cast<int>(b), per_block ? layer : -1};
  }
  static std::string describe(Bf16Buffer b, int layer) {
    return "buffer " + std::to_string(static_cast<int>(b)) + " of block " + std::to_string(layer);
  }

  ActivationPlan plan_;
  std::map<std::pair<int, int>, std::pair<int, int>> memory_;
};

TEST(GptActivationPlan, EveryReadFindsItsValueInTheStep) {
  for (int layers : {1, 2, 6})
    for (bool checkpoint : {false, true}) {
      SCOPED_TRACE(std::to_string(layers) + (checkpoint ? " layers, checkpointed" : " layers"));
      StepSimulation step({layers, checkpoint});
      for (int s = 0; s < 2; ++s) {
        step.forward();
        step.backward();
      }
    }
}

TEST(GptActivationPlan, CheckpointingKeepsNoHiddenWidthGradientScratch) {
  const ActivationPlan r3{6, false}, r4{6, true};
  EXPECT_EQ(home_of(Bf16Buffer::d_gelu16, r3), Bf16Buffer::d_gelu16);
  EXPECT_EQ(home_of(Bf16Buffer::d_qkv16, r3), Bf16Buffer::d_gelu16);
  EXPECT_FALSE(fc_proj_weight_gradient_first(r3));
  for (Bf16Buffer b : {Bf16Buffer::d_gelu16, Bf16Buffer::d_fc16}) EXPECT_EQ(home_of(b, r4), Bf16Buffer::gelu);
  EXPECT_EQ(home_of(Bf16Buffer::d_qkv16, r4), Bf16Buffer::fc);
  EXPECT_EQ(home_of(Bf16Buffer::d_resid16, r4), Bf16Buffer::lnf16);
  EXPECT_TRUE(fc_proj_weight_gradient_first(r4));
  // Every home holds what it hosts.
  Config cfg;
  for (const ActivationPlan& plan : {r3, r4})
    for (int i = 0; i < kBf16Buffers; ++i) {
      const auto b = static_cast<Bf16Buffer>(i);
      EXPECT_LE(bf16_buffer_width(b, cfg), bf16_buffer_width(home_of(b, plan), cfg)) << i;
      EXPECT_EQ(home_of(home_of(b, plan), plan), home_of(b, plan)) << i;
    }
}

// The whole step's device memory at batch 512 (plugins/gpt/README.md's table), byte by byte: what every
// trainer allocates (trainer.cu), the bf16 weights, the activation sets and the bf16 scratch. The column-sum
// partials, the corpus and the gate's batch come on top (under 3 MiB together).
TEST(GptActivationPlan, Batch512PeakFitsUnderPyTorchs) {
  Config cfg;
  cfg.batch = 512;
  const std::size_t N = 65536, C = 512, V = 28, P = parameter_count(cfg), MiB = 1 << 20;
  ASSERT_EQ(P, 18929664u);
  const std::size_t every_trainer = 32 * MiB           // cuBLAS's workspace
                                    + 4 * 4 * P         // parameters, Adam's moments, gradients
                                    + (6 + 1) * N * C * 4  // the residual stream entering each block and leaving
                                    + N * C * 4           // its gradient
                                    + 2 * N * V * 4       // the logits and the embedding's one-hot operand
                                    + 3 * N * 4;          // LNf's statistics and the losses
  const auto step = [&](bool checkpoint) {
    const ActivationPlan plan{cfg.layers, checkpoint};
    return every_trainer + 2 * P + plan.sets() * block_activation_bytes(cfg) + bf16_scratch_bytes(cfg, plan);
  };
  // R4 before the scratch moved into its set: its one set beside R3's scratch (3.06 GiB).
  const std::size_t r3_scratch = bf16_scratch_bytes(cfg, {cfg.layers, false});
  EXPECT_EQ(r3_scratch, (128 + 7 + 128 + 512 + 128 + 512 + 4) * MiB / 2);
  EXPECT_EQ(bf16_scratch_bytes(cfg, {cfg.layers, true}), (128 + 7 + 128 + 4) * MiB / 2);
  EXPECT_EQ(step(true) + r3_scratch - bf16_scratch_bytes(cfg, {cfg.layers, true}), std::size_t{3284348928});
  EXPECT_EQ(step(true), std::size_t{2680369152});  // 2.496 GiB
  EXPECT_LT(static_cast<double>(step(true) + 3 * MiB), 2.69 * (1 << 30));
}

}  // namespace
}  // namespace roofbench::gpt
