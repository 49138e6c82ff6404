// Tables indexed by a bf16 value: a function of one bf16 input (R2's GELU and its derivative, whose
// pre-activation is stored in bf16) takes at most 65536 values, so a kernel can compute them once per block
// into shared memory and look each element up instead of evaluating erff and expf per element: the same
// fp32 arithmetic per value, so the same bits as evaluating it in place. The table covers magnitudes
// 2^-16 <= |z| < 8 of both signs (19 binades of 128 values: 19 KB of fp32); values outside (a GELU
// pre-activation rarely is), NaN and infinity, are evaluated in place. Free of CUDA so the CPU tests check
// the indexing.
#pragma once

#include <cstdint>

#include "model.hpp"

namespace roofbench::gpt {

inline constexpr int kBf16TableExponentLo = 127 - 16;  // the biased exponent field of 2^-16
inline constexpr int kBf16TableExponentHi = 127 + 3;   // of 8, the first magnitude not covered
inline constexpr int kBf16TableHalf = (kBf16TableExponentHi - kBf16TableExponentLo) * 128;  // one sign
inline constexpr int kBf16TableSize = 2 * kBf16TableHalf;

// The slot of the bf16 value with these bits, or -1 where the table does not cover it.
ROOFBENCH_GPT_HOST_DEVICE inline int bf16_table_slot(std::uint16_t bits) {
  const int offset = (bits & 0x7fff) - (kBf16TableExponentLo << 7);
  if (offset < 0 || offset >= kBf16TableHalf) return -1;
  return (bits >> 15) * kBf16TableHalf + offset;
}

// The bits of the bf16 value a slot holds the function of (bf16_table_slot's inverse).
ROOFBENCH_GPT_HOST_DEVICE inline std::uint16_t bf16_of_table_slot(int slot) {
  const int negative = slot >= kBf16TableHalf ? 1 : 0;
  const int offset = slot - negative * kBf16TableHalf;
  return static_cast<std::uint16_t>((negative << 15) | ((kBf16TableExponentLo << 7) + offset));
}

// A pair table: a table whose half (one sign) is a power of two of consecutive bf16 magnitudes from kLow on, so that
// the two slots of a bf16 pair's bits (low element in the low half) come from packed 32-bit operations, the
// subtraction and masks working on both halves at once: slot m + half for a negative value of magnitude kLow + m.
// fc_gelu_sm90a.cuh's wide table (GELU's bf16 bits, [2^-16, 2^16)) and packed table (GELU' in fp32, [2^-13, 8)).
template <std::uint32_t kLow, int kHalfLog2, int kEntryLog2>
struct PairTable {
  static constexpr std::uint32_t low = kLow, half = 1u << kHalfLog2, size = 2 * half;
  static constexpr int entry_bytes = 1 << kEntryLog2;
  // The bits of the bf16 value slot `slot` holds the function of.
  ROOFBENCH_GPT_HOST_DEVICE static std::uint16_t bits_of_slot(std::uint32_t slot) {
    return static_cast<std::uint16_t>((slot / half) << 15 | (kLow + slot % half));
  }
  // The pair's two slots as byte offsets into the table, and whether either element is off it (then its neighbour's
  // slot may be off by one, a borrow from the low half: evaluate both in place).
  struct Slots {
    std::uint32_t low_bytes, high_bytes;
    bool outside;
  };
  ROOFBENCH_GPT_HOST_DEVICE static Slots slots(std::uint32_t pair) {
    constexpr std::uint32_t in_half = (half - 1) << 16 | (half - 1), signs = half << 16 | half;
    constexpr std::uint32_t byte_mask = (size - 1) << kEntryLog2;
    const std::uint32_t offset = (pair & 0x7fff7fffu) - (kLow << 16 | kLow);
    const std::uint32_t slot_pair = (offset & in_half) | ((pair >> (15 - kHalfLog2)) & signs);  // sign: + half
    return {(slot_pair << kEntryLog2) & byte_mask, (slot_pair >> (16 - kEntryLog2)) & byte_mask,
            (offset & ~in_half) != 0};
  }
};

}  // namespace roofbench::gpt
