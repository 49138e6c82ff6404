// Each fused kernel against its eager counterpart or a double-precision CPU computation, on small inputs.
#include <gtest/gtest.h>

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu_test_util.hpp"
#include "layers.hpp"
#include "bf16.hpp"
#include "lab_reference.hpp"
#include "reference.hpp"

namespace roofbench::gpt::cuda {
namespace {

using reference::attention_reference;
using reference::AttentionReference;
using testing::Device;
using testing::from_bf16;
using testing::gelu_double;
using testing::random_floats;
using testing::rel_l2;
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


// The fp32 fused attention versions (v1, v3, v8) against the double reference, on T not a multiple of the
// 32-row tile (nor of the 16-row tile), on the largest T, and on a single position; v3 and v8 also against
// v1 and each other. v1 computes in fp32 (1e-5); v3's and v8's products round their inputs to TF32 (10-bit
// mantissa), like the cuBLAS TF32 GEMMs, so they are held to the TF32 tolerance the trainer tests use for
// logits.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kTf32Tolerance = 5e-3;

struct FusedAttentionRun {
  std::vector<float> out, lse, dqkv;
};

// One forward + backward of `version` on Elem (float or bf16) copies of qkv and dout (for bf16 already
// bf16-exact), outputs poisoned with NaN first so every element must be written.
template <typename Elem>
FusedAttentionRun run_fused_attention(AttentionVersion version, const AttentionShape& shape,
                                      const std::vector<float>& qkv, const std::vector<float>& bias,
                                      const std::vector<float>& dout, const std::vector<float>& cos,
                                      const std::vector<float>& sin) {
  const auto to_elem = [](const std::vector<float>& v) {
    std::vector<Elem> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<Elem>(v[i]);
    return out;
  };
  const auto to_float = [](const std::vector<Elem>& v) {
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
    return out;
  };
  Device dev;
  const RopeTable rope{dev.upload(cos), dev.upload(sin)};
  const std::size_t n = static_cast<std::size_t>(shape.batch) * shape.T, c = shape.channels();
  const std::size_t stats = static_cast<std::size_t>(shape.batch) * shape.heads * shape.T;
  Elem *d_qkv = dev.upload(to_elem(qkv)), *d_dout = dev.upload(to_elem(dout));
  float *d_bias = dev.upload(bias), *d_lse = dev.alloc<float>(stats), *d_delta = dev.alloc<float>(stats);
  Elem *d_out = dev.alloc<Elem>(n * c), *d_dqkv = dev.alloc<Elem>(n * 3 * c);
  ROOFBENCH_CUDA(cudaMemset(d_out, 0xff, n * c * sizeof(Elem)));
  ROOFBENCH_CUDA(cudaMemset(d_lse, 0xff, stats * sizeof(float)));
  ROOFBENCH_CUDA(cudaMemset(d_dqkv, 0xff, n * 3 * c * sizeof(Elem)));
  fused_attention_configure();
  fused_attention_forward(d_out, d_lse, d_qkv, d_bias, rope, shape, nullptr, version);
  fused_attention_backward(d_dqkv, d_delta, d_dout, d_out, d_lse, d_qkv, d_bias, rope, shape, nullptr, version);
  return FusedAttentionRun{to_float(Device::download(d_out, n * c)), Device::download(d_lse, stats),
                           to_float(Device::download(d_dqkv, n * 3 * c))};
}

void rope_table(std::vector<float>& cos, std::vector<float>& sin, int T, int hd, double base);

class GptFusedAttention : public ::testing::TestWithParam<int> {
 protected:
  static constexpr int B = 2, H = 2, hd = 64;
  static constexpr double base = 10000;
  int T() const { return GetParam(); }
  int C() const { return H * hd; }
  int N() const { return B * T(); }

