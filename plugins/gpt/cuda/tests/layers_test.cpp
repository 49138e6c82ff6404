// Each fused kernel against its eager counterpart or a double-precision CPU computation, on small inputs.
#include <gtest/gtest.h>

#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention_test_util.hpp"
#include "gpu_test_util.hpp"
#include "layers.hpp"
#include "bf16.hpp"
#include "lab_reference.hpp"
#include "reference.hpp"
#include "roofbench/hopper_host.hpp"

namespace roofbench::gpt::cuda {
namespace {

using reference::attention_reference;
using reference::AttentionReference;
using testing::Device;
using testing::FusedAttentionRun;
using testing::from_bf16;
using testing::gelu_double;
using testing::random_floats;
using testing::rel_l2;
using testing::rope_table;
using testing::rounded_to_bf16;
using testing::run_fused_attention;
using testing::to_bf16;

// (N, C): C = 96 and 512 (the model's) take the fused backward, 512 over many chunks of uneven fill;
// C = 100 (not a multiple of 32) the separate column-sum pass.
class GptLayerNorm : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(GptLayerNorm, ForwardBackwardMatchDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const auto [N, C] = GetParam();
  const float eps = 1e-5f;
  const auto x = random_floats(N * C, 1, -2, 3), w = random_floats(C, 2), b = random_floats(C, 3);
  const auto dy = random_floats(N * C, 4);
  std::vector<double> y_ref(N * C), dx_ref(N * C), dw_ref(C, 0), db_ref(C, 0);
  for (int n = 0; n < N; ++n) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; ++c) mean += x[n * C + c];
    mean /= C;
    for (int c = 0; c < C; ++c) var += (x[n * C + c] - mean) * (x[n * C + c] - mean);
    const double rstd = 1 / std::sqrt(var / C + eps);
    double mean_g = 0, mean_g_xhat = 0;
    for (int c = 0; c < C; ++c) {
      const double xhat = (x[n * C + c] - mean) * rstd, g = double{dy[n * C + c]} * w[c];
      y_ref[n * C + c] = xhat * w[c] + b[c];
      mean_g += g / C;
      mean_g_xhat += g * xhat / C;
      dw_ref[c] += dy[n * C + c] * xhat;
      db_ref[c] += dy[n * C + c];
    }
    for (int c = 0; c < C; ++c) {
      const double xhat = (x[n * C + c] - mean) * rstd;
      dx_ref[n * C + c] = rstd * (double{dy[n * C + c]} * w[c] - mean_g - xhat * mean_g_xhat);
    }
  }
  Device dev;
  float *d_x = dev.upload(x), *d_w = dev.upload(w), *d_b = dev.upload(b), *d_dy = dev.upload(dy);
  float *d_y = dev.alloc<float>(N * C), *d_mean = dev.alloc<float>(N), *d_rstd = dev.alloc<float>(N);
  float *d_dx = dev.alloc<float>(N * C), *d_dw = dev.alloc<float>(C), *d_db = dev.alloc<float>(C);
  float* partials = dev.alloc<float>(layernorm_partials_floats(N, C));
  float* d_dx_sum = dev.alloc<float>(C);
  layernorm_forward(d_y, d_mean, d_rstd, d_x, d_w, d_b, N, C, eps, nullptr);
  layernorm_backward(d_dx, d_dw, d_db, d_dy, d_x, d_mean, d_rstd, d_w, N, C, 0.0f, partials, nullptr, nullptr,
                     d_dx_sum);
  // dx's column sums against those of the double dx, each to the scale of its column's sum of |dx| (the
  // terms cancel, so a relative error of the sum itself would be noise).
  std::vector<double> dx_sum_ref(C, 0), dx_abs_sum(C, 0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      dx_sum_ref[c] += dx_ref[n * C + c];
      dx_abs_sum[c] += std::abs(dx_ref[n * C + c]);
    }
  const std::vector<float> dx_sum = Device::download(d_dx_sum, C);
  for (int c = 0; c < C; ++c) EXPECT_NEAR(dx_sum[c], dx_sum_ref[c], 1e-5 * dx_abs_sum[c] + 1e-6) << "column " << c;
  EXPECT_LT(rel_l2(Device::download(d_y, N * C), y_ref), 1e-5);
  EXPECT_LT(rel_l2(Device::download(d_dx, N * C), dx_ref), 1e-4);
  EXPECT_LT(rel_l2(Device::download(d_dw, C), dw_ref), 1e-5);
  EXPECT_LT(rel_l2(Device::download(d_db, C), db_ref), 1e-5);

  // The fused residual + LayerNorm equals the residual add followed by the plain LayerNorm.
  const auto branch = random_floats(N * C, 5), bias = random_floats(C, 6);
  std::vector<float> sum(N * C);
  for (int i = 0; i < N * C; ++i) sum[i] = x[i] + branch[i] + bias[i % C];
  float *d_sum_ref = dev.upload(sum), *d_branch = dev.upload(branch), *d_bias = dev.upload(bias);
  float *d_sum = dev.alloc<float>(N * C), *d_y2 = dev.alloc<float>(N * C);
  layernorm_forward(d_y, d_mean, d_rstd, d_sum_ref, d_w, d_b, N, C, eps, nullptr);
  residual_layernorm_forward(d_sum, d_y2, d_mean, d_rstd, d_x, d_branch, d_bias, d_w, d_b, N, C, eps, nullptr);
  EXPECT_LT(rel_l2(Device::download(d_sum, N * C), sum), 1e-7);
  EXPECT_LT(rel_l2(Device::download(d_y2, N * C), Device::download(d_y, N * C)), 1e-6);

