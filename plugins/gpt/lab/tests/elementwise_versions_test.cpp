// The kernel lab's GELU passes (elementwise_versions.hpp) on small inputs: fp32 v1's and v2's bias + GELU
// forwards against each other and double, every row of both tables against double, and the bf16 kernels
// against each other bit for bit (the tables against erff in place, the keeper's added bias against the bias
// added beforehand).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bf16.hpp"
#include "elementwise_versions.hpp"
#include "gpu_test_util.hpp"
#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

using testing::Device;
using testing::from_bf16;
using testing::gelu_double;
using testing::random_floats;
using testing::rel_l2;
using testing::to_bf16;

double gelu_derivative_double(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) * 0.39894228040143268;
}

// fp32 v1's scalar and v2's 16-byte bias + GELU forwards against each other and double. 300 rows; 136 columns
// (a multiple of 4, not of a block's), 2048, and 30 (not a multiple of 4: v2 falls back to the scalar kernel).
class GptLabBiasGelu : public ::testing::TestWithParam<int> {};

TEST_P(GptLabBiasGelu, VectorizedMatchesScalarAndDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  const int rows = 300, cols = GetParam(), n = rows * cols;
  const auto z = random_floats(n, 21, -4, 4), bias = random_floats(cols, 23);
  std::vector<double> pre_ref(n), out_ref(n);
  for (int i = 0; i < n; ++i) {
    pre_ref[i] = double{z[i]} + bias[i % cols];
    out_ref[i] = gelu_double(pre_ref[i]);
  }
  Device dev;
  // z is updated in place, so each kernel gets its own copy.
  float *z_vec = dev.upload(z), *z_scalar = dev.upload(z), *out_vec = dev.alloc<float>(n),
        *out_scalar = dev.alloc<float>(n);
  // The vectorized kernel reads the bias a float at a time: give it one 4 bytes past a 16-byte boundary (a
  // bias's place in the flat parameters need not be aligned).
  std::vector<float> shifted(1, 0.0f);
  shifted.insert(shifted.end(), bias.begin(), bias.end());
  bias_gelu_forward_vec4(out_vec, z_vec, dev.upload(shifted) + 1, rows, cols, nullptr);
  bias_gelu_forward_scalar(out_scalar, z_scalar, dev.upload(bias), rows, cols, nullptr);
  const auto pre_vec = Device::download(z_vec, n), o_vec = Device::download(out_vec, n);
  EXPECT_EQ(pre_vec, Device::download(z_scalar, n));  // the same fp32 additions
  EXPECT_LT(rel_l2(o_vec, Device::download(out_scalar, n)), 1e-6);
  EXPECT_LT(rel_l2(pre_vec, pre_ref), 1e-6);
  EXPECT_LT(rel_l2(o_vec, out_ref), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cols, GptLabBiasGelu, ::testing::Values(136, 2048, 30),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "C" + std::to_string(info.param);
                         });

// Elem's values as the device stores them: bf16 rounds.
template <typename Elem>
std::vector<float> stored(std::vector<float> x) {
  if constexpr (std::is_same_v<Elem, bf16>)
    for (float& e : x) e = round_to_bf16(e);
  return x;
}
template <typename Elem>
std::vector<Elem> as_elems(const std::vector<float>& x) {
  if constexpr (std::is_same_v<Elem, bf16>)
    return to_bf16(x);
  else
    return x;
}
template <typename Elem>
std::vector<float> as_floats(const std::vector<Elem>& x) {
  if constexpr (std::is_same_v<Elem, bf16>)
    return from_bf16(x);
  else
    return x;
}

// Every row of a table, forward then backward on 300 rows x 136 columns, against double on the inputs as
// stored: GELU of the pre-activation the row's BiasAdded says (z + bias, z, or bf16(z + bias)), dz = dout
// GELU'(that), dbias its column sums. The fp32 bias for forward_pass rows, the bf16 one for both_passes rows.
template <typename Elem>
void check_every_row(std::span<const ElementwiseVersion<Elem>> table, double tolerance) {
  const int rows = 300, cols = 136, n = rows * cols;
  const auto z = stored<Elem>(random_floats(n, 91, -4, 4)), dout = stored<Elem>(random_floats(n, 92));
  const auto bias = random_floats(cols, 93, -0.5f, 0.5f), bias16 = stored<bf16>(bias);
  for (const ElementwiseVersion<Elem>& version : table) {
    SCOPED_TRACE(version.name);
    std::vector<double> out_ref(n), dz_ref(n), dbias_ref(cols, 0);
    for (int i = 0; i < n; ++i) {
      double pre = z[i];
      if (version.bias == BiasAdded::forward_pass) pre = stored<Elem>({static_cast<float>(z[i] + bias[i % cols])})[0];
      if (version.bias == BiasAdded::both_passes) pre = round_to_bf16(z[i] + bias16[i % cols]);
      out_ref[i] = gelu_double(pre);
      dz_ref[i] = dout[i] * gelu_derivative_double(pre);
      dbias_ref[i % cols] += dz_ref[i];
    }
    Device dev;
    GeluTensors<Elem> t;
    t.z = dev.upload(as_elems<Elem>(z)), t.out = dev.alloc<Elem>(n), t.dout = dev.upload(as_elems<Elem>(dout));
    t.dz = dev.alloc<Elem>(n), t.dbias = dev.alloc<float>(cols);
    t.partials = dev.alloc<float>(column_partials_floats(rows, cols));
    t.bias = dev.upload(bias), t.bias16 = dev.upload(to_bf16(bias16)), t.rows = rows, t.cols = cols;
    version.forward(t, nullptr);
    version.backward(t, nullptr);
    EXPECT_LT(rel_l2(as_floats(Device::download(t.out, n)), out_ref), tolerance);
    EXPECT_LT(rel_l2(as_floats(Device::download(t.dz, n)), dz_ref), tolerance);
    EXPECT_LT(rel_l2(Device::download(t.dbias, cols), dbias_ref), tolerance);
  }
}

