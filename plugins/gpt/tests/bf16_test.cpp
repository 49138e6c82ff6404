// The host's bf16 rounding (bf16.hpp): round to nearest even on the 16 dropped bits, as the GPU rounds.
#include "bf16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace roofbench::gpt {
namespace {

float from_bits(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

TEST(GptBf16, ExactValuesSurvive) {
  for (float x : {0.0f, -0.0f, 1.0f, -2.0f, 0.5f, 3.0f, 1.0f / 128, 65280.0f}) {
    EXPECT_EQ(round_to_bf16(x), x) << x;
    EXPECT_EQ(std::signbit(round_to_bf16(x)), std::signbit(x));
  }
  EXPECT_EQ(bf16_bits_from_float(1.0f), 0x3f80u);
  EXPECT_EQ(bf16_bits_from_float(-2.0f), 0xc000u);
}

TEST(GptBf16, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (bf16 keeps 7 fraction bits): the tie goes to the even 1.
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x3f808000u)), 0x3f80u);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x3f818000u)), 0x3f82u);
  // Just above and just below a tie.
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x3f807fffu)), 0x3f80u);
  // The relative rounding error is at most the unit roundoff 2^-8 (8 significant bits).
  for (float x = 0.001f; x < 1000.0f; x *= 1.37f) EXPECT_LE(std::fabs(round_to_bf16(x) - x), x * 0x1p-8f) << x;
}

TEST(GptBf16, InfinityNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(round_to_bf16(inf), inf);
  EXPECT_EQ(round_to_bf16(-inf), -inf);
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(round_to_bf16(from_bits(0x7f800001u))));  // a NaN whose payload would round to inf
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::max()), inf);  // past bf16's largest finite value
  EXPECT_EQ(bf16_bits_from_float(from_bits(0x7f7f0000u)), 0x7f7fu);  // bf16's largest finite value itself
}

}  // namespace
}  // namespace roofbench::gpt