  // beta = 1 adds onto what dx held (the fused path's residual gradient): twice the gradient now. The
  // statistics of x first, which the residual check above replaced.
  layernorm_forward(d_y, d_mean, d_rstd, d_x, d_w, d_b, N, C, eps, nullptr);
  layernorm_backward(d_dx, d_dw, d_db, d_dy, d_x, d_mean, d_rstd, d_w, N, C, 1.0f, partials, nullptr);
  std::vector<double> twice(dx_ref);
  for (double& value : twice) value *= 2;
  EXPECT_LT(rel_l2(Device::download(d_dx, N * C), twice), 1e-4);
  // The parameter gradients are the same bits again (a fixed summation order).
  EXPECT_LT(rel_l2(Device::download(d_dw, C), dw_ref), 1e-5);
  const std::vector<float> dw_first = Device::download(d_dw, C);
  layernorm_backward(d_dx, d_dw, d_db, d_dy, d_x, d_mean, d_rstd, d_w, N, C, 0.0f, partials, nullptr);
  EXPECT_EQ(Device::download(d_dw, C), dw_first);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GptLayerNorm,
                         ::testing::Values(std::pair{7, 96}, std::pair{3001, 512}, std::pair{9, 100}),
                         [](const ::testing::TestParamInfo<std::pair<int, int>>& info) {
                           return "N" + std::to_string(info.param.first) + "_C" + std::to_string(info.param.second);
                         });


// The fused attention's keepers (v8 on fp32 tensors; v44 on bf16 ones, v29's forward and v44's backward on a
// device that runs sm_90a code and v9's elsewhere) against the double reference, on T not a multiple of the
// 32-row tile (nor of the 16-row tile), on the largest T, and on a single position. v8's products round their
// inputs to TF32 (10-bit mantissa), like the cuBLAS TF32 GEMMs, so it is held to the TF32 tolerance the trainer
// tests use for logits; the bf16 keeper to bf16's 2e-2. The kernel lab's versions have their own tests
// (plugins/gpt/lab/tests).
constexpr double kTf32Tolerance = 5e-3;

// One forward + backward of the keeper on Elem tensors.
template <typename Elem>
FusedAttentionRun run_keeper(const AttentionShape& shape, const std::vector<float>& qkv, const std::vector<float>& bias,
                             const std::vector<float>& dout, const std::vector<float>& cos,
                             const std::vector<float>& sin) {
  const auto forward = [](auto... args) { fused_attention_forward(args...); };
  const auto backward = [](auto... args) { fused_attention_backward(args...); };
  return run_fused_attention<Elem>(fused_attention_configure, forward, backward, shape, qkv, bias, dout, cos, sin);
}

class GptFusedAttention : public ::testing::TestWithParam<int> {
 protected:
  static constexpr int B = 2, H = 2, hd = 64;
  static constexpr double base = 10000;
  int T() const { return GetParam(); }
  int C() const { return H * hd; }
  int N() const { return B * T(); }

  void SetUp() override {
    qkv_ = random_floats(N() * 3 * C(), 7);
    bias_ = random_floats(3 * C(), 8, -0.2f, 0.2f);
    dout_ = random_floats(N() * C(), 9);
    rope_table(cos_, sin_, T(), hd, base);
  }

  template <typename Elem>
  FusedAttentionRun run(const std::vector<float>& qkv, const std::vector<float>& dout) {
    return run_keeper<Elem>(AttentionShape{B, T(), H, hd}, qkv, bias_, dout, cos_, sin_);
  }

  std::vector<float> qkv_, bias_, dout_, cos_, sin_;
};

// Every output written and finite, within its tolerance of the double reference, and a second run the same
// bits (no atomics: R4's recomputed backward must equal R3's).
void expect_keeper_run(const FusedAttentionRun& run, const FusedAttentionRun& again, const AttentionReference& ref,
                       double tolerance) {
  EXPECT_LT(rel_l2(run.out, ref.out), tolerance);
  EXPECT_LT(rel_l2(run.dqkv, ref.dqkv), tolerance);
  for (const std::vector<float>* tensor : {&run.out, &run.lse, &run.dqkv})
    for (float x : *tensor) ASSERT_TRUE(std::isfinite(x));
  EXPECT_EQ(again.out, run.out);
  EXPECT_EQ(again.lse, run.lse);
  EXPECT_EQ(again.dqkv, run.dqkv);
}

TEST_P(GptFusedAttention, Fp32KeeperMatchesDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionReference ref = attention_reference(qkv_, bias_, dout_, B, H, T(), hd, base);
  const FusedAttentionRun v8 = run<float>(qkv_, dout_);
  expect_keeper_run(v8, run<float>(qkv_, dout_), ref, kTf32Tolerance);
  std::printf("T %d: v8 rel L2 vs double: out %.2e dqkv %.2e\n", T(), rel_l2(v8.out, ref.out),
              rel_l2(v8.dqkv, ref.dqkv));
}

// On bf16-rounded inputs against the double reference on the same rounded values: bf16 operands in the
// products (q, k, v, dout and the probabilities rounded to 8 significant bits).
TEST_P(GptFusedAttention, Bf16KeeperMatchesDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const std::vector<float> qkv = rounded_to_bf16(qkv_), dout = rounded_to_bf16(dout_);
  const AttentionReference ref = attention_reference(qkv, bias_, dout, B, H, T(), hd, base);
  const FusedAttentionRun keeper = run<bf16>(qkv, dout);
  expect_keeper_run(keeper, run<bf16>(qkv, dout), ref, 2e-2);
  std::printf("T %d: %s rel L2 vs double: out %.2e dqkv %.2e\n", T(), bf16_attention_keeper_name(),
              rel_l2(keeper.out, ref.out), rel_l2(keeper.dqkv, ref.dqkv));
}

// The bf16 keeper's name, the rungs' "attention" fact, names the kernels this device runs: v44 (sm_90a) where
// hopper_path_available, else v9's with the reason.
TEST(GptLayers, Bf16KeeperNamesItsKernels) {
  const std::string with = bf16_attention_keeper_name(true), without = bf16_attention_keeper_name(false);
  EXPECT_EQ(with.rfind("v44 ", 0), 0u) << with;
  EXPECT_NE(with.find("sm_90a"), std::string::npos) << with;
  EXPECT_EQ(without.rfind("v9 ", 0), 0u) << without;
  EXPECT_NE(without.find("no sm_90a path"), std::string::npos) << without;
  ROOFBENCH_GPT_REQUIRE_GPU();
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  EXPECT_STREQ(bf16_attention_keeper_name(), bf16_attention_keeper_name(hopper::hopper_path_available(device)));
}

