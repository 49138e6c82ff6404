// Loads and stores of activations kept in fp32 (R0, R1) or bf16 (R2 and up, as torch.autocast keeps them):
// arithmetic is always fp32; a bf16 value is widened on load and rounded to nearest even on store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "bf16_pair.cuh"

namespace roofbench::gpt::cuda {

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ inline T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Four consecutive elements as a float4: 16-byte accesses for fp32, 8-byte ones for bf16 (p aligned to that).
__device__ inline float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ inline float4 load4(const __nv_bfloat16* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 lo = widen_bf16_pair(raw.x), hi = widen_bf16_pair(raw.y);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
__device__ inline void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ inline void store4(__nv_bfloat16* p, float4 v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 raw;
  raw.x = *reinterpret_cast<const unsigned*>(&lo);
  raw.y = *reinterpret_cast<const unsigned*>(&hi);
  *reinterpret_cast<uint2*>(p) = raw;
}

// kWidth consecutive elements in one 8- or 16-byte access (p aligned to that), widened to fp32 on load and
// rounded to nearest even on store: the general form of load4/store4 (16 bytes: 4 floats or 8 bf16).
template <int kWidth>
struct Floats {
  float v[kWidth];
};
template <typename T>
inline constexpr int kPer16Bytes = static_cast<int>(16 / sizeof(T));
template <int kWidth, typename T>
using VectorAccess = std::conditional_t<kWidth * sizeof(T) == 16, uint4, uint2>;

template <int kWidth, typename T>
__device__ inline Floats<kWidth> load_floats(const T* p) {
  static_assert(kWidth * sizeof(T) == 8 || kWidth * sizeof(T) == 16);
  using Raw = VectorAccess<kWidth, T>;
  const Raw raw = *reinterpret_cast<const Raw*>(p);
  Floats<kWidth> f;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const unsigned* word = reinterpret_cast<const unsigned*>(&raw);
#pragma unroll
    for (int i = 0; i < kWidth / 2; ++i) {
      const float2 pair = widen_bf16_pair(word[i]);
      f.v[2 * i] = pair.x;
      f.v[2 * i + 1] = pair.y;
    }
  } else {
    const T* element = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kWidth; ++i) f.v[i] = to_float(element[i]);
  }
  return f;
}
template <int kWidth, typename T>
__device__ inline void store_floats(T* p, const Floats<kWidth>& f) {
  static_assert(kWidth * sizeof(T) == 8 || kWidth * sizeof(T) == 16);
  using Raw = VectorAccess<kWidth, T>;
  Raw raw;
  T* element = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < kWidth; ++i) element[i] = from_float<T>(f.v[i]);
  *reinterpret_cast<Raw*>(p) = raw;
}

// The alignment load4/store4 need.
template <typename T>
inline bool aligned4(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0;
}
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace roofbench::gpt::cuda
