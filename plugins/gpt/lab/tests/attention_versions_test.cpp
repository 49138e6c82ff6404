// The kernel lab's attention versions (attention_versions.hpp), every row of both tables, against the
// double-precision reference on small inputs, and the lab's versions against the keepers beside them:
// v9 is v7's arithmetic in another schedule, so the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_versions.hpp"
#include "bf16.hpp"
#include "attention_test_util.hpp"
#include "gpu_test_util.hpp"
#include "lab_reference.hpp"
#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

using reference::attention_reference;
using reference::AttentionReference;
using testing::FusedAttentionRun;
using testing::random_floats;
using testing::rel_l2;
using testing::rope_table;
using testing::rounded_to_bf16;
using testing::run_fused_attention;

// v1 computes in fp32 (1e-5); v8's products round their inputs to TF32 (10-bit mantissa), like the cuBLAS
// TF32 GEMMs, so it is held to the TF32 tolerance the trainer tests use for logits. Every bf16 version: 2e-2.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kTf32Tolerance = 5e-3;
constexpr double kBf16Tolerance = 2e-2;

// One forward + backward of `version`'s row on Elem tensors.
template <typename Elem>
FusedAttentionRun run_version(const AttentionVersion<Elem>& version, const AttentionShape& shape,
                              const std::vector<float>& qkv, const std::vector<float>& bias,
                              const std::vector<float>& dout, const std::vector<float>& cos,
                              const std::vector<float>& sin) {
  return run_fused_attention<Elem>(version.configure, version.forward, version.backward, shape, qkv, bias, dout, cos,
                                   sin);
}

void expect_finite(const FusedAttentionRun& run, const std::string& name) {
  for (const std::vector<float>* tensor : {&run.out, &run.lse, &run.dqkv})
    EXPECT_TRUE(std::all_of(tensor->begin(), tensor->end(), [](float x) { return std::isfinite(x); })) << name;
}

const AttentionVersion<bf16>& bf16_version(const char* name) { return bf16_attention_version(name); }

// Whether `version` runs on this device: its configure throws NotApplicable where it does not (v10, sm_90a
// code, off compute capability 9.0), and the reason is printed.
template <typename Elem>
bool runs_here(const AttentionVersion<Elem>& version) {
  try {
    version.configure();
    return true;
  } catch (const NotApplicable& e) {
    std::printf("%s not run here: %s\n", version.name, e.what());
    return false;
  }
}

// Why `version` does not run on this device (its configure's NotApplicable), or "" when it does.
std::string not_applicable_reason(const AttentionVersion<bf16>& version) {
  try {
    version.configure();
    return "";
  } catch (const NotApplicable& e) {
    return e.what();
  }
}

// The shapes: T not a multiple of the 32-row tile (nor of the 16-row tile), the largest T, a single position.
class GptLabAttention : public ::testing::TestWithParam<int> {
 protected:
  static constexpr int B = 2, H = 2, hd = 64;
  static constexpr double base = 10000;
  int T() const { return GetParam(); }
  AttentionShape shape() const { return AttentionShape{B, T(), H, hd}; }

  void SetUp() override {
    const int N = B * T(), C = H * hd;
    qkv_ = random_floats(static_cast<std::size_t>(N) * 3 * C, 7);
    bias_ = random_floats(3 * C, 8, -0.2f, 0.2f);
    dout_ = random_floats(static_cast<std::size_t>(N) * C, 9);
    rope_table(cos_, sin_, T(), hd, base);
  }

  std::vector<float> qkv_, bias_, dout_, cos_, sin_;
};

// Every fp32 row against the double reference; v8 also against v1 (TF32 against fp32), and twice for the
// same bits (its backward has no atomics).
TEST_P(GptLabAttention, Fp32VersionsMatchDoubleAndEachOther) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionReference ref = attention_reference(qkv_, bias_, dout_, B, H, T(), hd, base);
  std::vector<FusedAttentionRun> runs;
  for (const AttentionVersion<float>& version : fp32_attention_versions()) {
    runs.push_back(run_version(version, shape(), qkv_, bias_, dout_, cos_, sin_));
    const double tolerance = version.keeper ? kTf32Tolerance : kFp32Tolerance;
    EXPECT_LT(rel_l2(runs.back().out, ref.out), tolerance) << version.name;
    EXPECT_LT(rel_l2(runs.back().dqkv, ref.dqkv), tolerance) << version.name;
    expect_finite(runs.back(), version.name);
    std::printf("T %d: %s rel L2 vs double: out %.2e dqkv %.2e\n", T(), version.name,
                rel_l2(runs.back().out, ref.out), rel_l2(runs.back().dqkv, ref.dqkv));
  }
  const FusedAttentionRun& v1 = runs.front();
  const FusedAttentionRun v8 = run_version(fp32_attention_version("v8"), shape(), qkv_, bias_, dout_, cos_, sin_);
  EXPECT_LT(rel_l2(v8.out, v1.out), kTf32Tolerance);
  EXPECT_LT(rel_l2(v8.lse, v1.lse), kTf32Tolerance);
  EXPECT_LT(rel_l2(v8.dqkv, v1.dqkv), kTf32Tolerance);
  const FusedAttentionRun again = run_version(fp32_attention_version("v8"), shape(), qkv_, bias_, dout_, cos_, sin_);
  EXPECT_EQ(again.out, v8.out);
  EXPECT_EQ(again.lse, v8.lse);
  EXPECT_EQ(again.dqkv, v8.dqkv);
}

// Every bf16 row on bf16-rounded inputs against the double reference on the same rounded values (bf16
// operands in the products: q, k, v, dout and the probabilities rounded to 8 significant bits); v9 equals
// v7 bit for bit, and the keeper twice on the same inputs gives the same bits (R4's recomputed backward
// must equal R3's).
TEST_P(GptLabAttention, Bf16VersionsMatchDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const std::vector<float> qkv = rounded_to_bf16(qkv_), dout = rounded_to_bf16(dout_);
  const AttentionReference ref = attention_reference(qkv, bias_, dout, B, H, T(), hd, base);
  for (const AttentionVersion<bf16>& version : bf16_attention_versions()) {
    if (!runs_here(version)) continue;
    const FusedAttentionRun run = run_version(version, shape(), qkv, bias_, dout, cos_, sin_);
    EXPECT_LT(rel_l2(run.out, ref.out), kBf16Tolerance) << version.name;
    EXPECT_LT(rel_l2(run.dqkv, ref.dqkv), kBf16Tolerance) << version.name;
    expect_finite(run, version.name);
    std::printf("T %d: %s rel L2 vs double: out %.2e dqkv %.2e\n", T(), version.name, rel_l2(run.out, ref.out),
                rel_l2(run.dqkv, ref.dqkv));
  }
  const FusedAttentionRun v7 = run_version(bf16_version("v7"), shape(), qkv, bias_, dout, cos_, sin_);
  const FusedAttentionRun v9 = run_version(bf16_version("v9"), shape(), qkv, bias_, dout, cos_, sin_);
  EXPECT_EQ(v9.out, v7.out);
  EXPECT_EQ(v9.lse, v7.lse);
  EXPECT_EQ(v9.dqkv, v7.dqkv);
  const FusedAttentionRun again = run_version(bf16_version("v9"), shape(), qkv, bias_, dout, cos_, sin_);
  EXPECT_EQ(again.out, v9.out);
  EXPECT_EQ(again.dqkv, v9.dqkv);
}

