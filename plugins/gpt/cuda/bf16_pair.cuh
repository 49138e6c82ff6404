// The two bf16 of a 32-bit word widened to fp32, for the device and, so that tests can check it, the host.
#pragma once

#include <cuda_runtime.h>

#include <bit>

namespace roofbench::gpt::cuda {

// A float from its bits.
__host__ __device__ __forceinline__ float float_of_bits(unsigned bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

// The two bf16 of one 32-bit word widened to fp32 (the lower address in .x): a bf16 is a float's upper half, so a
// shift and a mask give the same bits as __bfloat1622float2, in two instructions a pair where ptxas makes three of
// that conversion. The attention's preparation widens every q, k and v this way: the trainers' backward with qkv's
// sums ran 1.3% faster for it on an H100 (results/lab/h100/2026-12-07-bf16-pair-widening-ab).
__host__ __device__ __forceinline__ float2 widen_bf16_pair(unsigned w) {
  return make_float2(float_of_bits(w << 16), float_of_bits(w & 0xffff0000u));
}

}  // namespace roofbench::gpt::cuda
