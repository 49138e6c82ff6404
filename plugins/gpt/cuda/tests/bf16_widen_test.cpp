// widen_bf16_pair (bf16_pair.cuh) against cuda_bf16.h's __bfloat1622float2, on the CPU, bit for bit: every bf16 as the
// pair's low element and as its high one, beside neighbours that include zeros, infinities, NaNs and subnormals.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <bit>
#include <cstdint>

#include "bf16_pair.cuh"

namespace roofbench::gpt::cuda {
namespace {

float2 widened_by_cuda(std::uint32_t word) {
  __nv_bfloat16_raw lo, hi;
  lo.x = static_cast<unsigned short>(word & 0xffff);
  hi.x = static_cast<unsigned short>(word >> 16);
  return __bfloat1622float2(__nv_bfloat162(__nv_bfloat16(lo), __nv_bfloat16(hi)));
}

TEST(GptBf16Widen, EveryBf16WidensToCudasBits) {
  const std::uint16_t neighbours[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0xffff};
  for (std::uint32_t b = 0; b < 65536; ++b)
    for (const std::uint16_t other : neighbours)
      for (const std::uint32_t word : {other << 16 | b, b << 16 | other}) {
        const float2 got = widen_bf16_pair(word), want = widened_by_cuda(word);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got.x), std::bit_cast<std::uint32_t>(want.x)) << std::hex << word;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got.y), std::bit_cast<std::uint32_t>(want.y)) << std::hex << word;
      }
}

}  // namespace
}  // namespace roofbench::gpt::cuda