  void SetUp() override {
    const int t_max = T();
    qkv_ = random_floats(N() * 3 * C(), 7);
    bias_ = random_floats(3 * C(), 8, -0.2f, 0.2f);
    dout_ = random_floats(N() * C(), 9);
    rope_table(cos_, sin_, t_max, hd, base);
  }

  FusedAttentionRun run(AttentionVersion version) {
    return run_fused_attention<float>(version, AttentionShape{B, T(), H, hd}, qkv_, bias_, dout_, cos_, sin_);
  }

  std::vector<float> qkv_, bias_, dout_, cos_, sin_;
};

TEST_P(GptFusedAttention, AllVersionsMatchDoubleAndEachOther) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionReference ref = attention_reference(qkv_, bias_, dout_, B, H, T(), hd, base);
  const FusedAttentionRun v1 = run(AttentionVersion::v1);
  const FusedAttentionRun v3 = run(AttentionVersion::v3);
  const FusedAttentionRun v8 = run(AttentionVersion::v8);
  EXPECT_LT(rel_l2(v1.out, ref.out), kFp32Tolerance);
  EXPECT_LT(rel_l2(v1.dqkv, ref.dqkv), kFp32Tolerance);
  for (const FusedAttentionRun* tensor_core : {&v3, &v8}) {
    EXPECT_LT(rel_l2(tensor_core->out, ref.out), kTf32Tolerance);
    EXPECT_LT(rel_l2(tensor_core->dqkv, ref.dqkv), kTf32Tolerance);
    EXPECT_LT(rel_l2(tensor_core->out, v1.out), kTf32Tolerance);
    EXPECT_LT(rel_l2(tensor_core->lse, v1.lse), kTf32Tolerance);
    EXPECT_LT(rel_l2(tensor_core->dqkv, v1.dqkv), kTf32Tolerance);
    for (float x : tensor_core->dqkv) ASSERT_TRUE(std::isfinite(x));
    for (float x : tensor_core->out) ASSERT_TRUE(std::isfinite(x));
    for (float x : tensor_core->lse) ASSERT_TRUE(std::isfinite(x));
  }
  // v8 and v3 round the same operands to TF32 (in other orders of summation): each within the TF32
  // tolerance of the other; v8's backward has no atomics, so a second run gives the same bits.
  EXPECT_LT(rel_l2(v8.out, v3.out), kTf32Tolerance);
  EXPECT_LT(rel_l2(v8.lse, v3.lse), kTf32Tolerance);
  EXPECT_LT(rel_l2(v8.dqkv, v3.dqkv), kTf32Tolerance);
  std::printf("T %d: rel L2 vs double: v3 out %.2e dqkv %.2e; v8 out %.2e dqkv %.2e\n", T(), rel_l2(v3.out, ref.out),
              rel_l2(v3.dqkv, ref.dqkv), rel_l2(v8.out, ref.out), rel_l2(v8.dqkv, ref.dqkv));
  const FusedAttentionRun again = run(AttentionVersion::v8);
  EXPECT_EQ(again.out, v8.out);
  EXPECT_EQ(again.lse, v8.lse);
  EXPECT_EQ(again.dqkv, v8.dqkv);
}

// 70: neither a multiple of 32 nor of 16; 128: the largest T, every tile full; 1: one position, all padding.
INSTANTIATE_TEST_SUITE_P(T, GptFusedAttention, ::testing::Values(70, 128, 1),
                         [](const ::testing::TestParamInfo<int>& info) { return "T" + std::to_string(info.param); });

// RoPE's table [T, hd/2] as the trainer computes it (in double).
void rope_table(std::vector<float>& cos, std::vector<float>& sin, int T, int hd, double base) {
  cos.resize(static_cast<std::size_t>(T) * hd / 2);
  sin.resize(cos.size());
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < hd / 2; ++i) {
      const double angle = t * std::pow(base, -2.0 * i / hd);
      cos[t * hd / 2 + i] = static_cast<float>(std::cos(angle));
      sin[t * hd / 2 + i] = static_cast<float>(std::sin(angle));
    }
}