// 70: neither a multiple of 32 nor of 16; 128: the largest T, every tile full; 1: one position, all padding.
INSTANTIATE_TEST_SUITE_P(T, GptLabAttention, ::testing::Values(70, 128, 1),
                         [](const ::testing::TestParamInfo<int>& info) { return "T" + std::to_string(info.param); });

// A name outside the tables is refused, naming the versions there are.
TEST(GptLabAttentionTable, UnknownVersionsAreRefused) {
  EXPECT_THROW(fp32_attention_version("v3"), Error);
  EXPECT_THROW(bf16_attention_version("v5"), Error);
  EXPECT_THROW(bf16_attention_version("v8"), Error);  // fp32 only
  EXPECT_NO_THROW(bf16_attention_version("v7"));
  std::size_t keepers = 0;
  for (const auto& version : fp32_attention_versions()) keepers += version.keeper ? 1 : 0;
  for (const auto& version : bf16_attention_versions()) keepers += version.keeper ? 1 : 0;
  EXPECT_EQ(keepers, 2u);  // v8 and v44
  EXPECT_TRUE(fp32_attention_version("v8").keeper);
  EXPECT_TRUE(bf16_attention_version("v44").keeper);
  EXPECT_FALSE(bf16_attention_version("v38").keeper);
  EXPECT_STREQ(bf16_attention_version("v44").kernel, bf16_attention_keeper_name(true));
}

// A backward walk is found by its version, on any machine: one the lab has none of (v44 is the keeper's, v28's walk is
// configured with its forward) is an Error naming it, and so is asking v43, which has no form summing qkv's bias, for
// that form; neither touches a GPU. (In a build without sm_90a code every version is NotApplicable, an Error too.)
TEST(GptLabAttentionTable, BackwardWalksAreFoundByVersion) {
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const int version : {44, 28, 0}) {
    const std::string why = message([&] { configure_backward_walk(version); });
    EXPECT_NE(why.find("v" + std::to_string(version)), std::string::npos) << why;
  }
  const std::string why = message([] {
    launch_backward_walk_and_bias_gradient(43, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           RopeTable{}, AttentionShape{}, nullptr);
  });
  EXPECT_NE(why.find("v43"), std::string::npos) << why;
}

// Each bf16 row runs the kernels its name says, on any machine: v9's forward for v9, v13 and v14; v9's backward
// for v9 and the rows on the sm_90a forwards before v15 (v10, v11); the lab's v12 backward for v12 (on v11's
// forward), v13 and v15; the lab's v14 backward for v14 and v16; the lab's v15 forward for v15; v15's forward or
// v9's, as the keeper chose until v22, for v16, v17, v18 and v21; the lab's v17 backward for v17 and v19, its v18
// backward for v18 and v20; v19's forward for v19 and v20; v21's backward for v21; v22's forward or v9's, as the
// keeper chose until v26, for v22 and v25; the lab's v22 backward for v22, v23 and v24; v23's and v24's own
// forwards; v25's backward for v25; the lab's v26 forward with the lab's v26 backward for v26, and with v27's
// backward for v27; v28's own forward and backward; for v44 the keeper's entry points (chosen per device: none of
// those kernels on its own), for v29 the keeper's forward with v26's backward, for v30 to v43 and v45 to v49 the
// keeper's forward with their own backwards, v50's forward with the keeper's backward for v50, with v49's for v51, and
// the keeper's forward with v52's backward for v52.
TEST(GptLabAttentionTable, RowsRunTheKernelsTheirNamesSay) {
  const auto row = [](const char* name) { return bf16_version(name); };  // a copy of the row
  for (const char* name : {"v9", "v13", "v14"})
    EXPECT_TRUE(row(name).forward == &fused_attention_v9_forward) << name;
  for (const char* name : {"v9", "v10", "v11"})
    EXPECT_TRUE(row(name).backward == &fused_attention_v9_backward) << name;
  for (const char* name : {"v12", "v13", "v15"})
    EXPECT_TRUE(row(name).backward == &attention_v12_backward) << name;
  EXPECT_TRUE(row("v12").forward == &attention_v11_forward);
  for (const char* name : {"v14", "v16"})
    EXPECT_TRUE(row(name).backward == &walk_backward<14>) << name;
  EXPECT_TRUE(row("v15").forward == &attention_v15_forward);
  for (const char* name : {"v16", "v17", "v18", "v21"})
    EXPECT_TRUE(row(name).forward == &attention_v15_or_v9_forward) << name;
  for (const char* name : {"v17", "v19"})
    EXPECT_TRUE(row(name).backward == &walk_backward<17>) << name;
  for (const char* name : {"v18", "v20"})
    EXPECT_TRUE(row(name).backward == &walk_backward<18>) << name;
  for (const char* name : {"v19", "v20"})
    EXPECT_TRUE(row(name).forward == &attention_v19_forward) << name;
  EXPECT_TRUE(row("v21").backward == &walk_backward<21>);
  for (const char* name : {"v22", "v25"})
    EXPECT_TRUE(row(name).forward == &attention_v22_forward) << name;
  EXPECT_TRUE(row("v23").forward == &attention_v23_forward);
  EXPECT_TRUE(row("v24").forward == &attention_v24_forward);
  for (const char* name : {"v22", "v23", "v24"})
    EXPECT_TRUE(row(name).backward == &attention_v22_backward) << name;
  EXPECT_TRUE(row("v25").backward == &walk_backward<25>);
  const AttentionVersion<bf16> keeper = row("v44");
  EXPECT_FALSE(keeper.forward == &fused_attention_v9_forward);
  EXPECT_FALSE(keeper.forward == &fused_attention_sm90a_forward);
  EXPECT_FALSE(keeper.forward == &attention_v15_or_v9_forward);
  EXPECT_FALSE(keeper.forward == &attention_v22_forward);
  EXPECT_FALSE(keeper.forward == &attention_v26_forward);
  EXPECT_FALSE(keeper.backward == &fused_attention_v9_backward);
  EXPECT_FALSE(keeper.backward == &fused_attention_sm90a_backward);
  EXPECT_FALSE(keeper.backward == &attention_v22_backward);
  EXPECT_FALSE(keeper.backward == &walk_backward<26>);
  for (const char* name : {"v26", "v27"})
    EXPECT_TRUE(row(name).forward == &attention_v26_forward) << name;
  for (const char* name : {"v26", "v29"})
    EXPECT_TRUE(row(name).backward == &walk_backward<26>) << name;
  EXPECT_TRUE(row("v27").backward == &walk_backward<27>);
  EXPECT_TRUE(row("v28").forward == &attention_v28_forward);
  EXPECT_TRUE(row("v28").backward == &attention_v28_backward);
  for (const char* name : {"v29", "v30", "v31", "v32", "v33", "v34", "v35", "v36", "v37", "v38", "v39", "v40", "v41",
                           "v42", "v43", "v45", "v46", "v47", "v48", "v49", "v52"})
    EXPECT_TRUE(row(name).forward == keeper.forward) << name;
  EXPECT_TRUE(row("v30").backward == &walk_backward<30>);
  EXPECT_TRUE(row("v31").backward == &walk_backward<31>);
  EXPECT_TRUE(row("v32").backward == &walk_backward<32>);
  EXPECT_TRUE(row("v33").backward == &walk_backward<33>);
  EXPECT_TRUE(row("v34").backward == &walk_backward<34>);
  EXPECT_TRUE(row("v35").backward == &walk_backward<35>);
  EXPECT_TRUE(row("v36").backward == &walk_backward<36>);
  EXPECT_TRUE(row("v37").backward == &walk_backward<37>);
  EXPECT_TRUE(row("v38").backward == &walk_backward<38>);
  EXPECT_TRUE(row("v39").backward == &walk_backward<39>);
  EXPECT_TRUE(row("v40").backward == &walk_backward<40>);
  EXPECT_TRUE(row("v41").backward == &walk_backward<41>);
  EXPECT_TRUE(row("v42").backward == &walk_backward<42>);
  EXPECT_TRUE(row("v43").backward == &walk_backward<43>);
  EXPECT_TRUE(row("v45").backward == &walk_backward<45>);
  EXPECT_TRUE(row("v46").backward == &walk_backward<46>);
  EXPECT_TRUE(row("v47").backward == &walk_backward<47>);
  EXPECT_TRUE(row("v48").backward == &walk_backward<48>);
  EXPECT_TRUE(row("v49").backward == &walk_backward<49>);
  for (const char* name : {"v50", "v51"})
    EXPECT_TRUE(row(name).forward == &attention_v50_forward) << name;
  EXPECT_TRUE(row("v50").backward == keeper.backward);
  EXPECT_TRUE(row("v51").backward == &walk_backward<49>);
  EXPECT_TRUE(row("v52").backward == &walk_backward<52>);
}

