// Host-side view of the element formats CUDA cases store: sizes, rounding units and exact decoding
// of stored bit patterns to double. Gates build their fp64 references from the decoded values, i.e.
// from the inputs exactly as the device saw them after rounding to bf16, fp16 or fp8.
#pragma once

#include <cstddef>
#include <cstdint>

#include "roofbench/plugin.hpp"

namespace roofbench::case_support {

std::size_t element_bytes(ElementType type);

// Largest relative error of rounding one real number to the format (half a unit in the last place).
double unit_roundoff(ElementType type);

double decode_bf16(std::uint16_t bits);
double decode_fp16(std::uint16_t bits);
double decode_fp8_e4m3(std::uint8_t bits);  // OCP e4m3 ("fn"): no infinities, S.1111.111 is NaN

// Decodes `count` stored elements of `type` at `raw` into `out`.
void decode(ElementType type, const void* raw, std::size_t count, double* out);

}  // namespace roofbench::case_support