// The keeper's sm_90a fc + GELU (fc_gelu_forward_sm90a) on R2's shape per 64 sequences' worth of rows and a ragged
// one: x w^T against double, and gelu bit for bit gelu_forward_add_bias on that x w^T; its name matches the device.
TEST(GptLayers, Bf16FcGeluKeeperMatchesTheGeluPassOnItsProduct) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  const bool sm90a = hopper::hopper_path_available(device);
  EXPECT_EQ(std::string(bf16_fc_gelu_keeper_name(512)).rfind("sm_90a: ", 0) == 0, sm90a);
  // K not a multiple of 64: the portable pair everywhere.
  EXPECT_EQ(std::string(bf16_fc_gelu_keeper_name(96)).rfind("sm_90a: ", 0), std::string::npos);
  if (!sm90a) GTEST_SKIP() << "no sm_90a path on this device or in this build";
  fc_gelu_forward_sm90a_configure();
  for (const auto& [rows, in, out] : {std::array{1000, 512, 2048}, std::array{333, 128, 200}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out));
    const std::size_t n = static_cast<std::size_t>(rows) * out;
    const auto x = from_bf16(to_bf16(random_floats(static_cast<std::size_t>(rows) * in, 41, -1, 1)));
    const auto w = from_bf16(to_bf16(random_floats(static_cast<std::size_t>(out) * in, 42, -0.2f, 0.2f)));
    Device dev;
    bf16 *xw = dev.upload(to_bf16(std::vector<float>(n, std::nanf("")))), *gelu = dev.alloc<bf16>(n);
    bf16* gelu_pass = dev.alloc<bf16>(n);
    const bf16* bias = dev.upload(to_bf16(random_floats(out, 43, -1, 1)));
    fc_gelu_forward_sm90a(xw, gelu, dev.upload(to_bf16(x)), dev.upload(to_bf16(w)), bias, rows, in, out, nullptr);
    gelu_forward_add_bias(gelu_pass, xw, bias, rows, out, nullptr);
    const auto got = from_bf16(Device::download(xw, n));
    std::vector<double> ref(n);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < out; ++c)
        for (int k = 0; k < in; ++k)
          ref[static_cast<std::size_t>(r) * out + c] +=
              double{x[static_cast<std::size_t>(r) * in + k]} * w[static_cast<std::size_t>(c) * in + k];
    EXPECT_LT(rel_l2(std::vector<double>(got.begin(), got.end()), ref), 4e-3);  // bf16's rounding of each output
    const auto bits = [](const std::vector<bf16>& v) {
      std::vector<std::uint16_t> out(v.size());
      std::memcpy(out.data(), v.data(), v.size() * sizeof(bf16));
      return out;
    };
    EXPECT_EQ(bits(Device::download(gelu, n)), bits(Device::download(gelu_pass, n)));
  }
}

// 70: neither a multiple of 32 nor of 16; 128: the largest T, every tile full; 1: one position, all padding.
INSTANTIATE_TEST_SUITE_P(T, GptFusedAttention, ::testing::Values(70, 128, 1),
                         [](const ::testing::TestParamInfo<int>& info) { return "T" + std::to_string(info.param); });

// The RoPE table's lane-ordered copy (the bf16 keeper's sm_90a backward reads it): lane l of an mma fragment finds
// its 8 cos and 8 sin of row t, pairs l % 4, + 4, .. + 28 as RopeBackFactors's scalar loads read them, side by side
// at rope_lane_ordered_at(t, l % 4); another head dim is refused.
TEST(GptLayers, LaneOrderedRopeTableHoldsEachLanesPairsSideBySide) {
  constexpr int T = 7, hd = 64;
  std::vector<float> cos, sin;
  rope_table(cos, sin, T, hd, 10000);
  const std::vector<float> ordered = rope_lane_ordered(cos, sin, hd);
  ASSERT_EQ(ordered.size(), 2 * cos.size());
  for (int t = 0; t < T; ++t)
    for (int lane = 0; lane < 32; ++lane)
      for (int n = 0; n < hd / 8; ++n) {
        const int pair = (8 * n + 2 * (lane % 4)) / 2, at = rope_lane_ordered_at(t, lane % 4);
        EXPECT_EQ(ordered[at + n], cos[t * hd / 2 + pair]) << t << " " << lane << " " << n;
        EXPECT_EQ(ordered[at + hd / 8 + n], sin[t * hd / 2 + pair]) << t << " " << lane << " " << n;
      }
  std::vector<float> narrow_cos, narrow_sin;
  rope_table(narrow_cos, narrow_sin, 2 * T, 32, 10000);  // as many floats as a [T, 32] table's
  EXPECT_THROW(rope_lane_ordered(narrow_cos, narrow_sin, 32), Error);
}

// On the sm_90a path the keeper's backward refuses a RoPE table without its lane-ordered copy before it launches,
// saying so (its operands' checks, which would also refuse the null tensors, come after).
TEST(GptLayers, Bf16KeeperRefusesATableWithoutItsLaneOrderedCopy) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  if (!hopper::hopper_path_available(device)) GTEST_SKIP() << "no sm_90a path on this device";
  fused_attention_configure();
  const AttentionShape shape{2, 128, 2, 64};
  Device dev;
  const float* table = dev.alloc<float>(128 * 32);
  const RopeTable without{table, table, nullptr};
  try {
    fused_attention_sm90a_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, without, shape,
                                   nullptr);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lane-ordered"), std::string::npos) << e.what();
  }
}

TEST(GptLayers, FusedAttentionRejectsShapes) {
  EXPECT_THROW(check_fused_attention_shape(AttentionShape{2, 129, 2, 64}), Error);
  EXPECT_THROW(check_fused_attention_shape(AttentionShape{2, 70, 2, 32}), Error);
  EXPECT_NO_THROW(check_fused_attention_shape(AttentionShape{2, 128, 2, 64}));
}

// The shapes gelu_forward_add_bias and gelu_backward_add_bias refuse, by their own check before any CUDA
// call (so no device is needed, and the message tells the check's refusal from a failed launch): cols 0
// once divided the forward's launch by zero (cols / 8 vectors a row).
template <typename F>
void expect_refused_shape(F call) {
  try {
    call();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_bias needs"), std::string::npos) << e.what();
  }
}