std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

// The bf16 attention versions (v3 .. v7 and v9, v9 the keeper) on bf16-rounded inputs against the double
// reference on the same rounded values: bf16 operands in the products (q, k, v, dout and the
// probabilities rounded to 8 significant bits); v4 .. v7 also against v3, and the keeper twice on the same
// inputs for the same bits (R4's recomputed backward must equal R3's).
TEST_P(GptFusedAttention, Bf16VersionsMatchDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const std::vector<float> qkv = rounded_to_bf16(qkv_), dout = rounded_to_bf16(dout_);
  const AttentionReference ref = attention_reference(qkv, bias_, dout, B, H, T(), hd, base);
  const AttentionShape shape{B, T(), H, hd};
  const auto run_bf16 = [&](AttentionVersion version) {
    return run_fused_attention<bf16>(version, shape, qkv, bias_, dout, cos_, sin_);
  };
  const FusedAttentionRun v3 = run_bf16(AttentionVersion::v3), v4 = run_bf16(AttentionVersion::v4);
  const FusedAttentionRun v5 = run_bf16(AttentionVersion::v5), v6 = run_bf16(AttentionVersion::v6);
  const FusedAttentionRun v7 = run_bf16(AttentionVersion::v7), v9 = run_bf16(AttentionVersion::v9);
  // v9 is v7's arithmetic in another schedule: the same bits.
  EXPECT_EQ(v9.out, v7.out);
  EXPECT_EQ(v9.lse, v7.lse);
  EXPECT_EQ(v9.dqkv, v7.dqkv);
  for (const FusedAttentionRun* run : {&v3, &v4, &v5, &v6, &v7}) {
    EXPECT_LT(rel_l2(run->out, ref.out), 2e-2);
    EXPECT_LT(rel_l2(run->dqkv, ref.dqkv), 2e-2);
    for (float x : run->lse) ASSERT_TRUE(std::isfinite(x));
  }
  for (const FusedAttentionRun* run : {&v4, &v5, &v6, &v7}) {
    EXPECT_LT(rel_l2(run->lse, v3.lse), 1e-5);
    EXPECT_LT(rel_l2(run->out, v3.out), 2e-2);
    EXPECT_LT(rel_l2(run->dqkv, v3.dqkv), 2e-2);
  }
  std::printf("T %d: rel L2 vs double: v3 out %.2e dqkv %.2e; v4 out %.2e dqkv %.2e; v5 out %.2e dqkv %.2e; "
              "v7 out %.2e dqkv %.2e\n",
              T(), rel_l2(v3.out, ref.out), rel_l2(v3.dqkv, ref.dqkv), rel_l2(v4.out, ref.out),
              rel_l2(v4.dqkv, ref.dqkv), rel_l2(v5.out, ref.out), rel_l2(v5.dqkv, ref.dqkv), rel_l2(v7.out, ref.out),
              rel_l2(v7.dqkv, ref.dqkv));
  const FusedAttentionRun again = run_bf16(kBf16AttentionKeeper);
  const FusedAttentionRun& keeper = kBf16AttentionKeeper == AttentionVersion::v5   ? v5
                                    : kBf16AttentionKeeper == AttentionVersion::v6 ? v6
                                    : kBf16AttentionKeeper == AttentionVersion::v7 ? v7
                                    : kBf16AttentionKeeper == AttentionVersion::v9 ? v9
                                                                                   : v4;
  EXPECT_EQ(again.out, keeper.out);
  EXPECT_EQ(again.dqkv, keeper.dqkv);
  EXPECT_THROW(run_bf16(AttentionVersion::v1), Error);
  EXPECT_THROW(run_bf16(AttentionVersion::v8), Error);  // fp32 only
}

