// Decoding of stored formats (CPU only): our decoders against CUDA's own host-side conversions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "roofbench/case_support/formats.hpp"

namespace roofbench::case_support {
namespace {

// Same value, or both NaN.
bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

TEST(CaseSupportFormats, Bf16DecodesLikeCuda) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    __nv_bfloat16_raw raw;
    raw.x = static_cast<unsigned short>(bits);
    ASSERT_TRUE(same_value(decode_bf16(std::uint16_t(bits)), __bfloat162float(__nv_bfloat16(raw)))) << bits;
  }
}

TEST(CaseSupportFormats, Fp16DecodesLikeCuda) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    __half_raw raw;
    raw.x = static_cast<unsigned short>(bits);
    ASSERT_TRUE(same_value(decode_fp16(std::uint16_t(bits)), __half2float(__half(raw)))) << bits;
  }
}

TEST(CaseSupportFormats, Fp8E4m3DecodesLikeCuda) {
  for (std::uint32_t bits = 0; bits <= 0xFF; ++bits) {
    __nv_fp8_e4m3 value;
    value.__x = static_cast<__nv_fp8_storage_t>(bits);
    ASSERT_TRUE(same_value(decode_fp8_e4m3(std::uint8_t(bits)), float(value))) << bits;
  }
  EXPECT_EQ(decode_fp8_e4m3(0x7E), 448.0);                // largest finite e4m3
  EXPECT_EQ(decode_fp8_e4m3(0x01), std::ldexp(1.0, -9));  // smallest subnormal
}

TEST(CaseSupportFormats, DecodeReadsUnalignedBuffers) {
  const unsigned char raw[] = {0xAA, 0x00, 0x00, 0x80, 0x3F};  // a float 1.0 one byte in
  double out = 0;
  decode(ElementType::f32, raw + 1, 1, &out);
  EXPECT_EQ(out, 1.0);
}

}  // namespace
}  // namespace roofbench::case_support
