// Activation checkpointing's bookkeeping (activation_plan.hpp), simulated on the CPU: the forward writes
// each block's activations into its set, the backward walks the blocks top down, recomputing where the plan
// says; every block's backward must find its own activations in its set.
#include "activation_plan.hpp"

#include <gtest/gtest.h>

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
