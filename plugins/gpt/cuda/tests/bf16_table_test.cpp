// The bf16 table's indexing (bf16_table.hpp), on every bf16 bit pattern: covered values round-trip through
// their slot, the slots are exactly 0 .. size - 1, and the covered values are those with 2^-16 <= |z| < 8.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16.hpp"
#include "bf16_table.hpp"

namespace roofbench::gpt {
namespace {

TEST(GptBf16Table, SlotsCoverTheDocumentedRangeOnceEach) {
  std::vector<int> hits(kBf16TableSize, 0);
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float z = float_from_bf16_bits(bits);
    const int slot = bf16_table_slot(bits);
    const bool covered = std::isfinite(z) && std::fabs(z) >= 0x1p-16f && std::fabs(z) < 8.0f;
    ASSERT_EQ(slot >= 0, covered) << "bits " << b << " value " << z;
    if (slot < 0) continue;
    ASSERT_LT(slot, kBf16TableSize);
    ++hits[slot];
    EXPECT_EQ(bf16_of_table_slot(slot), bits);
    EXPECT_EQ(slot >= kBf16TableHalf, z < 0) << "negative values in the upper half";
  }
  for (int slot = 0; slot < kBf16TableSize; ++slot) EXPECT_EQ(hits[slot], 1) << slot;
}

}  // namespace
}  // namespace roofbench::gpt