TEST(GptLayers, Bf16GeluAddBiasRejectsShapes) {
  alignas(16) static bf16 buffer[64];
  float* partials = nullptr;
  float* dbias = nullptr;
  for (const auto& [rows, cols] : {std::pair{8, 0}, std::pair{8, 12}, std::pair{-1, 8}}) {
    SCOPED_TRACE(cols);
    expect_refused_shape([&, rows, cols] { gelu_forward_add_bias(buffer, buffer, buffer, rows, cols, nullptr); });
    expect_refused_shape(
        [&, rows, cols] { gelu_backward_add_bias(buffer, dbias, buffer, buffer, buffer, rows, cols, partials, nullptr); });
  }
  expect_refused_shape([&] { gelu_forward_add_bias(buffer, buffer, nullptr, 8, 8, nullptr); });
  expect_refused_shape([&] { gelu_backward_add_bias(buffer, dbias, buffer, buffer, nullptr, 8, 8, partials, nullptr); });
  expect_refused_shape([&] { gelu_forward_add_bias(buffer + 1, buffer, buffer, 8, 8, nullptr); });  // out misaligned
}

TEST(GptLayers, FusedCrossEntropyMatchesEagerAndDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int N = 50, V = 28;
  const auto logits = random_floats(N * V, 10, -3, 3);
  std::vector<std::uint8_t> targets(N);
  for (int n = 0; n < N; ++n) targets[n] = static_cast<std::uint8_t>((n * 7) % V);
  std::vector<double> losses_ref(N), dlogits_ref(N * V);
  for (int n = 0; n < N; ++n) {
    double max = -1e300, sum = 0;
    for (int v = 0; v < V; ++v) max = std::max(max, double{logits[n * V + v]});
    for (int v = 0; v < V; ++v) sum += std::exp(logits[n * V + v] - max);
    const double lse = max + std::log(sum);
    losses_ref[n] = lse - logits[n * V + targets[n]];
    for (int v = 0; v < V; ++v)
      dlogits_ref[n * V + v] = (std::exp(logits[n * V + v] - lse) - (v == targets[n])) / N;
  }
  Device dev;
  float* d_logits = dev.upload(logits);
  std::uint8_t* d_targets = dev.upload(targets);
  float *logprobs = dev.alloc<float>(N * V), *eager_losses = dev.alloc<float>(N), *eager_d = dev.alloc<float>(N * V);
  float *fused_losses = dev.alloc<float>(N), *fused_d = dev.alloc<float>(N * V);
  log_softmax_forward(logprobs, d_logits, N, V, nullptr);
  nll_forward(eager_losses, logprobs, d_targets, N, V, nullptr);
  cross_entropy_backward(eager_d, logprobs, d_targets, N, V, nullptr);
  fused_cross_entropy(fused_losses, fused_d, d_logits, d_targets, N, V, nullptr);
  EXPECT_LT(rel_l2(Device::download(eager_losses, N), losses_ref), 1e-5);
  EXPECT_LT(rel_l2(Device::download(fused_losses, N), losses_ref), 1e-5);
  EXPECT_LT(rel_l2(Device::download(eager_d, N * V), dlogits_ref), 1e-5);
  EXPECT_LT(rel_l2(Device::download(fused_d, N * V), dlogits_ref), 1e-5);

  // The mean loss lands in the history at the slot of step counter - 1.
  float *loss = dev.alloc<float>(1), *history = dev.alloc<float>(8);
  unsigned long long* counter = dev.upload(std::vector<unsigned long long>{3});
  mean_loss(loss, history, 8, counter, fused_losses, N, nullptr);
  double mean = 0;
  for (double l : losses_ref) mean += l / N;
  EXPECT_NEAR(Device::download(history, 8)[2], mean, 1e-5 * mean);
}

// R1's 16-byte elementwise kernels against the scalar ones and double: GELU's backward fused with its bias
// gradient, and the four-column bias-gradient sums (the lab's bias + GELU forwards: elementwise_versions_test). 300 rows: more than one 256-row
// chunk, the last one partial; 136 columns: a multiple of 4, not of the 128 columns of a block; 30 columns:
// not a multiple of 4, the scalar fallback.
class GptVectorizedElementwise : public ::testing::TestWithParam<int> {};

TEST_P(GptVectorizedElementwise, MatchScalarAndDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int rows = 300, cols = GetParam(), n = rows * cols;
  const auto z = random_floats(n, 21, -4, 4), dout = random_floats(n, 22);
  auto gelu_derivative = [](double x) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) * 0.39894228040143268;  // x pdf(x)
  };
  std::vector<double> dz_ref(n), dbias_ref(cols, 0), colsum_ref(cols, 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int i = r * cols + c;
      dz_ref[i] = double{dout[i]} * gelu_derivative(z[i]);
      dbias_ref[c] += dz_ref[i];
      colsum_ref[c] += dout[i];
    }

  Device dev;
  float* partials = dev.alloc<float>(column_partials_floats(rows, cols));
  float* d_dout = dev.upload(dout);

  // Backward: the fused GELU backward + bias gradient against gelu_backward + column_sum.
  float *d_z = dev.upload(z), *dz_fused = dev.alloc<float>(n), *dz_plain = dev.alloc<float>(n);
  float *dbias_fused = dev.alloc<float>(cols), *dbias_plain = dev.alloc<float>(cols);
  ROOFBENCH_CUDA(cudaMemset(dz_fused, 0xff, n * sizeof(float)));  // NaN: every element must be written
  gelu_backward_bias_grad(dz_fused, dbias_fused, d_dout, d_z, rows, cols, partials, nullptr);
  gelu_backward(dz_plain, d_dout, d_z, static_cast<std::size_t>(n), nullptr);
  column_sum(dbias_plain, dz_plain, rows, cols, partials, nullptr);
  const auto dz_f = Device::download(dz_fused, n), db_f = Device::download(dbias_fused, cols);
  for (float x : dz_f) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(rel_l2(dz_f, Device::download(dz_plain, n)), 1e-6);
  EXPECT_LT(rel_l2(db_f, Device::download(dbias_plain, cols)), 1e-5);
  EXPECT_LT(rel_l2(dz_f, dz_ref), 1e-5);
  EXPECT_LT(rel_l2(db_f, dbias_ref), 1e-5);

  // The four-column sums against column_sum and double.
  float *sum_vec = dev.alloc<float>(cols), *sum_plain = dev.alloc<float>(cols);
  column_sum_vec4(sum_vec, d_dout, rows, cols, partials, nullptr);
  const auto s_vec = Device::download(sum_vec, cols);
  column_sum(sum_plain, d_dout, rows, cols, partials, nullptr);
  EXPECT_LT(rel_l2(s_vec, Device::download(sum_plain, cols)), 1e-5);
  EXPECT_LT(rel_l2(s_vec, colsum_ref), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cols, GptVectorizedElementwise, ::testing::Values(136, 2048, 30),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "C" + std::to_string(info.param);
                         });