// v7's conditional rescale (attend_row_block_online: the kept row maximum moves only when a tile's scores
// outgrow it by more than 2^8) never runs on the other tests' inputs, whose scores spread under one unit in
// log2 terms. Here qkv is drawn from [-6, 6], about 36 times their variance, so a row's maximum typically
// grows past its first 16 keys' by ~14 units; the host counts, from the same prepared q and k, the rows
// whose maximum grows by more than 8, so the test fails if its inputs stop exercising the branch. The
// rescale is a forward matter: out against the double reference, out and lse against v6 (one-pass
// softmax); dqkv against v6 only (with a softmax this peaked, ds = p (dp - delta) cancels, and both
// versions' bf16 rounding of p and ds moves it alike, so their error against double says little).
TEST(GptFusedAttentionWideScores, V7RescalesAndMatchesDoubleAndV6) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  constexpr int B = 4, H = 2, hd = 64, T = 128;
  constexpr double kBase = 10000;
  const AttentionShape shape{B, T, H, hd};
  const std::size_t N = static_cast<std::size_t>(B) * T, C = static_cast<std::size_t>(H) * hd;
  const std::vector<float> qkv = rounded_to_bf16(random_floats(N * 3 * C, 23, -6.0f, 6.0f));
  const std::vector<float> dout = rounded_to_bf16(random_floats(N * C, 24));
  const std::vector<float> bias = random_floats(3 * C, 25, -0.2f, 0.2f);
  std::vector<float> cos, sin;
  rope_table(cos, sin, T, hd, kBase);

  // q and k as the products see them (bias added, pairs rotated), then each row's growth of its maximum
  // score (log2 units) from its first 16 keys to all its causal keys.
  const auto prepared = [&](int b, int h, int t, int part) {
    std::vector<double> x(hd);
    const std::size_t row = (static_cast<std::size_t>(b) * T + t) * 3 * C + part * C + h * hd;
    for (int i = 0; i < hd / 2; ++i) {
      const double x0 = qkv[row + 2 * i] + bias[part * C + h * hd + 2 * i];
      const double x1 = qkv[row + 2 * i + 1] + bias[part * C + h * hd + 2 * i + 1];
      const double c = cos[t * hd / 2 + i], s = sin[t * hd / 2 + i];
      x[2 * i] = x0 * c - x1 * s;
      x[2 * i + 1] = x0 * s + x1 * c;
    }
    return x;
  };
  int rows_past_first_tile = 0, rows_rescaled = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 16; i < T; ++i) {
        const std::vector<double> q = prepared(b, h, i, 0);
        double first = -INFINITY, all = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const std::vector<double> k = prepared(b, h, j, 1);
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
          const double score = dot / std::sqrt(static_cast<double>(hd)) * 1.4426950408889634;
          all = std::max(all, score);
          if (j < 16) first = std::max(first, score);
        }
        ++rows_past_first_tile;
        if (all - first > 8.0) ++rows_rescaled;
      }
  std::printf("wide scores: %d of %d rows past their first tile outgrow its maximum by more than 2^8\n",
              rows_rescaled, rows_past_first_tile);
  ASSERT_GT(rows_rescaled, rows_past_first_tile / 4) << "the inputs no longer exercise v7's rescale";

  const AttentionReference ref = attention_reference(qkv, bias, dout, B, H, T, hd, kBase);
  const auto run = [&](AttentionVersion version) {
    return run_fused_attention<bf16>(version, shape, qkv, bias, dout, cos, sin);
  };
  const FusedAttentionRun v6 = run(AttentionVersion::v6), v7 = run(AttentionVersion::v7);
  std::printf("wide scores: rel L2 vs double: v6 out %.2e dqkv %.2e, v7 out %.2e dqkv %.2e; v7 vs v6: lse %.2e "
              "out %.2e dqkv %.2e\n",
              rel_l2(v6.out, ref.out), rel_l2(v6.dqkv, ref.dqkv), rel_l2(v7.out, ref.out),
              rel_l2(v7.dqkv, ref.dqkv), rel_l2(v7.lse, v6.lse), rel_l2(v7.out, v6.out),
              rel_l2(v7.dqkv, v6.dqkv));
  EXPECT_LT(rel_l2(v7.out, ref.out), 2e-2);
  EXPECT_LT(rel_l2(v7.lse, v6.lse), 1e-5);
  EXPECT_LT(rel_l2(v7.out, v6.out), 2e-2);
  EXPECT_LT(rel_l2(v7.dqkv, v6.dqkv), 2e-2);
}