// v7's conditional rescale (attend_row_block_online: the kept row maximum moves only when a tile's scores
// outgrow it by more than 2^8) never runs on the other tests' inputs, whose scores spread under one unit in
// log2 terms. Here qkv is drawn from [-6, 6], about 36 times their variance, so a row's maximum typically
// grows past its first 16 keys' by ~14 units; the host counts, from the same prepared q and k, the rows
// whose maximum grows by more than 8, so the test fails if its inputs stop exercising the branch. The
// rescale is a forward matter: out and lse against the double reference (lse from the host's own scores);
// dqkv of v9 equal to v7's (with a softmax this peaked, ds = p (dp - delta) cancels, and the bf16 rounding
// of p and ds moves it, so its error against double says little). The forward is v9's too.
TEST(GptLabAttentionWideScores, V7RescalesAndMatchesDouble) {
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
  std::vector<float> lse_ref(static_cast<std::size_t>(B) * H * T);  // natural units, [B, heads, T]
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        const std::vector<double> q = prepared(b, h, i, 0);
        double first = -INFINITY, all = -INFINITY;
        std::vector<double> scores;
        for (int j = 0; j <= i; ++j) {
          const std::vector<double> k = prepared(b, h, j, 1);
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
          scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
          const double score = scores.back() * 1.4426950408889634;
          all = std::max(all, score);
          if (j < 16) first = std::max(first, score);
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (const double s : scores) sum += std::exp(s - max);
        lse_ref[(static_cast<std::size_t>(b) * H + h) * T + i] = static_cast<float>(max + std::log(sum));
        if (i < 16) continue;
        ++rows_past_first_tile;
        if (all - first > 8.0) ++rows_rescaled;
      }
  std::printf("wide scores: %d of %d rows past their first tile outgrow its maximum by more than 2^8\n",
              rows_rescaled, rows_past_first_tile);
  ASSERT_GT(rows_rescaled, rows_past_first_tile / 4) << "the inputs no longer exercise v7's rescale";

  const AttentionReference ref = attention_reference(qkv, bias, dout, B, H, T, hd, kBase);
  const auto run = [&](const char* version) {
    return run_version(bf16_version(version), shape, qkv, bias, dout, cos, sin);
  };
  const FusedAttentionRun v7 = run("v7"), v9 = run("v9");
  std::printf("wide scores: v7 rel L2 vs double: out %.2e lse %.2e dqkv %.2e\n", rel_l2(v7.out, ref.out),
              rel_l2(v7.lse, lse_ref), rel_l2(v7.dqkv, ref.dqkv));
  EXPECT_LT(rel_l2(v7.out, ref.out), kBf16Tolerance);
  EXPECT_LT(rel_l2(v7.lse, lse_ref), kBf16Tolerance);
  EXPECT_EQ(v9.out, v7.out);
  EXPECT_EQ(v9.lse, v7.lse);
  EXPECT_EQ(v9.dqkv, v7.dqkv);
}

// The worst relative L2 error of any one head's rows (columns h*hd .. h*hd+hd-1 of every part of a row of
// `width` = parts * heads * hd), so one wrong head among hundreds cannot hide in the whole tensor's error.
template <typename Want>
double worst_head_error(const std::vector<float>& got, const std::vector<Want>& want, int sequences, int T,
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

// More heads than v9's persistent backward has blocks (it walks several heads per block, fetching the next
// while computing one), at the model's width: every head of v7 against the double reference, v9 against v7
// for the same bits, and both twice for the same bits. 80 sequences x 8 heads = 640 heads, over twice the
// 2 x 132 blocks of an H200; T 70 takes v9's loaded (not copied) log-sum-exp.
class GptLabAttentionManyHeads : public ::testing::TestWithParam<int> {};

// Random bf16-exact inputs for B sequences of H heads (head dim 64, RoPE base 10000), the seeds of qkv, dout
// and the bias given, with their double reference; run(version) is one forward + backward of a bf16 row.
struct ManyHeadInputs {
  static constexpr int hd = 64;
  static constexpr double base = 10000;
  AttentionShape shape;
  std::vector<float> qkv, dout, bias, cos, sin;

  ManyHeadInputs(int B, int H, int T, unsigned qkv_seed, unsigned dout_seed, unsigned bias_seed)
      : shape{B, T, H, hd},
        qkv(rounded_to_bf16(random_floats(static_cast<std::size_t>(B) * T * 3 * H * hd, qkv_seed))),
        dout(rounded_to_bf16(random_floats(static_cast<std::size_t>(B) * T * H * hd, dout_seed))),
        bias(random_floats(static_cast<std::size_t>(3) * H * hd, bias_seed, -0.2f, 0.2f)) {
    rope_table(cos, sin, T, hd, base);
  }
  FusedAttentionRun run(const char* version) const {
    return run_version(bf16_version(version), shape, qkv, bias, dout, cos, sin);
  }
  // The double reference, computed on first use: the bit-for-bit tests never ask for it, and at 2304 heads it is
  // most of such a test's time on the CPU.
  const AttentionReference& ref() const {
    if (!ref_) ref_ = attention_reference(qkv, bias, dout, shape.batch, shape.heads, shape.T, hd, base);
    return *ref_;
  }

 private:
  mutable std::optional<AttentionReference> ref_;
};

TEST_P(GptLabAttentionManyHeads, V7MatchesDoubleAndV9OnEveryHead) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  constexpr int B = 80, H = 8, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 17, 19, 18);
  const AttentionReference& ref = in.ref();
  const auto run = [&](const char* version) { return in.run(version); };
  const FusedAttentionRun v7 = run("v7"), v9 = run("v9");
  EXPECT_EQ(v9.out, v7.out);
  EXPECT_EQ(v9.dqkv, v7.dqkv);
  const double out_error = worst_head_error(v7.out, ref.out, B, T, 1, H, hd);
  const double dqkv_error = worst_head_error(v7.dqkv, ref.dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: worst head vs double: v7 out %.2e dqkv %.2e\n", T, B * H, out_error, dqkv_error);
  EXPECT_LT(out_error, kBf16Tolerance);
  EXPECT_LT(dqkv_error, kBf16Tolerance);
  for (const auto& [version, first] : {std::pair{"v7", &v7}, std::pair{"v9", &v9}}) {
    const FusedAttentionRun again = run(version);
    EXPECT_EQ(again.out, first->out);
    EXPECT_EQ(again.dqkv, first->dqkv);
  }
}

