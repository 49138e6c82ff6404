// The fp64 attention reference and the work counts, on cases small enough to work out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "roofbench/kernels/cuda_attention.hpp"

namespace roofbench::kernels {
namespace {

TEST(AttentionReference, EqualScoresAverageTheValues) {
  // q = 0: every score is 0, so the output is the mean of the visible values.
  const AttentionShape shape{.q_len = 3, .kv_len = 3, .head_dim = 2, .causal = false};
  const std::vector<double> q(6, 0.0), k = {1, 2, 3, 4, 5, 6}, v = {1, 10, 2, 20, 3, 30};
  const auto out = attention_reference(shape, q.data(), k.data(), v.data(), {0, 2});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_DOUBLE_EQ(out[0], 2.0);
  EXPECT_DOUBLE_EQ(out[1], 20.0);
  EXPECT_DOUBLE_EQ(out[2], 2.0);
}

TEST(AttentionReference, CausalRowsSeeOnlyTheKeysUpToThemselves) {
  AttentionShape shape{.q_len = 3, .kv_len = 3, .head_dim = 2, .causal = true};
  const std::vector<double> q(6, 0.0), k(6, 1.0), v = {1, 10, 2, 20, 3, 30};
  const auto out = attention_reference(shape, q.data(), k.data(), v.data(), {0, 1, 2});
  EXPECT_DOUBLE_EQ(out[0], 1.0);  // row 0: v0 alone
  EXPECT_DOUBLE_EQ(out[2], 1.5);  // row 1: mean of v0, v1
  EXPECT_DOUBLE_EQ(out[4], 2.0);  // row 2: all three
}

TEST(AttentionReference, SoftmaxWeightsFollowTheScaledScores) {
  // One query, two keys with scores 0 and s: weights 1 / (1 + e^(s/sqrt(d))) and the rest.
  const AttentionShape shape{.q_len = 1, .kv_len = 2, .head_dim = 4};
  const std::vector<double> q = {1, 1, 1, 1}, k = {0, 0, 0, 0, 1, 0, 0, 0}, v = {0, 0, 0, 0, 1, 1, 1, 1};
  const auto out = attention_reference(shape, q.data(), k.data(), v.data(), {0});
  const double w = std::exp(0.5) / (1 + std::exp(0.5));  // score 1, scale 1/2
  for (double x : out) EXPECT_NEAR(x, w, 1e-15);
}

TEST(AttentionShape, CausalCountsOnlyTheUnmaskedPairs) {
  AttentionShape prefill{.batch = 8, .heads = 12, .q_len = 1024, .kv_len = 1024, .head_dim = 64, .causal = true};
  EXPECT_DOUBLE_EQ(prefill.visible_pairs(), 1024.0 * 1025 / 2);
  EXPECT_DOUBLE_EQ(prefill.flops(), 4.0 * 96 * 64 * 1024 * 1025 / 2);
  prefill.causal = false;
  EXPECT_DOUBLE_EQ(prefill.flops(), 4.0 * 96 * 64 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(prefill.min_bytes(2), 2.0 * 4 * 96 * 1024 * 64);
  // A decode query is the last position: it sees the whole cache, causal or not.
  const AttentionShape decode{.batch = 64, .heads = 12, .q_len = 1, .kv_len = 4096, .head_dim = 64, .causal = true};
  EXPECT_EQ(decode.visible_keys(0), 4096);
  EXPECT_DOUBLE_EQ(decode.visible_pairs(), 4096.0);
}

}  // namespace
}  // namespace roofbench::kernels