TEST(GptLayers, WgradScratch) {
  // v1 transposes nothing, v3 the narrower of x [N, in] and dy [N, out] (dy on a tie).
  EXPECT_EQ(wgrad_scratch_floats(WgradLayout::v1, 256, 64, 96), 0u);
  EXPECT_EQ(wgrad_scratch_floats(WgradLayout::v3, 256, 64, 96), 256u * 64);
  EXPECT_EQ(wgrad_scratch_floats(WgradLayout::v3, 256, 96, 64), 256u * 64);
  EXPECT_EQ(wgrad_scratch_floats(WgradLayout::v3, 256, 64, 64), 256u * 64);
}

TEST(GptLayers, TransposeIsExact) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int rows = 77, cols = 45;  // neither a multiple of the 32 x 32 tile
  const auto in = random_floats(rows * cols, 41);
  std::vector<float> expected(rows * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) expected[c * rows + r] = in[r * cols + c];
  Device dev;
  // 32 floats past the end, poisoned with NaN like the rest: the kernel must write exactly rows * cols.
  float* out = dev.alloc<float>(rows * cols + 32);
  ROOFBENCH_CUDA(cudaMemset(out, 0xff, (rows * cols + 32) * sizeof(float)));
  transpose(out, dev.upload(in), rows, cols, nullptr);
  const auto got = Device::download(out, rows * cols + 32);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + rows * cols), expected);
  for (int i = rows * cols; i < rows * cols + 32; ++i) EXPECT_TRUE(std::isnan(got[i])) << "written past the end: " << i;
}

// A linear layer's backward in the rungs' weight-gradient layouts against double: dw = dy^T x, dx = dy w.
// in < out (v3 transposes x: cuBLAS "tt"), in > out (v3 transposes dy: "nn"), and in == out (v3 takes dy)
// on 200 rows, not a multiple of the transpose's 32-row tile. The lab's v2: wgrad_versions_test.
struct LinearShape {
  int N, in, out;
};

class GptWeightGradient : public ::testing::TestWithParam<LinearShape> {};

TEST_P(GptWeightGradient, EveryLayoutMatchesDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const auto [N, in, out] = GetParam();
  const auto dy = random_floats(N * out, 31), x = random_floats(N * in, 32), w = random_floats(out * in, 33);
  std::vector<double> dw_ref(out * in, 0), dx_ref(N * in, 0);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) {
        dw_ref[o * in + i] += double{dy[n * out + o]} * x[n * in + i];
        dx_ref[n * in + i] += double{dy[n * out + o]} * w[o * in + i];
      }
  Device dev;
  cublasHandle_t raw = nullptr;
  ROOFBENCH_CUBLAS(cublasCreate(&raw));
  const std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, decltype(&cublasDestroy)> handle(raw, cublasDestroy);
  const float *d_dy = dev.upload(dy), *d_x = dev.upload(x), *d_w = dev.upload(w);
  std::vector<float> v1_dw;
  for (WgradLayout layout : {WgradLayout::v1, WgradLayout::v3}) {
    const std::string name = layout == WgradLayout::v1 ? "v1" : "v3";
    const std::size_t scratch_floats = wgrad_scratch_floats(layout, N, in, out);
    float* scratch = scratch_floats > 0 ? dev.alloc<float>(scratch_floats) : nullptr;
    float *dw = dev.alloc<float>(out * in), *dx = dev.alloc<float>(N * in);
    ROOFBENCH_CUDA(cudaMemset(dw, 0xff, out * in * sizeof(float)));  // NaN: every element must be written
    ROOFBENCH_CUDA(cudaMemset(dx, 0xff, N * in * sizeof(float)));
    linear_backward_kmajor(handle.get(), dx, dw, d_dy, d_x, d_w, N, in, out, layout, scratch);
    const auto got_dw = Device::download(dw, out * in);
    EXPECT_LT(rel_l2(got_dw, dw_ref), kTf32Tolerance) << name;
    EXPECT_LT(rel_l2(Device::download(dx, N * in), dx_ref), kTf32Tolerance) << name;
    if (layout == WgradLayout::v1) v1_dw = got_dw;

    // beta_dw 1 accumulates onto what dw holds (twice the gradient now), through the same transpose.
    linear_backward_kmajor(handle.get(), nullptr, dw, d_dy, d_x, d_w, N, in, out, layout, scratch, 0, 1);
    std::vector<double> twice(dw_ref);
    for (double& value : twice) value *= 2;
    EXPECT_LT(rel_l2(Device::download(dw, out * in), twice), kTf32Tolerance) << name;
  }
  // v1 is linear_backward's own GEMM: the same bits.
  float* dw = dev.alloc<float>(out * in);
  linear_backward(handle.get(), nullptr, dw, d_dy, d_x, d_w, N, in, out);
  EXPECT_EQ(Device::download(dw, out * in), v1_dw);
  EXPECT_THROW(linear_backward_kmajor(handle.get(), nullptr, dw, d_dy, d_x, d_w, N, in, out, WgradLayout::v3, nullptr),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GptWeightGradient,
                         ::testing::Values(LinearShape{256, 64, 96}, LinearShape{256, 96, 64},
                                           LinearShape{200, 64, 64}),
                         [](const ::testing::TestParamInfo<LinearShape>& info) {
                           return "N" + std::to_string(info.param.N) + "_in" + std::to_string(info.param.in) +
                                  "_out" + std::to_string(info.param.out);
                         });