INSTANTIATE_TEST_SUITE_P(T, GptLabAttentionManyHeads, ::testing::Values(128, 70),
                         [](const ::testing::TestParamInfo<int>& info) { return "T" + std::to_string(info.param); });

// The sm_90a versions (v10: TMA + wgmma forward, one block per head; v11: v10 persistent and warp specialised,
// each block walking several heads, 768 here against an H200's 132 blocks; v12: v11's forward and a TMA + wgmma
// backward) at the lab's batch 64 and the model's 12 heads: every head against the double reference, and out,
// lse and the gradients (v9's backward on v10's and v11's out and lse, v12's own) against v9 on the same
// inputs. Their softmax is exact where v9's is online, so P is rounded to bf16 after a different scaling and
// they agree with v9 to bf16's rounding, not bit for bit; v11 and v12 compute each head's forward as v10 does,
// so the three agree bit for bit there. Skipped, with the reason, off compute capability 9.0.
class GptLabAttentionSm90a : public ::testing::TestWithParam<int> {};

TEST_P(GptLabAttentionSm90a, MatchDoubleAndV9OnEveryHead) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  if (const std::string why = not_applicable_reason(bf16_version("v10")); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 64, H = 12, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 31, 32, 33);
  const FusedAttentionRun v9 = in.run("v9");
  FusedAttentionRun v10;
  for (const char* version : {"v10", "v11", "v12"}) {
    const FusedAttentionRun run = in.run(version);
    expect_finite(run, version);
    const double out_error = worst_head_error(run.out, in.ref().out, B, T, 1, H, hd);
    const double dqkv_error = worst_head_error(run.dqkv, in.ref().dqkv, B, T, 3, H, hd);
    std::printf("T %d, %d heads: %s worst head vs double: out %.2e dqkv %.2e; vs v9: out %.2e lse %.2e dqkv %.2e\n",
                T, B * H, version, out_error, dqkv_error, rel_l2(run.out, v9.out), rel_l2(run.lse, v9.lse),
                rel_l2(run.dqkv, v9.dqkv));
    EXPECT_LT(out_error, kBf16Tolerance) << version;
    EXPECT_LT(dqkv_error, kBf16Tolerance) << version;
    EXPECT_LT(rel_l2(run.out, v9.out), 1e-2) << version;  // bf16 outputs: a rounding step is 2^-8 relative
    EXPECT_LT(rel_l2(run.lse, v9.lse), 1e-4) << version;  // fp32 throughout
    EXPECT_LT(rel_l2(run.dqkv, v9.dqkv), 1e-2) << version;
    if (v10.out.empty()) {
      v10 = run;
    } else {
      EXPECT_EQ(run.out, v10.out) << version;
      EXPECT_EQ(run.lse, v10.lse) << version;
    }
  }
}

// v13: v12's backward on v9's forward (the same out and lse as v9's own backward sees): dqkv of every head
// against v9's and against the double reference, and twice for the same bits (no atomics, a fixed order). The
// products sum in another order than v9's mma.sync and a few bf16 roundings of P and dS fall the other way,
// so the two agree to bf16's rounding, not bit for bit; a wrong layout, mask or transpose errs by order 1 on
// the heads (or rows past T) it touches.
TEST_P(GptLabAttentionSm90a, V13IsV9sForwardWithV12sBackward) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v13 = bf16_version("v13");
  if (const std::string why = not_applicable_reason(v13); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 64, H = 12, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 41, 42, 43);
  const FusedAttentionRun v9 = in.run("v9");
  const FusedAttentionRun mixed = in.run("v13");
  expect_finite(mixed, "v13");
  ASSERT_EQ(mixed.out, v9.out);
  ASSERT_EQ(mixed.lse, v9.lse);
  const double vs_v9 = worst_head_error(mixed.dqkv, v9.dqkv, B, T, 3, H, hd);
  const double vs_double = worst_head_error(mixed.dqkv, in.ref().dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: v13 (v12's backward on v9's forward), worst head: vs v9 %.2e, vs double %.2e (v9 %.2e)\n",
              T, B * H, vs_v9, vs_double, worst_head_error(v9.dqkv, in.ref().dqkv, B, T, 3, H, hd));
  EXPECT_LT(vs_v9, 1e-2);
  EXPECT_LT(vs_double, kBf16Tolerance);
  EXPECT_EQ(in.run("v13").dqkv, mixed.dqkv);
}

// On a device with the sm_90a path the keeper, v44 (layers.hpp's fused_attention_forward and _backward, what the
// trainers call), is v43's backward with the key phase's masked exponents dropped by a select (the same bits) on the
// forward the batch's heads pick: v9's with fewer than kSm90aForwardMinRounds heads a block of its sm_90a forward's
// grid (R2's batch, 768 heads here), from there v29's, v15's with 16-byte loads, no prefetch and each head's q loaded
// a head ahead (R3's, the least batch that reaches it here). At both, the keeper's out, lse and dqkv equal those of
// the v9 or v15 row's forward with v43's backward bit for bit, every head is within bf16's tolerance of the double
// reference, v44's row gives the same bits again (R4's recomputed backward must equal R3's), the keeper's name, the
// rungs' "attention" fact, names v44 and sm_90a, and its kernels hold three forward blocks an SM and two backward.
class KeeperHeads {
 public:
  explicit KeeperHeads(int batch, int T) : in_(batch, kHeads, T, 51, 52, 53) {}

