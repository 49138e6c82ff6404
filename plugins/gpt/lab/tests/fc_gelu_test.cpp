// lab_fc_gelu_bf16 v5-v27 (fc_gelu_sm90a.hpp): x w^T against double, its GELU against v4's GELU pass run on
// the same x w^T, bit for bit, and v6-v27 against v5 bit for bit, on shapes with partial tiles in rows and columns, one
// stage of K, more stages than the ring holds, and more tiles than v6's blocks (so each walks several). Skips with
// the reason where they cannot run (no sm_90a device or code).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fc_gelu_sm90a.hpp"
#include "gpu_test_util.hpp"
#include "lab_reference.hpp"
#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

using testing::Device;
using testing::from_bf16;
using testing::random_floats;
using testing::rel_l2;
using testing::to_bf16;

std::string v5_not_applicable() {
  try {
    fc_gelu_sm90a_configure();
    return "";
  } catch (const NotApplicable& e) {
    return e.what();
  }
}

std::vector<std::uint16_t> bits_of(const std::vector<bf16>& v) {
  std::vector<std::uint16_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(bf16));
  return out;
}

struct FcShape {
  int rows, in, out;
};

class GptLabFcGeluV5 : public ::testing::TestWithParam<FcShape> {};

TEST_P(GptLabFcGeluV5, MatchesDoubleAndV4sGeluPassBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  if (const std::string why = v5_not_applicable(); !why.empty()) GTEST_SKIP() << why;
  const auto [rows, in, out] = GetParam();
  const std::size_t n = static_cast<std::size_t>(rows) * out;
  // Weights at the model's scale, so that x w^T + bias spans GELU's tails and its curved middle.
  const auto x = from_bf16(to_bf16(random_floats(static_cast<std::size_t>(rows) * in, 41)));
  const auto w = from_bf16(to_bf16(random_floats(static_cast<std::size_t>(out) * in, 42, -0.1f, 0.1f)));
  // A few columns' bias far out, so that their pre-activations leave both tables (|z| >= 8, and >= 2^16) and the
  // epilogues' in-place paths run.
  auto bias_values = random_floats(out, 43, -0.5f, 0.5f);
  const float far[] = {20.0f, -20.0f, 1e5f, -1e5f};
  for (int i = 0; i < 4; ++i) bias_values[static_cast<std::size_t>(i) * out / 4 + 1] = far[i];
  const auto bias = from_bf16(to_bf16(bias_values));
  Device dev;
  // Poisoned first: an element a version leaves unwritten stays NaN and fails the checks.
  const std::vector<bf16> nan(n, to_bf16({std::numeric_limits<float>::quiet_NaN()})[0]);
  const auto poisoned = [&] {
    bf16* p = dev.alloc<bf16>(n);
    ROOFBENCH_CUDA(cudaMemcpy(p, nan.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
    return p;
  };
  bf16 *xw = poisoned(), *gelu = poisoned(), *gelu_v4 = dev.alloc<bf16>(n);
  const bf16 *x_dev = dev.upload(to_bf16(x)), *w_dev = dev.upload(to_bf16(w)), *bias_dev = dev.upload(to_bf16(bias));
  fc_gelu_sm90a(kFirstFcGeluSm90a, xw, gelu, x_dev, w_dev, bias_dev, rows, in, out, nullptr);
  gelu_forward_add_bias(gelu_v4, xw, bias_dev, rows, out, nullptr);

  // Against double on every row of the small shapes, every 37th row and the last of the large one.
  std::vector<int> picks;
  for (int r = 0; r < rows; r += rows > 1000 ? 37 : 1) picks.push_back(r);
  if (picks.back() != rows - 1) picks.push_back(rows - 1);
  const auto xw_host = Device::download(xw, n);
  const auto xw_float = from_bf16(xw_host);
  std::vector<double> ref, got;
  for (const int r : picks)
    for (int c = 0; c < out; ++c) {
      double sum = 0;
      for (int k = 0; k < in; ++k)
        sum += double{x[static_cast<std::size_t>(r) * in + k]} * w[static_cast<std::size_t>(c) * in + k];
      ref.push_back(sum);
      got.push_back(xw_float[static_cast<std::size_t>(r) * out + c]);
    }
  EXPECT_LT(rel_l2(got, ref), 4e-3);  // bf16's rounding of each output, 2^-9 at most
  const auto gelu_host = bits_of(Device::download(gelu, n));
  EXPECT_EQ(gelu_host, bits_of(Device::download(gelu_v4, n)));
  for (int version = kFirstFcGeluSm90a + 1; version <= kLastFcGeluSm90a; ++version) {
    SCOPED_TRACE("v" + std::to_string(version));
    bf16 *xw_other = poisoned(), *gelu_other = poisoned();
    try {
      fc_gelu_sm90a(version, xw_other, gelu_other, x_dev, w_dev, bias_dev, rows, in, out, nullptr);
      ROOFBENCH_CUDA(cudaDeviceSynchronize());
    } catch (const std::exception& e) {
      FAIL() << "v" << version << ": " << e.what();  // a failed kernel leaves the context unusable: stop here
    }
    EXPECT_EQ(bits_of(xw_host), bits_of(Device::download(xw_other, n)));
    EXPECT_EQ(gelu_host, bits_of(Device::download(gelu_other, n)));
  }
}

// 300 rows: three tiles, the last partial; 200 columns: two tiles of v5's, the second partial, one of v7's; in 64:
// one stage, 512 (R2-R4's channels): eight stages through the rings of three and four stages, so each stage is
// refilled; 8192 x 2048: 1024 tiles of v5's, about four a v6 block on a 132-SM GPU (512 of v7's, about four a
// block); 40000 rows: 313 row blocks with one, two and three column tiles (64, 256 and 320 columns), so that on a
// 132-SM GPU a v13 or v15 block's range of tiles starts and ends inside row blocks (with one column tile, its ping-pong
// groups take alternate row blocks).
INSTANTIATE_TEST_SUITE_P(Shapes, GptLabFcGeluV5,
                         ::testing::Values(FcShape{300, 64, 200}, FcShape{300, 512, 200}, FcShape{512, 512, 2048},
                                           FcShape{8192, 512, 2048}, FcShape{40000, 128, 64}, FcShape{40000, 64, 256},
                                           FcShape{40000, 64, 320}),
                         [](const auto& info) {
                           return "rows" + std::to_string(info.param.rows) + "_in" + std::to_string(info.param.in) +
                                  "_out" + std::to_string(info.param.out);
                         });

// lab_fc_gelu_backward_bf16 v2 (the keeper, fc_gelu_backward_sm90a) against double on every element: dz = d_gelu
// GELU'(bf16(xw + bias)) with d_gelu = dy w, and the bias gradient against the double column sums of that dz.
// 300 rows: a partial row block; out 200: a partial column tile; out 136: a whole 64-column half past the matrix; in
// 512: eight stages through the four-stage ring; 8192 x 2048: 1024 tiles, about four a warp group on a 132-SM GPU
// (xw_full's parity wraps). The later versions (v3: pairs of blocks) against v2 bit for bit, dz and the bias gradient.
TEST(GptLabFcGeluBackwardV2, MatchesDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  if (const std::string why = v5_not_applicable(); !why.empty()) GTEST_SKIP() << why;
  for (const FcShape shape : {FcShape{300, 512, 200}, FcShape{300, 512, 136}, FcShape{8192, 64, 2048}}) {
    const auto [rows, in, out] = shape;
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out));
    const std::size_t n = static_cast<std::size_t>(rows) * out;
    const auto dy = from_bf16(to_bf16(random_floats(static_cast<std::size_t>(rows) * in, 51, -0.1f, 0.1f)));
    const auto w = from_bf16(to_bf16(random_floats(static_cast<std::size_t>(in) * out, 52, -0.1f, 0.1f)));
    const auto xw = from_bf16(to_bf16(random_floats(n, 53, -3, 3)));
    const auto bias = from_bf16(to_bf16(random_floats(out, 54, -0.5f, 0.5f)));
    Device dev;
    const bf16 *dy_dev = dev.upload(to_bf16(dy)), *w_dev = dev.upload(to_bf16(w)), *xw_dev = dev.upload(to_bf16(xw)),
               *bias_dev = dev.upload(to_bf16(bias));
    float* partials = dev.alloc<float>(fc_gelu_backward_partials_floats(rows, out));
    // dz poisoned (NaN) and the bias gradient too, so that an element a version leaves unwritten fails the checks.
    const auto run = [&](int version) {
      bf16* dz = dev.upload(to_bf16(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN())));
      float* dbias =
          dev.upload(std::vector<float>(static_cast<std::size_t>(out), std::numeric_limits<float>::quiet_NaN()));
      fc_gelu_backward_sm90a(version, dz, dbias, partials, dy_dev, w_dev, xw_dev, bias_dev, rows, in, out, nullptr);
      ROOFBENCH_CUDA(cudaDeviceSynchronize());
      return std::pair{Device::download(dz, n), Device::download(dbias, static_cast<std::size_t>(out))};
    };
    const auto [dz_first, dbias_got] = run(kFirstFcGeluBackwardSm90a);
    const auto got = from_bf16(dz_first);
    for (int version = kFirstFcGeluBackwardSm90a + 1; version <= kLastFcGeluBackwardSm90a; ++version) {
      SCOPED_TRACE("v" + std::to_string(version));
      const auto [dz_other, dbias_other] = run(version);
      EXPECT_EQ(bits_of(dz_first), bits_of(dz_other));
      EXPECT_EQ(0, std::memcmp(dbias_got.data(), dbias_other.data(), dbias_got.size() * sizeof(float)));
    }
    // GELU's backward by the lab's reference, on the bf16 pre-activations the kernel takes GELU' of (their bias
    // already in them) and d_gelu = dy w in double.
    std::vector<float> pre(n), dgelu(n);
    for (std::size_t e = 0; e < n; ++e) pre[e] = xw[e] + bias[e % out];
    pre = from_bf16(to_bf16(pre));
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < out; ++c) {
        double sum = 0;
        for (int k = 0; k < in; ++k)
          sum += double{dy[static_cast<std::size_t>(r) * in + k]} * w[static_cast<std::size_t>(k) * out + c];
        dgelu[static_cast<std::size_t>(r) * out + c] = static_cast<float>(sum);
      }
    const auto ref = reference::bias_gelu_reference(pre, std::vector<float>(out, 0.0f), dgelu, rows, out);
    EXPECT_LT(rel_l2(got, ref.dz), 8e-3);  // d_gelu and dz each rounded to bf16
    EXPECT_LT(rel_l2(dbias_got, ref.dbias), 4e-3);  // fp32 sums of unrounded products
  }
}

TEST(GptLabFcGeluV5Shapes, RefusesWhatItCannotTile) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  if (const std::string why = v5_not_applicable(); !why.empty()) GTEST_SKIP() << why;
  Device dev;
  bf16* buf = dev.alloc<bf16>(1 << 16);
  const auto run = [&](int version, bf16* xw, int in, int out) {
    fc_gelu_sm90a(version, xw, buf, buf, buf, buf, 128, in, out, nullptr);
  };
  EXPECT_THROW(run(kFirstFcGeluSm90a, buf, 96, 128), Error);          // in not a multiple of 64
  EXPECT_THROW(run(kFirstFcGeluSm90a, buf, 64, 100), Error);          // out not a multiple of 8
  EXPECT_THROW(run(kFirstFcGeluSm90a, buf + 1, 64, 128), Error);      // xw not 16-byte aligned
  EXPECT_THROW(run(13, buf, 576, 128), Error);                       // x's rows too wide to keep resident
  EXPECT_THROW(run(kLastFcGeluSm90a + 1, buf, 64, 128), Error);       // no such version
}

}  // namespace
}  // namespace roofbench::gpt::cuda::lab