// Every drawn row is a window of T + 1 corpus tokens: its inputs the first T, its targets the last T; the draw
// advances its counter by one, so two draws differ, and a draw from the same count is the same batch (every block
// read the same step); rows of one draw start at different places.
TEST(GptLayers, DrawBatchTakesWindowsOfTheCorpusAndAdvancesItsCounter) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  constexpr int kBatch = 37, kT = 200;  // T above the block's 128 threads
  std::mt19937 rng(11);
  std::vector<std::uint8_t> corpus(5000);
  for (auto& token : corpus) token = static_cast<std::uint8_t>(rng() % 65);
  Device dev;
  const std::uint8_t* d_corpus = dev.upload(corpus);
  auto* counter = dev.upload(std::vector<unsigned long long>{5});
  std::uint8_t *inputs = dev.alloc<std::uint8_t>(kBatch * kT), *targets = dev.alloc<std::uint8_t>(kBatch * kT);
  std::vector<std::vector<std::uint8_t>> draws;
  for (int draw = 0; draw < 2; ++draw) {
    draw_batch(inputs, targets, d_corpus, corpus.size(), kBatch, kT, 11, counter, nullptr);
    const auto in = Device::download(inputs, kBatch * kT), out = Device::download(targets, kBatch * kT);
    std::vector<std::size_t> starts;
    for (int row = 0; row < kBatch; ++row) {
      std::vector<std::uint8_t> window(in.begin() + row * kT, in.begin() + (row + 1) * kT);
      window.push_back(out[(row + 1) * kT - 1]);
      ASSERT_TRUE(std::equal(in.begin() + row * kT + 1, in.begin() + (row + 1) * kT, out.begin() + row * kT))
          << "draw " << draw << ", row " << row << ": targets are not the inputs one token on";
      const auto at = std::search(corpus.begin(), corpus.end(), window.begin(), window.end());
      ASSERT_NE(at, corpus.end()) << "draw " << draw << ", row " << row << " is no window of the corpus";
      starts.push_back(static_cast<std::size_t>(at - corpus.begin()));
    }
    std::sort(starts.begin(), starts.end());
    EXPECT_GE(std::unique(starts.begin(), starts.end()) - starts.begin(), kBatch - 2) << "draw " << draw;
    draws.push_back(in);
  }
  EXPECT_NE(draws[0], draws[1]);
  EXPECT_EQ(Device::download(counter, 1)[0], 7u);
  const unsigned long long five = 5;
  ROOFBENCH_CUDA(cudaMemcpy(counter, &five, sizeof five, cudaMemcpyHostToDevice));
  draw_batch(inputs, targets, d_corpus, corpus.size(), kBatch, kT, 11, counter, nullptr);
  EXPECT_EQ(Device::download(inputs, kBatch * kT), draws[0]);
}

// x's rows are wte's rows of the tokens, by 16-byte pieces (C = 512) and by floats (C = 6, and C = 512 into an x
// that is not 16-byte aligned).
TEST(GptLayers, EmbeddingForwardGathersTheTokensRows) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  constexpr int kN = 300, kV = 65;
  for (const auto& [C, x_offset] : {std::pair{512, 0}, std::pair{6, 0}, std::pair{512, 1}}) {
    const auto wte = random_floats(std::size_t(kV) * C, 43);
    std::vector<std::uint8_t> tokens(kN);
    for (int n = 0; n < kN; ++n) tokens[n] = static_cast<std::uint8_t>((n * 31 + 7) % kV);
    Device dev;
    float* x = dev.alloc<float>(std::size_t(kN) * C + 1) + x_offset;
    embedding_forward(x, dev.upload(tokens), dev.upload(wte), kN, C, nullptr);
    const auto got = Device::download(x, std::size_t(kN) * C);
    for (int n = 0; n < kN; ++n)
      ASSERT_TRUE(std::equal(got.begin() + n * C, got.begin() + (n + 1) * C, wte.begin() + tokens[n] * C))
          << "C " << C << ", x offset " << x_offset << ", row " << n;
  }
}

// The gathered embedding backward adds dx's rows by token onto dwte's share: against double sums, and against
// the one-hot GEMM (embedding_backward), at R3's width and vocabulary, a width under one block's 64 pieces, one a
// piece over them (the second block nearly idle), the largest vocabulary a block's sums hold (V 48), and rows that
// leave a chunk and the rows in flight a tail. The partials are poisoned before each run (a piece left unwritten
// shows), sized for the chunks and dwte's copy, and the second run gives the same bits. A vocabulary one too large
// and a misaligned dx are refused.
TEST(GptLayers, EmbeddingBackwardGatherSumsTheRowsByToken) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  EXPECT_FALSE(embedding_gather_fits(512, 49));
  EXPECT_FALSE(embedding_gather_fits(6, 28));
  EXPECT_EQ(embedding_gather_partials_floats(1003, 512, 28), std::size_t(4 + 1) * 28 * 512);
  EXPECT_THROW(embedding_backward_gather(nullptr, nullptr, nullptr, nullptr, 256, 512, 49, nullptr), Error);
  cublasHandle_t raw = nullptr;
  ROOFBENCH_CUBLAS(cublasCreate(&raw));
  const std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, decltype(&cublasDestroy)> cublas(raw, cublasDestroy);
  for (const auto& [N, C, V] : {std::tuple{1003, 512, 28}, std::tuple{300, 100, 28}, std::tuple{517, 260, 28},
                                std::tuple{2053, 64, 48}}) {
    ASSERT_TRUE(embedding_gather_fits(C, V));
    const auto dx = random_floats(std::size_t(N) * C, 44), share = random_floats(std::size_t(V) * C, 45);
    std::vector<std::uint8_t> tokens(N);
    for (int n = 0; n < N; ++n) tokens[n] = static_cast<std::uint8_t>((n * 37 + n / 5) % V);
    std::vector<double> want(share.begin(), share.end());
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) want[std::size_t(tokens[n]) * C + c] += dx[std::size_t(n) * C + c];
    Device dev;
    float* d_dx = dev.upload(dx);
    const std::uint8_t* d_tokens = dev.upload(tokens);
    const std::size_t partial_floats = embedding_gather_partials_floats(N, C, V);
    float* partials = dev.alloc<float>(partial_floats);
    const auto gathered = [&] {
      float* dwte = dev.upload(share);
      ROOFBENCH_CUDA(cudaMemset(partials, 0xff, partial_floats * sizeof(float)));
      embedding_backward_gather(dwte, d_dx, d_tokens, partials, N, C, V, nullptr);
      return Device::download(dwte, share.size());
    };
    const std::vector<float> first = gathered();
    float* gemm_dwte = dev.upload(share);
    embedding_backward(raw, gemm_dwte, d_dx, d_tokens, dev.alloc<float>(std::size_t(N) * V), N, C, V, nullptr);
    const std::vector<float> gemm = Device::download(gemm_dwte, share.size());
    const double error = relative_l2_error(first.data(), want.data(), want.size());
    std::printf("N %d C %d V %d: gathered vs double %.2e, one-hot GEMM vs double %.2e\n", N, C, V, error,
                relative_l2_error(gemm.data(), want.data(), want.size()));
    EXPECT_LT(error, 1e-6) << "N " << N << " C " << C << " V " << V;  // NaN (a poisoned partial) fails too
    EXPECT_LT(relative_l2_error(first.data(), gemm.data(), gemm.size()), 1e-6);
    const std::vector<float> second = gathered();
    EXPECT_EQ(std::memcmp(second.data(), first.data(), first.size() * sizeof(float)), 0)
        << "N " << N << " C " << C << " V " << V;
    EXPECT_THROW(embedding_backward_gather(dev.upload(share), d_dx + 1, d_tokens, partials, N - 1, C, V, nullptr),
                 Error);
  }
}

