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

}  // namespace roofbench::gpt