// The worst relative L2 error of any one head's rows (columns h*hd .. h*hd+hd-1 of every part of a row of
// `width` = parts * heads * hd), so one wrong head among hundreds cannot hide in the whole tensor's error.
double worst_head_error(const std::vector<float>& got, const std::vector<float>& want, int sequences, int T,
                        int parts, int heads, int hd) {
  double worst = 0;
  const std::size_t width = static_cast<std::size_t>(parts) * heads * hd;
  for (int b = 0; b < sequences; ++b)
    for (int h = 0; h < heads; ++h) {
      double err = 0, norm = 0;
      for (int t = 0; t < T; ++t)
        for (int p = 0; p < parts; ++p)
          for (int d = 0; d < hd; ++d) {
            const std::size_t i = (static_cast<std::size_t>(b) * T + t) * width + (p * heads + h) * hd + d;
            err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
            norm += static_cast<double>(want[i]) * want[i];
          }
      worst = std::max(worst, norm > 0 ? std::sqrt(err / norm) : std::sqrt(err));
    }
  return worst;
}

// More heads than v5's persistent forward and v9's persistent backward have blocks (they walk several heads
// per block, fetching the next while computing one), at the model's width: every head of v5, v6 and v7
// against v4, v9 against v7 for the same bits, and v5 and v7 twice for the same bits. 80 sequences x 8 heads
// = 640 heads, over twice the 2 x 132 blocks of an H200; T 70 takes v9's loaded (not copied) log-sum-exp.
class GptFusedAttentionManyHeads : public ::testing::TestWithParam<int> {};

TEST_P(GptFusedAttentionManyHeads, V5ToV9MatchV4OnEveryHead) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  constexpr int B = 80, H = 8, hd = 64;
  const int T = GetParam();
  const AttentionShape shape{B, T, H, hd};
  const std::size_t N = static_cast<std::size_t>(B) * T, C = static_cast<std::size_t>(H) * hd;
  const std::vector<float> qkv = rounded_to_bf16(random_floats(N * 3 * C, 17));
  const std::vector<float> dout = rounded_to_bf16(random_floats(N * C, 19));
  const std::vector<float> bias = random_floats(3 * C, 18, -0.2f, 0.2f);
  std::vector<float> cos, sin;
  rope_table(cos, sin, T, hd, 10000);
  const auto run = [&](AttentionVersion version) {
    return run_fused_attention<bf16>(version, shape, qkv, bias, dout, cos, sin);
  };
  const FusedAttentionRun v4 = run(AttentionVersion::v4), v5 = run(AttentionVersion::v5);
  const FusedAttentionRun v6 = run(AttentionVersion::v6), v7 = run(AttentionVersion::v7);
  const FusedAttentionRun v9 = run(AttentionVersion::v9);
  EXPECT_EQ(v9.out, v7.out);
  EXPECT_EQ(v9.dqkv, v7.dqkv);
  for (const FusedAttentionRun* other : {&v5, &v6, &v7}) {
    EXPECT_LT(rel_l2(other->lse, v4.lse), 1e-5);
    EXPECT_LT(worst_head_error(other->out, v4.out, B, T, 1, H, hd), 2e-2);
    EXPECT_LT(worst_head_error(other->dqkv, v4.dqkv, B, T, 3, H, hd), 2e-2);
  }
  for (const auto& [name, run] : {std::pair{"v5", &v5}, std::pair{"v6", &v6}, std::pair{"v7", &v7}})
    std::printf("T %d, %d heads: worst head vs v4: %s out %.2e dqkv %.2e\n", T, B * H, name,
                worst_head_error(run->out, v4.out, B, T, 1, H, hd),
                worst_head_error(run->dqkv, v4.dqkv, B, T, 3, H, hd));
  for (const auto& [version, first] : {std::pair{AttentionVersion::v5, &v5}, std::pair{AttentionVersion::v7, &v7}}) {
    const FusedAttentionRun again = run(version);
    EXPECT_EQ(again.out, first->out);
    EXPECT_EQ(again.dqkv, first->dqkv);
  }
}

