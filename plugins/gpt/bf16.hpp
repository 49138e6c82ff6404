// bf16 (the upper half of an IEEE fp32) on the host: what the GPU's __float2bfloat16_rn computes, for the
// CPU side of the bf16 rungs' gates and tests. Round to nearest, ties to even; NaN stays a (quiet) NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace roofbench::gpt {

inline std::uint16_t bf16_bits_from_float(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // NaN: keep the sign, force quiet
  const std::uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7fffu + lsb) >> 16);  // overflow rounds to inf, as it should
}

inline float float_from_bf16_bits(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &wide, sizeof x);
  return x;
}

inline float round_to_bf16(float x) { return float_from_bf16_bits(bf16_bits_from_float(x)); }

}  // namespace roofbench::gpt