  // The keeper against the rows its rule names: out, lse and dqkv bit for bit, every head against double.
  void expect_rows_of(bool sm90a_forward) const {
    const auto forward = [](auto... args) { fused_attention_forward(args...); };
    const auto backward = [](auto... args) { fused_attention_backward(args...); };
    const FusedAttentionRun keeper = run_fused_attention<bf16>(fused_attention_configure, forward, backward,
                                                               in_.shape, in_.qkv, in_.bias, in_.dout, in_.cos, in_.sin);
    const AttentionVersion<bf16>& rows_forward = bf16_version(sm90a_forward ? "v15" : "v9");
    const AttentionVersion<bf16>& v43 = bf16_version("v43");
    const auto configure = [&] {
      rows_forward.configure();
      v43.configure();
    };
    const FusedAttentionRun rows = run_fused_attention<bf16>(configure, rows_forward.forward, v43.backward, in_.shape,
                                                             in_.qkv, in_.bias, in_.dout, in_.cos, in_.sin);
    const int B = in_.shape.batch, T = in_.shape.T, hd = in_.shape.head_dim;
    expect_finite(keeper, "v44");
    EXPECT_EQ(keeper.out, rows.out);
    EXPECT_EQ(keeper.lse, rows.lse);
    EXPECT_EQ(keeper.dqkv, rows.dqkv);
    const double out_error = worst_head_error(keeper.out, in_.ref().out, B, T, 1, kHeads, hd);
    const double dqkv_error = worst_head_error(keeper.dqkv, in_.ref().dqkv, B, T, 3, kHeads, hd);
    std::printf("T %d, %d heads, %s's forward: v44 worst head vs double: out %.2e dqkv %.2e\n", T, B * kHeads,
                sm90a_forward ? "v29" : "v9", out_error, dqkv_error);
    EXPECT_LT(out_error, kBf16Tolerance);
    EXPECT_LT(dqkv_error, kBf16Tolerance);
    const FusedAttentionRun row = in_.run("v44");
    EXPECT_EQ(row.out, keeper.out);
    EXPECT_EQ(row.lse, keeper.lse);
    EXPECT_EQ(row.dqkv, keeper.dqkv);
  }

  static constexpr int kHeads = 12;

 private:
  ManyHeadInputs in_;
};

TEST_P(GptLabAttentionSm90a, KeeperGivesV43sBackwardBitsOnTheForwardItsHeadsPick) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v44 = bf16_version("v44");
  if (const std::string why = not_applicable_reason(v44); !why.empty()) GTEST_SKIP() << why;
  const int T = GetParam();
  fused_attention_configure();
  EXPECT_EQ(fused_attention_sm90a_forward_blocks_per_sm(), 3);  // the blocks an SM the kernels were made for
  EXPECT_EQ(fused_attention_sm90a_backward_blocks_per_sm(), 2);
  const int grid = fused_attention_sm90a_forward_grid(), H = KeeperHeads::kHeads;
  const int few = 64, many = (kSm90aForwardMinRounds * grid + H - 1) / H;  // the least batch for v29's forward
  ASSERT_FALSE(sm90a_forward_pays(few * H, grid)) << "grid " << grid;
  ASSERT_FALSE(sm90a_forward_pays((many - 1) * H, grid));
  ASSERT_TRUE(sm90a_forward_pays(many * H, grid));
  KeeperHeads(few, T).expect_rows_of(false);
  KeeperHeads(many, T).expect_rows_of(true);
  const std::string name = bf16_attention_keeper_name();
  EXPECT_EQ(name, bf16_attention_keeper_name(true));
  EXPECT_EQ(name.rfind("v44 ", 0), 0u) << name;
  EXPECT_NE(name.find("sm_90a"), std::string::npos) << name;
}

// v14's backward: v12's backward steps with a whole head in one warp group, two blocks an SM, here on v9's
// forward. The same steps in the same order per element, so dqkv equals v13's (v12's backward on v9's forward)
// bit for bit on every head (768 heads, about three a block, the block's barrier changing phase between them).
TEST_P(GptLabAttentionSm90a, V14IsV13sBackwardBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v14 = bf16_version("v14");
  if (const std::string why = not_applicable_reason(v14); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 64, H = 12, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 61, 62, 63);
  const FusedAttentionRun v13 = in.run("v13");
  const FusedAttentionRun run = in.run("v14");
  expect_finite(run, "v14");
  const double vs_double = worst_head_error(run.dqkv, in.ref().dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: v14 worst head vs double: dqkv %.2e; vs v13 %.2e\n", T, B * H, vs_double,
              rel_l2(run.dqkv, v13.dqkv));
  EXPECT_LT(vs_double, kBf16Tolerance);
  EXPECT_EQ(run.dqkv, v13.dqkv);
}

// v17, v14's backward with the next head's v and dout loaded during the query phase: the same steps in the same
// order, so at 768 heads (about three a block: every load but the first of each block comes early) its dqkv
// equals v16's (v14's backward on the same forward) bit for bit.
TEST_P(GptLabAttentionSm90a, V17IsV16sBackwardBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v17 = bf16_version("v17");
  if (const std::string why = not_applicable_reason(v17); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 64, H = 12, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 71, 72, 73);
  const FusedAttentionRun v16 = in.run("v16");
  const FusedAttentionRun run = in.run("v17");
  expect_finite(run, "v17");
  const double vs_double = worst_head_error(run.dqkv, in.ref().dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: v17 worst head vs double: dqkv %.2e; vs v16 %.2e\n", T, B * H, vs_double,
              rel_l2(run.dqkv, v16.dqkv));
  EXPECT_LT(vs_double, kBf16Tolerance);
  EXPECT_EQ(run.dqkv, v16.dqkv);
}

// v18, v17's backward with each head's lse scaled into shared memory once its boxes have landed (and the next
// head's asked of the L2): the same products of the same values in the same order, so at 768 heads its dqkv equals
// v17's (on the same forward) bit for bit.
TEST_P(GptLabAttentionSm90a, V18IsV17sBackwardBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v18 = bf16_version("v18");
  if (const std::string why = not_applicable_reason(v18); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 64, H = 12, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 81, 82, 83);
  const FusedAttentionRun v17 = in.run("v17");
  const FusedAttentionRun run = in.run("v18");
  expect_finite(run, "v18");
  const double vs_double = worst_head_error(run.dqkv, in.ref().dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: v18 worst head vs double: dqkv %.2e; vs v17 %.2e\n", T, B * H, vs_double,
              rel_l2(run.dqkv, v17.dqkv));
  EXPECT_LT(vs_double, kBf16Tolerance);
  EXPECT_EQ(run.dqkv, v17.dqkv);
}

// v15's forward: v10's forward arithmetic with a whole head in one warp group, three blocks an SM, v read MN-major
// instead of v10's transposed copy: every head's out against the double reference, out and lse against v10's (the
// same products and softmax: equal to bf16's rounding, and the test says whether bit for bit), dqkv (v12's
// backward on v15's out and lse) against double.
TEST_P(GptLabAttentionSm90a, V15MatchesDoubleAndV10OnEveryHead) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v15 = bf16_version("v15");
  if (const std::string why = not_applicable_reason(v15); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 128, H = 12, hd = 64;  // 1536 heads: about four a block at three blocks an SM
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 71, 72, 73);
  const FusedAttentionRun v10 = in.run("v10");
  const FusedAttentionRun run = in.run("v15");
  expect_finite(run, "v15");
  const double out_error = worst_head_error(run.out, in.ref().out, B, T, 1, H, hd);
  const double dqkv_error = worst_head_error(run.dqkv, in.ref().dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: v15 worst head vs double: out %.2e dqkv %.2e; vs v10: out %.2e lse %.2e (%s)\n", T,
              B * H, out_error, dqkv_error, rel_l2(run.out, v10.out), rel_l2(run.lse, v10.lse),
              run.out == v10.out && run.lse == v10.lse ? "bit for bit" : "not bit for bit");
  EXPECT_LT(out_error, kBf16Tolerance);
  EXPECT_LT(dqkv_error, kBf16Tolerance);
  EXPECT_LT(rel_l2(run.out, v10.out), 1e-2);
  EXPECT_LT(rel_l2(run.lse, v10.lse), 1e-4);
}

