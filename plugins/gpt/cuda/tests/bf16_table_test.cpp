// The bf16 table's indexing (bf16_table.hpp), on every bf16 bit pattern: covered values round-trip through
// their slot, the slots are exactly 0 .. size - 1, and the covered values are those with 2^-16 <= |z| < 8.
// The pair tables' packed slots against each element's own slot, for every bf16 value beside a set of neighbours.
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

// Each element's slot in a pair table, or -1 off it: the reference PairTable::slots packs.
template <typename Table>
int pair_table_slot(std::uint16_t bits) {
  const int offset = (bits & 0x7fff) - static_cast<int>(Table::low);
  if (offset < 0 || offset >= static_cast<int>(Table::half)) return -1;
  return (bits >> 15) * static_cast<int>(Table::half) + offset;
}

// Every bf16 value as the low element beside each neighbour (and as the high one): off the table exactly when either
// element is, else the two byte offsets of their own slots; every slot's value maps back to that slot.
template <typename Table>
void expect_pair_slots_match_each_element() {
  const std::uint16_t neighbours[] = {0x0000, 0x8000, 0x0001, 0x3780, 0x3900, 0x38ff, 0x3f80, 0xbf80,
                                      0x40ff, 0x4100, 0x477f, 0x4780, 0x7f80, 0x7fc0, 0xffff, 0xb900};
  for (std::uint32_t b = 0; b < 65536; ++b)
    for (const std::uint16_t other : neighbours)
      for (const bool low_is_b : {true, false}) {
        const auto lo = static_cast<std::uint16_t>(low_is_b ? b : other);
        const auto hi = static_cast<std::uint16_t>(low_is_b ? other : b);
        const auto got = Table::slots(static_cast<std::uint32_t>(hi) << 16 | lo);
        const int lo_slot = pair_table_slot<Table>(lo), hi_slot = pair_table_slot<Table>(hi);
        ASSERT_EQ(got.outside, lo_slot < 0 || hi_slot < 0) << std::hex << lo << " " << hi;
        if (got.outside) continue;
        ASSERT_EQ(got.low_bytes, static_cast<std::uint32_t>(lo_slot) * Table::entry_bytes) << std::hex << lo;
        ASSERT_EQ(got.high_bytes, static_cast<std::uint32_t>(hi_slot) * Table::entry_bytes) << std::hex << hi;
      }
  for (std::uint32_t slot = 0; slot < Table::size; ++slot)
    ASSERT_EQ(pair_table_slot<Table>(Table::bits_of_slot(slot)), static_cast<int>(slot));
}

TEST(GptBf16PairTable, WideTableSlotsAreEachElementsOwn) {
  expect_pair_slots_match_each_element<PairTable<0x3780, 12, 1>>();  // fc_gelu_sm90a.cuh's WideTable
}

TEST(GptBf16PairTable, PackedTableSlotsAreEachElementsOwn) {
  expect_pair_slots_match_each_element<PairTable<0x3900, 11, 2>>();  // fc_gelu_sm90a.cuh's PackedTable
}

TEST(GptBf16PairTable, PackedTableCoversTwoToTheMinus13UpToEight) {
  using Table = PairTable<0x3900, 11, 2>;
  EXPECT_EQ(float_from_bf16_bits(Table::bits_of_slot(0)), 0x1p-13f);
  EXPECT_EQ(float_from_bf16_bits(Table::bits_of_slot(Table::half - 1)), 8.0f - 0x1p-5f);  // the largest bf16 < 8
  EXPECT_EQ(float_from_bf16_bits(Table::bits_of_slot(Table::half)), -0x1p-13f);
}

}  // namespace
}  // namespace roofbench::gpt
