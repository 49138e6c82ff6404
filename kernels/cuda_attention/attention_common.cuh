// Pieces the attention kernels share: the storage types and their conversions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <vector>

#include "roofbench/kernels/cuda_attention.hpp"

namespace roofbench::kernels::attention_detail {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }

// Two floats as one 32-bit register of the storage type, `low` in the low half (the lower index).
template <typename T>
__device__ __forceinline__ unsigned pack2(float low, float high);
template <>
__device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float low, float high) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const unsigned*>(&v);
}
template <>
__device__ __forceinline__ unsigned pack2<__half>(float low, float high) {
  const __half2 v = __floats2half2_rn(low, high);
  return *reinterpret_cast<const unsigned*>(&v);
}

// Eight stored values (one 16-byte load) as floats.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& raw, float (&out)[8]) {
  const T* values = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(values[i]);
}

constexpr float kLog2e = 1.4426950408889634f;

// The names of a lab's versions, from its table of structs with a `name`, in the table's order.
template <const auto& kTable>
const std::vector<std::string>& version_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& version : kTable) n.push_back(version.name);
    return n;
  }();
  return names;
}

// Calls body.template operator()<T>() with T the storage type of `type`.
template <typename Body>
void dispatch_type(AttentionType type, Body&& body) {
  if (type == AttentionType::bf16) body.template operator()<__nv_bfloat16>();
  else body.template operator()<__half>();
}

}  // namespace roofbench::kernels::attention_detail