// The tables' axes and keepers as lab_cases.cpp's descriptions and the rungs have them: R1's v3, R2-R4's v4.
TEST(GptLab, ElementwiseTablesNameTheirKeepers) {
  const auto keepers = [](auto table) {
    std::vector<std::string> names;
    for (const auto& row : table)
      if (row.keeper) names.push_back(row.name);
    return names;
  };
  EXPECT_EQ(fp32_elementwise_versions().size(), 3u);
  EXPECT_EQ(bf16_elementwise_versions().size(), 4u);
  EXPECT_EQ(keepers(fp32_elementwise_versions()), std::vector<std::string>{"v3"});
  EXPECT_EQ(keepers(bf16_elementwise_versions()), std::vector<std::string>{"v4"});
  EXPECT_EQ(fp32_elementwise_version("v3").bias, BiasAdded::gemm_epilogue);
  EXPECT_EQ(bf16_elementwise_version("v1").bias, BiasAdded::forward_pass);
  EXPECT_THROW(fp32_elementwise_version("v4"), Error);
  EXPECT_THROW(bf16_elementwise_version("v5"), Error);
}

TEST(GptLab, EveryElementwiseVersionMatchesDouble) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  check_every_row(fp32_elementwise_versions(), 1e-5);
  check_every_row(bf16_elementwise_versions(), 1e-2);
}

// The bits of count bf16 values on the device, for comparing two kernels' outputs exactly.
std::vector<std::uint16_t> bf16_bits(const bf16* device, std::size_t count) {
  const auto values = Device::download(device, count);
  std::vector<std::uint16_t> bits(count);
  std::memcpy(bits.data(), static_cast<const void*>(values.data()), count * sizeof(std::uint16_t));
  return bits;
}

// The bf16 GELU passes through their tables (bf16_table.hpp; v3, the keeper's kernels without the bias) give
// the bits of the in-place kernels (v2): on every bf16 bit pattern (256 x 256, NaN and infinities included,
// which the tables leave to the in-place arithmetic), and on 16684 rows, more chunks than the table kernel
// has block rows, so its blocks take several chunks each.
TEST(GptLab, Bf16GeluTablesMatchInPlaceBitForBit) {
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
    for (const bool table : {true, false}) {
      const int k = table ? 0 : 1;
      bf16 *d_out = dev.alloc<bf16>(n), *d_dz = dev.alloc<bf16>(n);
      float* d_dbias = dev.alloc<float>(shape.cols);
      if (table) {
        gelu_forward_table(d_out, d_z, n, nullptr);
        gelu_backward_bias_grad_table(d_dz, d_dbias, d_dout, d_z, shape.rows, shape.cols, partials, nullptr);
      } else {
        gelu_forward_in_place(d_out, d_z, n, nullptr);
        gelu_backward_bias_grad_in_place(d_dz, d_dbias, d_dout, d_z, shape.rows, shape.cols, partials, nullptr);
      }
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

// R2-R4's GELU passes with fc's bias added inside (v4: gelu_forward_add_bias, gelu_backward_add_bias) against
// v3's table passes on the pre-activation rounded beforehand, bf16(xw + bias) computed here: the same bits of
// GELU and dz, the same dbias. The bias sits at an odd element offset, as fc_b does in the trainers' flat
// bf16 weights.
TEST(GptLab, Bf16GeluAddBiasMatchesPreAddedBias) {
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
    gelu_forward_table(out_pre, d_pre, n, nullptr);
    gelu_backward_bias_grad_table(dz_pre, dbias_pre, d_dout, d_pre, rows, cols, partials, nullptr);
    EXPECT_EQ(bf16_bits(out_added, n), bf16_bits(out_pre, n));
    EXPECT_EQ(bf16_bits(dz_added, n), bf16_bits(dz_pre, n));
    EXPECT_EQ(Device::download(dbias_added, cols), Device::download(dbias_pre, cols));
  }
}

}  // namespace
}  // namespace roofbench::gpt::cuda::lab
