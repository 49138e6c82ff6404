#include "roofbench/case_support/formats.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace roofbench::case_support {

std::size_t element_bytes(ElementType type) {
  switch (type) {
    case ElementType::f64:
      return 8;
    case ElementType::f32:
      return 4;
    case ElementType::bf16:
      return 2;
    case ElementType::f16:
      return 2;
    case ElementType::fp8_e4m3:
      return 1;
    case ElementType::i32:
      return 4;
  }
  throw Error("micro: unknown element type");
}

double unit_roundoff(ElementType type) {
  switch (type) {
    case ElementType::f64:
      return std::ldexp(1.0, -53);
    case ElementType::f32:
      return std::ldexp(1.0, -24);
    case ElementType::bf16:
      return std::ldexp(1.0, -8);
    case ElementType::f16:
      return std::ldexp(1.0, -11);
    case ElementType::fp8_e4m3:
      return std::ldexp(1.0, -4);
    case ElementType::i32:
      return 0;
  }
  throw Error("micro: unknown element type");
}

double decode_bf16(std::uint16_t bits) {
  // bf16 is the top half of an fp32.
  return std::bit_cast<float>(std::uint32_t{bits} << 16);
}

namespace {
// Sign, biased exponent and mantissa of a small IEEE-like format; `all_ones_exponent_is_special` says whether the
// all-ones exponent means inf/NaN (it does not in e4m3, which spends it on ordinary numbers).
double decode_minifloat(std::uint32_t bits, int exponent_bits, int mantissa_bits, bool all_ones_exponent_is_special) {
  const std::uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
  const std::uint32_t exponent = (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
  const bool negative = (bits >> (mantissa_bits + exponent_bits)) & 1u;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const std::uint32_t max_exponent = (1u << exponent_bits) - 1;
  double magnitude;
  if (all_ones_exponent_is_special && exponent == max_exponent) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - bias - mantissa_bits);  // subnormal
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa | (1u << mantissa_bits)),
                           static_cast<int>(exponent) - bias - mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}
}  // namespace

double decode_fp16(std::uint16_t bits) { return decode_minifloat(bits, 5, 10, true); }

double decode_fp8_e4m3(std::uint8_t bits) {
  if ((bits & 0x7Fu) == 0x7Fu) return std::numeric_limits<double>::quiet_NaN();
  return decode_minifloat(bits, 4, 3, false);
}

void decode(ElementType type, const void* raw, std::size_t count, double* out) {
  const auto* bytes = static_cast<const unsigned char*>(raw);
  // memcpy per element: `raw` is a byte buffer with no alignment promise.
  auto each = [&]<typename Stored>(auto convert) {
    for (std::size_t i = 0; i < count; ++i) {
      Stored value;
      std::memcpy(&value, bytes + i * sizeof(Stored), sizeof(Stored));
      out[i] = convert(value);
    }
  };
  switch (type) {
    case ElementType::f64:
      each.template operator()<double>([](double v) { return v; });
      return;
    case ElementType::f32:
      each.template operator()<float>([](float v) { return double{v}; });
      return;
    case ElementType::bf16:
      each.template operator()<std::uint16_t>(decode_bf16);
      return;
    case ElementType::f16:
      each.template operator()<std::uint16_t>(decode_fp16);
      return;
    case ElementType::fp8_e4m3:
      each.template operator()<std::uint8_t>(decode_fp8_e4m3);
      return;
    case ElementType::i32:
      each.template operator()<std::int32_t>([](std::int32_t v) { return double(v); });
      return;
  }
  throw Error("micro: unknown element type");
}

}  // namespace roofbench::case_support