INSTANTIATE_TEST_SUITE_P(T, GptFusedAttentionManyHeads, ::testing::Values(128, 70),
                         [](const ::testing::TestParamInfo<int>& info) { return "T" + std::to_string(info.param); });

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

// R1's 16-byte elementwise kernels against the scalar ones and double: bias + GELU forward, GELU's backward
// fused with its bias gradient, and the four-column bias-gradient sums. 300 rows: more than one 256-row
// chunk, the last one partial; 136 columns: a multiple of 4, not of the 128 columns of a block; 30 columns:
// not a multiple of 4, the scalar fallback.
class GptVectorizedElementwise : public ::testing::TestWithParam<int> {};

TEST_P(GptVectorizedElementwise, MatchScalarAndDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int rows = 300, cols = GetParam(), n = rows * cols;
  const auto z = random_floats(n, 21, -4, 4), dout = random_floats(n, 22), bias = random_floats(cols, 23);
  auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  auto gelu_derivative = [](double x) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) * 0.39894228040143268;  // x pdf(x)
  };
  std::vector<double> pre_ref(n), out_ref(n), dz_ref(n), dbias_ref(cols, 0), colsum_ref(cols, 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int i = r * cols + c;
      pre_ref[i] = double{z[i]} + bias[c];
      out_ref[i] = gelu(double{z[i]} + bias[c]);
      dz_ref[i] = double{dout[i]} * gelu_derivative(z[i]);
      dbias_ref[c] += dz_ref[i];
      colsum_ref[c] += dout[i];
    }

  Device dev;
  float* partials = dev.alloc<float>(column_partials_floats(rows, cols));
  float *d_bias = dev.upload(bias), *d_dout = dev.upload(dout);
  // Forward, both kernels: z is updated in place, so each gets its own copy.
  float *z_vec = dev.upload(z), *z_scalar = dev.upload(z), *out_vec = dev.alloc<float>(n),
        *out_scalar = dev.alloc<float>(n);
  // The vectorized kernel reads the bias a float at a time: give it one 4 bytes past a 16-byte boundary (a
  // bias's place in the flat parameters need not be aligned).
  std::vector<float> shifted(1, 0.0f);
  shifted.insert(shifted.end(), bias.begin(), bias.end());
  bias_gelu_forward(out_vec, z_vec, dev.upload(shifted) + 1, rows, cols, nullptr, true);
  bias_gelu_forward(out_scalar, z_scalar, d_bias, rows, cols, nullptr, false);
  const auto pre_vec = Device::download(z_vec, n), o_vec = Device::download(out_vec, n);
  EXPECT_EQ(pre_vec, Device::download(z_scalar, n));  // the same fp32 additions
  EXPECT_LT(rel_l2(o_vec, Device::download(out_scalar, n)), 1e-6);
  EXPECT_LT(rel_l2(pre_vec, pre_ref), 1e-6);
  EXPECT_LT(rel_l2(o_vec, out_ref), 1e-5);

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
  // v1 transposes nothing, v2 always dy [N, out], v3 the narrower of x [N, in] and dy (dy on a tie).
  EXPECT_EQ(wgrad_scratch_floats(WgradLayout::v1, 256, 64, 96), 0u);
  EXPECT_EQ(wgrad_scratch_floats(WgradLayout::v2, 256, 64, 96), 256u * 96);
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