// v21, v18's backward with dq's RoPE factors fetched under the dq product: the same factors, products and
// roundings, so at 768 heads its dqkv equals v17's (on the same forward) bit for bit, as v18's does.
TEST_P(GptLabAttentionSm90a, V21IsV17sBackwardBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v21 = bf16_version("v21");
  if (const std::string why = not_applicable_reason(v21); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 64, H = 12;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 97, 98, 99);
  const FusedAttentionRun v17 = in.run("v17");
  const FusedAttentionRun run = in.run("v21");
  expect_finite(run, "v21");
  std::printf("T %d, %d heads: v21 vs v17: dqkv %.2e\n", T, B * H, rel_l2(run.dqkv, v17.dqkv));
  EXPECT_EQ(run.dqkv, v17.dqkv);
}

// v19, v15's forward with its loads moved (a head's q and k during the head before, its v during half 0's
// scores, half 1's out staged in v): the same products, softmax and roundings, so at 1536 heads (about four a
// block, every load but each block's first moved) out and lse equal v15's bit for bit, and dqkv (v17's backward
// on them) is within bf16's tolerance of double; and at 48 heads, a head a block, out again.
TEST_P(GptLabAttentionSm90a, V19IsV15sForwardBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v19 = bf16_version("v19");
  if (const std::string why = not_applicable_reason(v19); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 128, H = 12, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 91, 92, 93);
  const FusedAttentionRun v15 = in.run("v15");
  const FusedAttentionRun run = in.run("v19");
  expect_finite(run, "v19");
  const double dqkv_error = worst_head_error(run.dqkv, in.ref().dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: v19 vs v15: out %.2e lse %.2e; dqkv worst head vs double %.2e\n", T, B * H,
              rel_l2(run.out, v15.out), rel_l2(run.lse, v15.lse), dqkv_error);
  EXPECT_EQ(run.out, v15.out);
  EXPECT_EQ(run.lse, v15.lse);
  EXPECT_LT(dqkv_error, kBf16Tolerance);
  const ManyHeadInputs few(4, H, T, 94, 95, 96);  // 48 heads: fewer than the grid, one head a block
  EXPECT_EQ(few.run("v19").out, few.run("v15").out);
}

// Whether a batch of `heads` heads runs the sm_90a forward walks of every lab row, at up to four blocks an SM
// (sm90a_forward_pays on the largest of their grids), so that a bit-for-bit test of two rows compares those
// walks and not v9's forward twice.
bool every_forward_walk_runs(int heads) {
  int device = 0, sms = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sm90a_forward_pays(heads, 4 * sms);
}

// Rows `names` give row `base`'s out, lse and dqkv bit for bit on `many` (every forward walk runs there), and
// its dqkv on `few` (a head a block).
void expect_rows_give_bits_of(std::initializer_list<const char*> names, const char* base, const ManyHeadInputs& many,
                              const ManyHeadInputs& few) {
  const FusedAttentionRun want = many.run(base), few_want = few.run(base);
  for (const char* name : names) {
    const FusedAttentionRun run = many.run(name);
    expect_finite(run, name);
    std::printf("T %d, %d heads: %s vs %s: out %.2e lse %.2e dqkv %.2e\n", many.shape.T,
                many.shape.batch * many.shape.heads, name, base, rel_l2(run.out, want.out), rel_l2(run.lse, want.lse),
                rel_l2(run.dqkv, want.dqkv));
    EXPECT_EQ(run.out, want.out) << name;
    EXPECT_EQ(run.lse, want.lse) << name;
    EXPECT_EQ(run.dqkv, want.dqkv) << name;
    EXPECT_EQ(few.run(name).dqkv, few_want.dqkv) << name;
  }
}

