#include "scaling_model.hpp"

#include <gtest/gtest.h>

#include "model.hpp"

namespace roofbench::gpt {
namespace {

// Single-node figures measured on two H200s: t_compute from the k=2 ceiling of 1.586M
// tokens/s, the fp32 gradient of the default model, 8192 tokens per rank and step.
constexpr double kTokensPerRank = 64.0 * 128;
constexpr double kTCompute = 2 * kTokensPerRank / 1.586e6;
const double kGradientBytes = 4.0 * static_cast<double>(parameter_count(Config{}));

TEST(GptScalingModel, OneRankSendsNothingAndIsR0) {
  EXPECT_EQ(ring_allreduce_seconds(1, kGradientBytes, 1e9), 0);
  EXPECT_EQ(ring_allreduce_busbw(1, kGradientBytes, 1e-3), 0);
  const ScalingPrediction one = predict_scaling(1, kTokensPerRank, kTCompute, 0);
  EXPECT_DOUBLE_EQ(one.floor_tokens_per_s, kTokensPerRank / kTCompute);
  EXPECT_DOUBLE_EQ(one.ceiling_tokens_per_s, one.floor_tokens_per_s);
}

TEST(GptScalingModel, RingTimeAndBusbwAreInverses) {
  const double seconds = ring_allreduce_seconds(8, kGradientBytes, 330e9);
  EXPECT_DOUBLE_EQ(seconds, 2 * 7.0 / 8 * kGradientBytes / 330e9);
  EXPECT_DOUBLE_EQ(ring_allreduce_busbw(8, kGradientBytes, seconds), 330e9);
}

TEST(GptScalingModel, TheRingCrossesHostsWhereNeighboursAreOnDifferentHosts) {
  EXPECT_EQ(ring_edges_across_hosts({"a"}), 0);
  EXPECT_EQ(ring_edges_across_hosts({"a", "a", "a"}), 0);
  EXPECT_EQ(ring_edges_across_hosts({"a", "a", "b", "b"}), 2);
  EXPECT_EQ(ring_edges_across_hosts({"a", "b", "a", "b"}), 4);
  EXPECT_DOUBLE_EQ(ring_allreduce_bytes_per_rank(4, 8e6), 12e6);
  EXPECT_EQ(ring_allreduce_bytes_per_rank(1, 8e6), 0);
}

TEST(GptScalingModel, ReproducesTheIssuesTwoGpuFloorAndCeiling) {
  // The floor of 1.544M tokens/s implies t_comm; the model must give back both figures from it.
  const double t_comm = 2 * kTokensPerRank / 1.544e6 - kTCompute;
  const ScalingPrediction two = predict_scaling(2, kTokensPerRank, kTCompute, t_comm);
  EXPECT_NEAR(two.floor_tokens_per_s, 1.544e6, 1);
  EXPECT_NEAR(two.ceiling_tokens_per_s, 1.586e6, 1);
}

TEST(GptScalingModel, TwoNodesOfEightRingOverTheFabric) {
  EXPECT_DOUBLE_EQ(kTwoNodeFabricBytesPerSecond, 50e9);
  const ScalingPrediction two_nodes = predict_two_nodes(8, kTokensPerRank, kTCompute, kGradientBytes);
  EXPECT_EQ(two_nodes.ranks, 16);
  // 2 x 15/16 x 75.7 MB / 50 GB/s = 2.84 ms of all-reduce against a 10.3 ms step.
  const double t_comm = 2 * 15.0 / 16 * kGradientBytes / 50e9;
  EXPECT_DOUBLE_EQ(two_nodes.t_comm, t_comm);
  EXPECT_NEAR(two_nodes.t_comm, 2.839e-3, 1e-6);
  EXPECT_DOUBLE_EQ(two_nodes.floor_tokens_per_s, 16 * kTokensPerRank / (kTCompute + t_comm));
  EXPECT_DOUBLE_EQ(two_nodes.ceiling_tokens_per_s, 16 * kTokensPerRank / kTCompute);
  EXPECT_NEAR(two_nodes.floor_tokens_per_s, 9.95e6, 0.01e6);
  EXPECT_NEAR(two_nodes.ceiling_tokens_per_s, 12.688e6, 0.001e6);
}

TEST(GptScalingModel, TwoNodesOfOneGpuEach) {
  // 2k = 2: the ring sends 2 x 1/2 of the gradient, once, over the fabric.
  const ScalingPrediction two_nodes = predict_two_nodes(1, kTokensPerRank, kTCompute, kGradientBytes);
  EXPECT_EQ(two_nodes.ranks, 2);
  EXPECT_DOUBLE_EQ(two_nodes.t_comm, kGradientBytes / 50e9);
}

}  // namespace
}  // namespace roofbench::gpt