// A linear layer's backward in every weight-gradient layout against double: dw = dy^T x, dx = dy w. in < out
// (v3 transposes x: cuBLAS "tt"), in > out (v3 transposes dy, as v2: "nn"), and in == out (v3 takes dy) on
// 200 rows, not a multiple of the transpose's 32-row tile.
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
  for (WgradLayout layout : {WgradLayout::v1, WgradLayout::v2, WgradLayout::v3}) {
    const std::string name = "v" + std::to_string(static_cast<int>(layout) + 1);
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
  EXPECT_THROW(linear_backward_kmajor(handle.get(), nullptr, dw, d_dy, d_x, d_w, N, in, out, WgradLayout::v2, nullptr),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GptWeightGradient,
                         ::testing::Values(LinearShape{256, 64, 96}, LinearShape{256, 96, 64},
                                           LinearShape{200, 64, 64}),
                         [](const ::testing::TestParamInfo<LinearShape>& info) {
                           return "N" + std::to_string(info.param.N) + "_in" + std::to_string(info.param.in) +
                                  "_out" + std::to_string(info.param.out);
                         });

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
// on 200 rows (not a multiple of any tile) and then GELU's vectorized forward on its output.
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
      gelu_forward(d_g, d_y, n, nullptr);
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

// R2's 16-byte GELU backward with fc's bias gradient (8 bf16 columns a thread) and the bf16 column sums,
// against double on the same bf16 inputs: 300 rows (one partial chunk), 2048 and 136 columns (136: a
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
    gelu_backward_bias_grad(d_dz, d_dbias, d_dout, d_z, rows, cols, partials, nullptr);
    column_sum(d_colsum, d_dout, rows, cols, partials, nullptr);
    EXPECT_LT(rel_l2(from_bf16(Device::download(d_dz, n)), dz_ref), 1e-2);
    EXPECT_LT(rel_l2(Device::download(d_dbias, cols), dbias_ref), 1e-5);
    EXPECT_LT(rel_l2(Device::download(d_colsum, cols), colsum_ref), 1e-5);
  }
}

// The bits of count bf16 values on the device, for comparing two kernels' outputs exactly.
std::vector<std::uint16_t> bf16_bits(const bf16* device, std::size_t count) {
  const auto values = Device::download(device, count);
  std::vector<std::uint16_t> bits(count);
  std::memcpy(bits.data(), static_cast<const void*>(values.data()), count * sizeof(std::uint16_t));
  return bits;
}