// v22 to v24: v18's kernels with the preparation's bias and RoPE factors fetched by 16-byte loads (v23's and v24's
// forwards at four blocks an SM). The same values in the same arithmetic, so at 2304 heads (at least four a block
// in every forward: the sm_90a forward walks run) out, lse and dqkv equal v18's row's (the lab's v15 forward and
// v18 backward) bit for bit; and at 48 heads, v9's forward, dqkv again.
TEST_P(GptLabAttentionSm90a, V22ToV24AreV18BitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v24 = bf16_version("v24");
  if (const std::string why = not_applicable_reason(v24); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 192, H = 12;
  ASSERT_TRUE(every_forward_walk_runs(B * H));
  const int T = GetParam();
  expect_rows_give_bits_of({"v22", "v23", "v24"}, "v18", ManyHeadInputs(B, H, T, 101, 102, 103),
                           ManyHeadInputs(4, H, T, 104, 105, 106));
}

// v25, v22's backward with dq stored from the registers and the next head's q loaded with its v and dout: the
// same values and roundings, so at 768 heads (about three a block: every q but each block's first loaded early)
// its dqkv equals v22's (on the same forward) bit for bit, and at 48 heads, a head a block, again.
TEST_P(GptLabAttentionSm90a, V25IsV22sBackwardBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v25 = bf16_version("v25");
  if (const std::string why = not_applicable_reason(v25); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 64, H = 12, hd = 64;
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 111, 112, 113);
  const FusedAttentionRun v22 = in.run("v22");
  const FusedAttentionRun run = in.run("v25");
  expect_finite(run, "v25");
  const double vs_double = worst_head_error(run.dqkv, in.ref().dqkv, B, T, 3, H, hd);
  std::printf("T %d, %d heads: v25 worst head vs double: dqkv %.2e; vs v22 %.2e\n", T, B * H, vs_double,
              rel_l2(run.dqkv, v22.dqkv));
  EXPECT_LT(vs_double, kBf16Tolerance);
  EXPECT_EQ(run.dqkv, v22.dqkv);
  const ManyHeadInputs few(4, H, T, 114, 115, 116);
  EXPECT_EQ(few.run("v25").dqkv, few.run("v22").dqkv);
}

// v26, v22's kernels without the L2 prefetch of the next head's boxes: the same loads into the same tiles, so at
// 2304 heads (at least four a block: the forward walks run) out, lse and dqkv equal v22's row's bit for bit.
TEST_P(GptLabAttentionSm90a, V26IsV22BitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const AttentionVersion<bf16>& v26 = bf16_version("v26");
  if (const std::string why = not_applicable_reason(v26); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 192, H = 12;
  ASSERT_TRUE(every_forward_walk_runs(B * H));
  const int T = GetParam();
  const ManyHeadInputs in(B, H, T, 121, 122, 123);
  const FusedAttentionRun v22 = in.run("v22");
  const FusedAttentionRun run = in.run("v26");
  expect_finite(run, "v26");
  std::printf("T %d, %d heads: v26 vs v22: out %.2e lse %.2e dqkv %.2e\n", T, B * H, rel_l2(run.out, v22.out),
              rel_l2(run.lse, v22.lse), rel_l2(run.dqkv, v22.dqkv));
  EXPECT_EQ(run.out, v22.out);
  EXPECT_EQ(run.lse, v22.lse);
  EXPECT_EQ(run.dqkv, v22.dqkv);
}

// v27 to v29, v26 with its loads moved (the RoPE factors asked of the L1; v28 also the next head's boxes asked of
// the L2 half a head ahead; v29 each head's q loaded a head ahead into a tile of its own): no value changes, so
// at 2304 heads (every forward walk runs) out, lse and dqkv equal v26's bit for bit, and at 48 heads (a head a
// block: no next head) again.
TEST_P(GptLabAttentionSm90a, V27ToV29AreV26BitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  for (const char* name : {"v26", "v27", "v28", "v29"})
    if (const std::string why = not_applicable_reason(bf16_version(name)); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 192, H = 12;
  ASSERT_TRUE(every_forward_walk_runs(B * H));
  const int T = GetParam();
  expect_rows_give_bits_of({"v27", "v28", "v29"}, "v26", ManyHeadInputs(B, H, T, 131, 132, 133),
                           ManyHeadInputs(4, H, T, 134, 135, 136));
}

// v30 and v31, the keeper with its backward loading the next head's out once query half 0 has read its tile:
// the same loads into the same tiles, so at 2304 heads (each block's later heads' out loaded early) out, lse and
// dqkv equal the keeper's row's bit for bit, and at 48 (a head a block: its first head's alone) its dqkv.
TEST_P(GptLabAttentionSm90a, V30AndV31AreV29BitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  for (const char* name : {"v29", "v30", "v31"})
    if (const std::string why = not_applicable_reason(bf16_version(name)); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 192, H = 12;
  ASSERT_TRUE(every_forward_walk_runs(B * H));
  const int T = GetParam();
  expect_rows_give_bits_of({"v30", "v31"}, "v29", ManyHeadInputs(B, H, T, 141, 142, 143),
                           ManyHeadInputs(4, H, T, 144, 145, 146));
}

// v32, v29 with its backward loading each head's q a head ahead into a tile of its own (and the head's lse, delta and
// barriers in dS^T's unused rows), v33, v32 with both query halves' dq products issued at once, v34, v29 with those
// products issued at once, v35, v34 with key half 1's scores issued before key half 0's gradients are stored, v36, v34
// with dq staged in dS^T's first tile and q loaded early, v37, v34 with dk's and dq's RoPE factors fetched under their
// products, v38 (the keeper's until v44), v37 with them from the table's lane-ordered copy, v39, v34 with a masked
// chunk's exponents dropped by a select, v40, both, v41, v40 with dk's factors as v37's, and v42, v38 with the select
// in key half 1 alone: the same values in the same arithmetic, so at 2304 heads (blocks walking many heads) and at 48
// (a head a block) out, lse and dqkv equal v29's row's bit for bit.
TEST_P(GptLabAttentionSm90a, V32ToV42AreV29BitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  for (const char* name : {"v29", "v32", "v33", "v34", "v35", "v36", "v37", "v38", "v39", "v40", "v41", "v42"})
    if (const std::string why = not_applicable_reason(bf16_version(name)); !why.empty()) GTEST_SKIP() << why;
  constexpr int B = 192, H = 12;
  ASSERT_TRUE(every_forward_walk_runs(B * H));
  const int T = GetParam();
  expect_rows_give_bits_of({"v32", "v33", "v34", "v35", "v36", "v37", "v38", "v39", "v40", "v41", "v42"}, "v29",
                           ManyHeadInputs(B, H, T, 151, 152, 153), ManyHeadInputs(4, H, T, 154, 155, 156));
}

// v43, v38 with each row's delta taken from its scores (rowsum(P dP) in fp32) instead of from the bf16 out, and dq made
// by a query phase of its own: out and lse are the keeper's forward's (v29's row's) bit for bit; dqkv agrees with v29's
// to bf16's rounding, not bit for bit, and every head is within bf16's tolerance of the double reference (a wrong mask,
// layout or delta errs by order 1 on the heads or rows it touches); the same bits twice. v44 (the keeper), v43 with
// v39's select, v45, v44 with a head's rows landing in two parts, v46, v44 with a branch on whether a chunk is masked,
// v47, v45 and v46 together, v48, v46's branch in key half 1 alone, v49, v44's steps on a ring of three head slots
// shared by two warp groups, v52, v49 with v46's branch, and v50 and v51, the keeper's forward steps on a ring of four
// slots shared by three warp groups with v44's and v49's backwards, give v43's bits, and v50's and v51's out and lse
// are v29's. At 2304 heads (blocks walking many heads, both dout tiles, both parts' barriers and each of the rings'
// barriers in turn, more than once; v50's forward from 4 heads a warp group, as the keeper's from 4 a block) and at 48
// (a head a block; v9's forward in every row).
TEST_P(GptLabAttentionSm90a, V43TakesDeltaFromItsScoresAndV44ToV52GiveItsBits) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  for (const char* name : {"v29", "v43", "v44", "v45", "v46", "v47", "v48", "v49", "v50", "v51", "v52"})
    if (const std::string why = not_applicable_reason(bf16_version(name)); !why.empty()) GTEST_SKIP() << why;
  constexpr int H = 12, hd = 64;
  const int T = GetParam();
  for (const int B : {192, 4}) {
    const ManyHeadInputs in(B, H, T, 161, 162, 163);
    const FusedAttentionRun v29 = in.run("v29"), v43 = in.run("v43");
    expect_finite(v43, "v43");
    ASSERT_EQ(v43.out, v29.out);
    ASSERT_EQ(v43.lse, v29.lse);
    const double vs_v29 = worst_head_error(v43.dqkv, v29.dqkv, B, T, 3, H, hd);
    const double vs_double = worst_head_error(v43.dqkv, in.ref().dqkv, B, T, 3, H, hd);
    std::printf("T %d, %d heads: v43's dqkv, worst head: vs v29 %.2e, vs double %.2e (v29 %.2e)\n", T, B * H, vs_v29,
                vs_double, worst_head_error(v29.dqkv, in.ref().dqkv, B, T, 3, H, hd));
    EXPECT_LT(vs_v29, 1e-2) << B << " sequences";
    EXPECT_LT(vs_double, kBf16Tolerance) << B << " sequences";
    EXPECT_EQ(in.run("v43").dqkv, v43.dqkv) << B << " sequences";
    EXPECT_EQ(in.run("v44").dqkv, v43.dqkv) << B << " sequences";
    const FusedAttentionRun v45 = in.run("v45");
    EXPECT_EQ(v45.out, v29.out) << B << " sequences";
    EXPECT_EQ(v45.dqkv, v43.dqkv) << B << " sequences";
    for (const char* name : {"v46", "v47", "v48", "v49", "v52"})
      EXPECT_EQ(in.run(name).dqkv, v43.dqkv) << name << ", " << B << " sequences";
    for (const char* name : {"v50", "v51"}) {
      const FusedAttentionRun ring = in.run(name);
      EXPECT_EQ(ring.out, v29.out) << name << ", " << B << " sequences";
      EXPECT_EQ(ring.lse, v29.lse) << name << ", " << B << " sequences";
      EXPECT_EQ(ring.dqkv, v43.dqkv) << name << ", " << B << " sequences";
    }
  }
}

// A backward with qkv's bias gradient on the sm_90a path (lab_attention_qkv_bias_bf16's v2, on v26's walk, v3 to v9 on
// v34's and v37's to v42's, v10, the trainers', on the keeper's, v44's, v11 to v15 on v45's to v49's, v16 on v52's) on
// B sequences of T: its dqkv equals the plain backward's bit for bit (v38's row's, the same bits as v26's to v42's; v10
// the keeper's, v44's row's, whose arithmetic differs; v11 to v16 v45's to v49's and v52's rows'); its bias gradient is
// within fp32's rounding of the double column sums of that dqkv over every row (rows from T on, which no block stores,
// add nothing), and the same bits in a second run. The bias gradient and the partials are poisoned before each run, so
// a (sequence, head) left unwritten shows.
using QkvBiasBackward = AttentionBackwardAndBiasGradient*;
// A lab walk's form with qkv's bias sums and its configure (beside the keeper's forward's).
template <int kVersion>
std::pair<QkvBiasBackward, void (*)()> walk_with_bias_sums() {
  return {&walk_backward_and_bias_gradient<kVersion>,
          &configure_in_order<walk_configure<kVersion>, fused_attention_configure>};
}
void expect_qkv_bias_backward(QkvBiasBackward with_sums, void (*configure)(), const ManyHeadInputs& in,
                              const char* same_dqkv_as) {
  const int B = in.shape.batch, T = in.shape.T;
  const FusedAttentionRun plain = in.run(same_dqkv_as);
  const int cols = 3 * in.shape.channels();
  const std::size_t partial_floats = attention_bias_partials_floats(in.shape);
  testing::Device dev;
  float* dbias = dev.alloc<float>(cols);
  float* partials = dev.alloc<float>(partial_floats);
  const auto forward = [](auto... args) { fused_attention_forward(args...); };
  const auto backward = [&](bf16* dqkv, float* delta, const bf16* dout, const bf16* out, const float* lse,
                            const bf16* qkv, const float* bias, RopeTable rope, const AttentionShape& s,
                            cudaStream_t stream) {
    with_sums(dqkv, dbias, partials, delta, dout, out, lse, qkv, bias, rope, s, stream);
  };
  const auto run = [&] {
    ROOFBENCH_CUDA(cudaMemset(dbias, 0xff, cols * sizeof(float)));
    ROOFBENCH_CUDA(cudaMemset(partials, 0xff, partial_floats * sizeof(float)));
    return run_fused_attention<bf16>(configure, forward, backward, in.shape, in.qkv, in.bias, in.dout, in.cos, in.sin);
  };
  const FusedAttentionRun first = run();
  const std::vector<float> first_bias = testing::Device::download(dbias, cols);
  EXPECT_EQ(first.dqkv, plain.dqkv) << "batch " << B << ", T " << T;
  std::vector<double> sums(cols, 0.0);
  for (std::size_t e = 0; e < first.dqkv.size(); ++e) sums[e % cols] += first.dqkv[e];
  const double error = relative_l2_error(first_bias.data(), sums.data(), sums.size());
  std::printf("T %d, %d heads: the bias gradient vs double sums of dqkv: rel L2 %.2e\n", T, B * in.shape.heads, error);
  EXPECT_LT(error, 1e-5) << "batch " << B << ", T " << T;  // NaN (a poisoned sum) fails too
  run();
  EXPECT_EQ(testing::Device::download(dbias, cols), first_bias) << "batch " << B << ", T " << T;
}

// At 2304 heads (several a block) and at 48 (a head a block); at T 128 also T 17 (one row in the second block)
// and T 1 (one block, one row). The trainers' kernel holds two blocks an SM, as the keeper's backward.
TEST_P(GptLabAttentionSm90a, QkvBiasBackwardIsTheKeepersWithDqkvsColumnSums) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  for (const char* name :
       {"v26", "v34", "v37", "v38", "v39", "v40", "v41", "v42", "v44", "v45", "v46", "v47", "v48", "v49", "v52"})
    if (const std::string why = not_applicable_reason(bf16_version(name)); !why.empty()) GTEST_SKIP() << why;
  const int T = GetParam();
  const std::pair<QkvBiasBackward, void (*)()> kernels[] = {
      walk_with_bias_sums<26>(), walk_with_bias_sums<34>(), walk_with_bias_sums<37>(), walk_with_bias_sums<38>(),
      walk_with_bias_sums<39>(), walk_with_bias_sums<40>(), walk_with_bias_sums<41>(), walk_with_bias_sums<42>()};
  std::vector<ManyHeadInputs> inputs;
  inputs.emplace_back(192, 12, T, 151, 152, 153);
  inputs.emplace_back(4, 12, T, 151, 152, 153);
  if (T == 128)
    for (const int short_T : {17, 1}) inputs.emplace_back(4, 12, short_T, 151, 152, 153);
  const auto expect_at_every_shape = [&inputs](QkvBiasBackward with_sums, void (*configure)(),
                                               const char* same_dqkv_as) {
    for (const ManyHeadInputs& in : inputs) expect_qkv_bias_backward(with_sums, configure, in, same_dqkv_as);
  };
  for (const auto& [with_sums, configure] : kernels) expect_at_every_shape(with_sums, configure, "v38");
  expect_at_every_shape(&fused_attention_sm90a_backward_and_bias_gradient, &fused_attention_configure, "v44");
  for (const auto& [name, walk] : {std::pair{"v45", walk_with_bias_sums<45>()},
                                   std::pair{"v46", walk_with_bias_sums<46>()},
                                   std::pair{"v47", walk_with_bias_sums<47>()},
                                   std::pair{"v48", walk_with_bias_sums<48>()},
                                   std::pair{"v49", walk_with_bias_sums<49>()},
                                   std::pair{"v52", walk_with_bias_sums<52>()}})
    expect_at_every_shape(walk.first, walk.second, name);
  EXPECT_EQ(fused_attention_sm90a_backward_and_bias_gradient_blocks_per_sm(), 2);
}

// 128: every tile full; 70: the second warp group's rows partly padding; 50: its rows all padding.
INSTANTIATE_TEST_SUITE_P(T, GptLabAttentionSm90a, ::testing::Values(128, 70, 50),
                         [](const ::testing::TestParamInfo<int>& info) { return "T" + std::to_string(info.param); });

}  // namespace
}  // namespace roofbench::gpt::cuda::lab