// The per-step bf16 weight copy rounds exactly as the host's bf16.hpp does (nearest, ties to even), also
// on a length that leaves a tail after the last four-element group.
TEST(GptLayers, CastToBf16RoundsLikeTheHost) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  std::vector<float> x = random_floats(1003, 41, -100, 100);
  x[0] = 1.0f + 0x1p-8f;  // a tie
  x[1] = 1.0f + 3 * 0x1p-8f;
  Device dev;
  const float* d_x = dev.upload(x);
  bf16* d_y = dev.alloc<bf16>(x.size());
  cast_to_bf16(d_y, d_x, x.size(), nullptr);
  const auto y = Device::download(d_y, x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, &y[i], sizeof bits);
    ASSERT_EQ(bits, bf16_bits_from_float(x[i])) << i;
  }
}

namespace {
double gelu_derivative_double(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) * 0.39894228040143268;
}
}  // namespace

// fc with its bias in cuBLASLt's epilogue (R1: fp32 on TF32 tensor cores; bf16: lab_fc_gelu_bf16 v1) against double,
// on 200 rows (not a multiple of any tile) and then GELU's vectorized forward on its output (bf16: R2-R4's table
// pass with a zero bias, which leaves the bf16 pre-activation as it is).
TEST(GptLayers, LinearForwardBiasAndGeluMatchDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int N = 200, in = 64, out = 136;
  auto x = random_floats(N * in, 51), w = random_floats(out * in, 52, -0.2f, 0.2f), bias = random_floats(out, 53);
  Device dev;
  cublasLtHandle_t raw = nullptr;
  ROOFBENCH_CUBLASLT(cublasLtCreate(&raw));
  const std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, decltype(&cublasLtDestroy)> lt(raw, cublasLtDestroy);
  const LtWorkspace workspace{dev.alloc<char>(1u << 22), 1u << 22};
  const std::size_t n = static_cast<std::size_t>(N) * out;
  for (const bool bf16_operands : {false, true}) {
    SCOPED_TRACE(bf16_operands ? "bf16" : "fp32");
    if (bf16_operands)  // the reference sees the operands as the GPU does
      for (auto* v : {&x, &w, &bias})
        for (float& e : *v) e = round_to_bf16(e);
    std::vector<double> y_ref(n), gelu_ref(n);
    for (int r = 0; r < N; ++r)
      for (int o = 0; o < out; ++o) {
        double sum = bias[o];
        for (int i = 0; i < in; ++i) sum += double{x[r * in + i]} * w[o * in + i];
        y_ref[r * out + o] = sum;
        gelu_ref[r * out + o] = gelu_double(sum);
      }
    std::vector<float> y, g;
    if (bf16_operands) {
      bf16 *d_y = dev.alloc<bf16>(n), *d_g = dev.alloc<bf16>(n);
      linear_forward_bias(LtContext{lt.get(), workspace, nullptr}, CUDA_R_16BF, d_y, dev.upload(to_bf16(x)),
                          dev.upload(to_bf16(w)), dev.upload(to_bf16(bias)), N, in, out);
      gelu_forward_add_bias(d_g, d_y, dev.upload(to_bf16(std::vector<float>(out, 0.0f))), N, out, nullptr);
      y = from_bf16(Device::download(d_y, n));
      g = from_bf16(Device::download(d_g, n));
      // GELU of the stored (rounded) pre-activation, rounded: what the host computes from y but for the rare
      // value whose fp32 GELU and double GELU round to neighbouring bf16 values. So every output is that
      // value or its bf16 neighbour, and neighbours are rare (925286e counted 1 in 27200): a GELU of another form
      // (tanh's, some 1e-4 off) would move a few percent of the values to a neighbour.
      std::size_t neighbours = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float expected = round_to_bf16(static_cast<float>(gelu_double(y[i])));
        if (g[i] == expected) continue;
        const int apart = std::abs(int(bf16_bits_from_float(g[i])) - int(bf16_bits_from_float(expected)));
        ASSERT_EQ(apart, 1) << "element " << i << ": " << g[i] << " against " << expected;
        ++neighbours;
      }
      EXPECT_LE(neighbours, n / 1000) << "bf16 neighbours of the host's GELU";
    } else {
      float *d_y = dev.alloc<float>(n), *d_g = dev.alloc<float>(n + 3);
      ROOFBENCH_CUDA(cudaMemset(d_g, 0xff, (n + 3) * sizeof(float)));
      linear_forward_bias(LtContext{lt.get(), workspace, nullptr}, CUDA_R_32F, d_y, dev.upload(x), dev.upload(w),
                          dev.upload(bias), N, in, out);
      gelu_forward_vectorized(d_g, d_y, n - 3, nullptr);  // a length with a tail past the last whole vector
      y = Device::download(d_y, n);
      const auto all = Device::download(d_g, n + 3);
      g.assign(all.begin(), all.begin() + static_cast<long>(n - 3));
      for (std::size_t i = n - 3; i < n + 3; ++i) EXPECT_TRUE(std::isnan(all[i])) << "written past the end: " << i;
      std::vector<double> from_y(n - 3);
      for (std::size_t i = 0; i + 3 < n; ++i) from_y[i] = gelu_double(y[i]);
      EXPECT_LT(rel_l2(g, from_y), 1e-6);
    }
    EXPECT_LT(rel_l2(y, y_ref), bf16_operands ? 1e-2 : 2e-3);
  }
}

