// The kernel lab's double references (lab_reference.hpp) on cases small enough to check by hand.
#include "lab_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace roofbench::gpt::reference {
namespace {

// One position attends to itself only: the output is its value row (plus bias), and the gradient flows to v
// alone (q and k get the softmax's zero derivative).
TEST(GptLabReference, AttentionOfOnePositionIsItsValue) {
  const int H = 2, hd = 4, C = H * hd;
  std::vector<float> qkv(3 * C), bias(3 * C), dout(C);
  for (int i = 0; i < 3 * C; ++i) {
    qkv[i] = 0.1f * static_cast<float>(i) - 0.7f;
    bias[i] = 0.01f * static_cast<float>(i % 5);
  }
  for (int i = 0; i < C; ++i) dout[i] = 1.0f - 0.2f * static_cast<float>(i);
  const AttentionReference r = attention_reference(qkv, bias, dout, 1, H, 1, hd, 10000);
  for (int c = 0; c < C; ++c) {
    EXPECT_NEAR(r.out[c], double{qkv[2 * C + c]} + bias[2 * C + c], 1e-12);
    EXPECT_NEAR(r.dqkv[2 * C + c], dout[c], 1e-12);
    EXPECT_NEAR(r.dqkv[c], 0.0, 1e-12);
    EXPECT_NEAR(r.dqkv[C + c], 0.0, 1e-12);
  }
}

TEST(GptLabReference, BiasGeluAndItsGradient) {
  const std::vector<float> z = {0.0f, 1.0f, -2.0f, 0.5f}, bias = {0.5f, -1.0f}, dout = {1.0f, 2.0f, -1.0f, 0.5f};
  const BiasGeluReference r = bias_gelu_reference(z, bias, dout, 2, 2);
  auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  EXPECT_DOUBLE_EQ(r.pre[0], 0.5);
  EXPECT_DOUBLE_EQ(r.pre[1], 0.0);
  EXPECT_DOUBLE_EQ(r.out[2], gelu(-1.5));
  EXPECT_DOUBLE_EQ(r.dz[1], 2.0 * 0.5);  // GELU'(0) = 1/2
  // GELU' by central differences at pre = -1.5.
  const double h = 1e-6, numeric = (gelu(-1.5 + h) - gelu(-1.5 - h)) / (2 * h);
  EXPECT_NEAR(r.dz[2], -1.0 * numeric, 1e-8);
  EXPECT_DOUBLE_EQ(r.dbias[0], r.dz[0] + r.dz[2]);
  EXPECT_DOUBLE_EQ(r.dbias[1], r.dz[1] + r.dz[3]);
}

TEST(GptLabReference, FcGelu) {
  // x [2, 3], w [2, 3] (out 2), bias [2]: z = x w^T + bias, then the erf GELU of the double z.
  const std::vector<float> x = {1, 2, 3, -1, 0, 0.5f}, w = {0.5f, -1, 0.25f, 1, 1, 1}, bias = {0.25f, -6};
  const FcGeluReference r = fc_gelu_reference(x, w, bias, 2, 3, 2);
  auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  const double z[4] = {0.5 - 2 + 0.75 + 0.25, 6 - 6.0, -0.5 + 0.125 + 0.25, -0.5 - 6};
  ASSERT_EQ(r.z.size(), 4u);
  for (int e = 0; e < 4; ++e) {
    EXPECT_DOUBLE_EQ(r.z[e], z[e]) << e;
    EXPECT_DOUBLE_EQ(r.gelu[e], gelu(z[e])) << e;
  }
  EXPECT_DOUBLE_EQ(r.gelu[1], 0.0);
}

TEST(GptLabReference, WeightGradientEntry) {
  // dy [3, 2], x [3, 2]: dw(1, 0) = sum_n dy[n, 1] x[n, 0].
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6}, x = {1, -1, 2, -2, 3, -3};
  EXPECT_DOUBLE_EQ(weight_gradient_entry(dy, x, 3, 2, 2, 1, 0), 2 * 1 + 4 * 2 + 6 * 3);
  EXPECT_DOUBLE_EQ(weight_gradient_entry(dy, x, 3, 2, 2, 0, 1), -(1 * 1 + 3 * 2 + 5 * 3));
}

}  // namespace
}  // namespace roofbench::gpt::reference