// The bf16 GELU passes through their tables (bf16_table.hpp, the keeper) give the bits of the in-place
// kernels: on every bf16 bit pattern (256 x 256, NaN and infinities included, which the tables leave to the
// in-place arithmetic), and on 16684 rows, more chunks than the table kernel has block rows, so its blocks
// take several chunks each.
TEST(GptLayers, Bf16GeluTablesMatchInPlaceBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  struct Shape {
    int rows, cols;
    bool every_pattern;
  };
  for (const Shape shape : {Shape{256, 256, true}, Shape{16684, 136, false}}) {
    SCOPED_TRACE(shape.rows);
    const std::size_t n = static_cast<std::size_t>(shape.rows) * shape.cols;
    std::vector<bf16> z;
    if (shape.every_pattern) {
      z.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        const auto bits = static_cast<std::uint16_t>(i);
        std::memcpy(static_cast<void*>(&z[i]), &bits, sizeof bits);
      }
    } else {
      auto values = random_floats(n, 71, -6, 6);
      for (std::size_t i = 0; i < n; i += 97) values[i] *= 0x1p-20f;  // some below the table's smallest magnitude
      z = to_bf16(values);
    }
    const auto dout = to_bf16(random_floats(n, 72));
    Device dev;
    const bf16 *d_z = dev.upload(z), *d_dout = dev.upload(dout);
    float* partials = dev.alloc<float>(column_partials_floats(shape.rows, shape.cols));
    std::vector<std::uint16_t> out[2], dz[2];
    std::vector<float> dbias[2];
    for (const Bf16GeluKernels kernels : {Bf16GeluKernels::table, Bf16GeluKernels::in_place}) {
      const int k = kernels == Bf16GeluKernels::table ? 0 : 1;
      bf16 *d_out = dev.alloc<bf16>(n), *d_dz = dev.alloc<bf16>(n);
      float* d_dbias = dev.alloc<float>(shape.cols);
      gelu_forward(d_out, d_z, n, nullptr, kernels);
      gelu_backward_bias_grad(d_dz, d_dbias, d_dout, d_z, shape.rows, shape.cols, partials, nullptr, kernels);
      out[k] = bf16_bits(d_out, n);
      dz[k] = bf16_bits(d_dz, n);
      dbias[k] = Device::download(d_dbias, shape.cols);
    }
    EXPECT_EQ(out[0], out[1]);
    EXPECT_EQ(dz[0], dz[1]);
    for (int c = 0; c < shape.cols; ++c)
      if (!std::isnan(dbias[1][c])) {
        EXPECT_EQ(dbias[0][c], dbias[1][c]) << c;
      }
  }
}

// R2-R4's GELU passes with fc's bias added inside (gelu_forward_add_bias, gelu_backward_add_bias) against
// the table passes on the pre-activation rounded beforehand, bf16(xw + bias) computed here: the same bits of
// GELU and dz, the same dbias. The bias sits at an odd element offset, as fc_b does in the trainers' flat
// bf16 weights.
TEST(GptLayers, Bf16GeluAddBiasMatchesPreAddedBias) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  for (const auto& [rows, cols] : {std::pair{16684, 136}, std::pair{1100, 2048}}) {
    SCOPED_TRACE(cols);
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    const auto xw = to_bf16(random_floats(n, 81, -5, 5)), dout = to_bf16(random_floats(n, 82));
    const auto bias = to_bf16(random_floats(static_cast<std::size_t>(cols) + 1, 83, -0.5f, 0.5f));
    std::vector<float> pre(n);
    for (std::size_t e = 0; e < n; ++e)
      pre[e] = round_to_bf16(static_cast<float>(xw[e]) + static_cast<float>(bias[1 + e % cols]));
    Device dev;
    const bf16 *d_xw = dev.upload(xw), *d_pre = dev.upload(to_bf16(pre)), *d_dout = dev.upload(dout);
    const bf16* d_bias = dev.upload(bias) + 1;
    float* partials = dev.alloc<float>(column_partials_floats(rows, cols));
    bf16 *out_added = dev.alloc<bf16>(n), *out_pre = dev.alloc<bf16>(n);
    bf16 *dz_added = dev.alloc<bf16>(n), *dz_pre = dev.alloc<bf16>(n);
    float *dbias_added = dev.alloc<float>(cols), *dbias_pre = dev.alloc<float>(cols);
    gelu_forward_add_bias(out_added, d_xw, d_bias, rows, cols, nullptr);
    gelu_backward_add_bias(dz_added, dbias_added, d_dout, d_xw, d_bias, rows, cols, partials, nullptr);
    gelu_forward(out_pre, d_pre, n, nullptr);
    gelu_backward_bias_grad(dz_pre, dbias_pre, d_dout, d_pre, rows, cols, partials, nullptr);
    EXPECT_EQ(bf16_bits(out_added, n), bf16_bits(out_pre, n));
    EXPECT_EQ(bf16_bits(dz_added, n), bf16_bits(dz_pre, n));
    EXPECT_EQ(Device::download(dbias_added, cols), Device::download(dbias_pre, cols));
  }
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