// R2-R4's 16-byte GELU backward with fc's bias gradient (8 bf16 columns a thread; a zero bias, so GELU' of z
// as stored) and the bf16 column sums, against double on the same bf16 inputs: 300 rows (one partial chunk), 2048 and 136 columns (136: a
// multiple of 8, not of a block's 256).
TEST(GptLayers, Bf16GeluBackwardAndColumnSumMatchDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  for (const int cols : {2048, 136}) {
    SCOPED_TRACE(cols);
    const int rows = 300;
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    auto z = random_floats(n, 61, -4, 4), dout = random_floats(n, 62);
    for (auto* v : {&z, &dout})
      for (float& e : *v) e = round_to_bf16(e);
    std::vector<double> dz_ref(n), dbias_ref(cols, 0), colsum_ref(cols, 0);
    for (std::size_t i = 0; i < n; ++i) {
      dz_ref[i] = double{dout[i]} * gelu_derivative_double(z[i]);
      dbias_ref[i % cols] += dz_ref[i];
      colsum_ref[i % cols] += dout[i];
    }
    Device dev;
    float* partials = dev.alloc<float>(column_partials_floats(rows, cols));
    const bf16 *d_z = dev.upload(to_bf16(z)), *d_dout = dev.upload(to_bf16(dout));
    bf16* d_dz = dev.alloc<bf16>(n);
    float *d_dbias = dev.alloc<float>(cols), *d_colsum = dev.alloc<float>(cols);
    const bf16* zero_bias = dev.upload(to_bf16(std::vector<float>(cols, 0.0f)));
    gelu_backward_add_bias(d_dz, d_dbias, d_dout, d_z, zero_bias, rows, cols, partials, nullptr);
    column_sum(d_colsum, d_dout, rows, cols, partials, nullptr);
    EXPECT_LT(rel_l2(from_bf16(Device::download(d_dz, n)), dz_ref), 1e-2);
    EXPECT_LT(rel_l2(Device::download(d_dbias, cols), dbias_ref), 1e-5);
    EXPECT_LT(rel_l2(Device::download(d_colsum, cols), colsum_ref), 1e-5);
    // In place over dout, as R4 runs it: the same bits and the same bias gradient.
    bf16* d_inplace = dev.upload(to_bf16(dout));
    float* d_inplace_dbias = dev.alloc<float>(cols);
    gelu_backward_add_bias(d_inplace, d_inplace_dbias, d_inplace, d_z, zero_bias, rows, cols, partials, nullptr);
    const auto bits = [n](const bf16* p) {
      std::vector<unsigned short> out(n);
      const std::vector<bf16> values = Device::download(p, n);
      std::memcpy(out.data(), values.data(), n * sizeof(unsigned short));
      return out;
    };
    EXPECT_EQ(bits(d_inplace), bits(d_dz));
    EXPECT_EQ(Device::download(d_inplace_dbias, cols), Device::download(d_dbias, cols));
  }
}

// linear_backward's bias gradient from dw's GEMM (cuBLASLt's BGRADB epilogue, lab_qkv_wgrad_bf16 v2): dy's column
// sums and dw against double on the same bf16 inputs, out = 3 in as qkv's, over 1000 rows (not a multiple of a tile).
TEST(GptLayers, Bf16WeightGradientSumsTheBiasGradientInItsEpilogue) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int N = 1000, in = 64, out = 192;
  const std::size_t rows = N;
  auto dy = random_floats(rows * out, 71), x = random_floats(rows * in, 72);
  for (auto* v : {&dy, &x})
    for (float& e : *v) e = round_to_bf16(e);
  std::vector<double> dw_ref(static_cast<std::size_t>(out) * in, 0), dbias_ref(out, 0);
  for (int r = 0; r < N; ++r)
    for (int o = 0; o < out; ++o) {
      dbias_ref[o] += dy[r * out + o];
      for (int i = 0; i < in; ++i) dw_ref[o * in + i] += double{dy[r * out + o]} * x[r * in + i];
    }
  Device dev;
  cublasLtHandle_t raw = nullptr;
  ROOFBENCH_CUBLASLT(cublasLtCreate(&raw));
  const std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, decltype(&cublasLtDestroy)> lt(raw, cublasLtDestroy);
  const LtWorkspace workspace{dev.alloc<char>(1u << 22), 1u << 22};
  float *d_dw = dev.alloc<float>(dw_ref.size()), *d_dbias = dev.alloc<float>(out);
  ROOFBENCH_CUDA(cudaMemset(d_dbias, 0xff, out * sizeof(float)));  // NaN until written
  linear_backward(LtContext{lt.get(), workspace, nullptr}, nullptr, CUDA_R_16BF, d_dw, dev.upload(to_bf16(dy)),
                  dev.upload(to_bf16(x)), nullptr, N, in, out, 0.0f, GradientOrder::input_first, d_dbias);
  EXPECT_LT(rel_l2(Device::download(d_dbias, out), dbias_ref), 1e-5);
  EXPECT_LT(rel_l2(Device::download(d_dw, dw_ref.size()), dw_ref), 1e-5);
}

TEST(GptLayers, AdamWMatchesReference) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const std::size_t n = 1000;
  const int step = 3;
  const auto params = random_floats(n, 11), grads = random_floats(n, 12), m = random_floats(n, 13, -0.1f, 0.1f);
  const auto v = random_floats(n, 14, 0, 0.01f);
  std::vector<double> p_ref(params.begin(), params.end()), m_ref(m.begin(), m.end()), v_ref(v.begin(), v.end());
  const std::vector<double> g_ref(grads.begin(), grads.end());
  const AdamW opt;
  reference::adamw_step(p_ref, g_ref, m_ref, v_ref, step, opt);
  Device dev;
  float *d_p = dev.upload(params), *d_g = dev.upload(grads), *d_m = dev.upload(m), *d_v = dev.upload(v);
  unsigned long long* counter = dev.upload(std::vector<unsigned long long>{step});
  adamw(d_p, d_g, d_m, d_v, n, opt, counter, nullptr);
  EXPECT_LT(rel_l2(Device::download(d_p, n), p_ref), 1e-6);
  EXPECT_LT(rel_l2(Device::download(d_m, n), m_ref), 1e-6);
  EXPECT_LT(rel_l2(Device::download(d_v, n), v_ref), 1e-6);
}

}  // namespace
}  // namespace roofbench::gpt::cuda
