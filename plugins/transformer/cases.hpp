// The transformer plugin's cases: attention prefill and decode, and GPT-2 small's linear layers, from one
// token (decode) to 8192 (prefill). Split by family; describe() adds them all. The factories are here so
// the tests can build cases, including ones whose kernel is wrong on purpose.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "roofbench/kernels/cuda_attention.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::transformer {

// "8x12x1024x64" -> batch 8, heads 12, length 1024, head dim 64.
kernels::AttentionShape parse_prefill_shape(const std::string& text, bool causal);
// The prefill case's axes: heads "HxD" (12x64 or 16x128) at t tokens per sequence; the batch makes
// prefill_tokens(heads) tokens in all (8192, or 16384 at 16x128).
std::int64_t prefill_tokens(const std::string& heads);
kernels::AttentionShape prefill_shape(const std::string& heads, std::int64_t t, bool causal);

// Prefill: impl is naive, cudnn, fused (the best version) or fused_<version>.
std::unique_ptr<Case> make_prefill_attention(const std::string& impl, kernels::AttentionType type,
                                             const kernels::AttentionShape& shape,
                                             kernels::AttentionFault fault = kernels::AttentionFault::none);
// Decode: one query per sequence against a KV cache; impl is naive, cudnn, split_kv (the best version) or
// split_kv_<version>.
std::unique_ptr<Case> make_decode_attention(const std::string& impl, const kernels::AttentionShape& shape,
                                            kernels::AttentionFault fault = kernels::AttentionFault::none);
// y[tokens, out] = x[tokens, in] W^T in bf16 (fp32 accumulation); impl is cublaslt (every token count), gemv (the
// best version) or gemv_<version> (1, 2, 4 or 8 tokens; NotApplicable otherwise).
std::unique_ptr<Case> make_linear(std::int64_t in_features, std::int64_t out_features, std::int64_t tokens,
                                  const std::string& impl = "cublaslt");

// The versions `fused`, `split_kv` and `gemv` stand for, the fastest measured (the lab tables are in
// plugins/transformer/README.md): where the sm_90a code runs, fused_v9 at head dim 64 (275.9 against v6's
// 217.8 TFLOP/s at B8 H12 T1024 causal on an H100); at 128 fused_v16 causal (538.5 against v14's 527.7 and
// cuDNN's 521.4 at B4 H16 T4096 on an H100, means of three processes) and fused_v14 full (591.6 against v16's
// 586.8 and cuDNN's 593.9 there); else fused_v3. split_kv: v3 (8 keys in flight) when there are fewer (batch,
// head) pairs than SMs; v7 (balanced, pipelined) when its run per block would be at least kLongestRunForSplits
// keys (B256 KV4096, 23832 keys: 4.60 TB/s against v2's 4.43); v9
// (balanced, staged by cp.async.bulk) in between, measured at B64 KV1024 only (1490 keys a run); between
// 1490 and 23832 keys the threshold is a guess (the geometric middle, rounded). gemv: v8 where its sm_90 code
// runs (cold by rotation at 768x3072 and one token on an H100, 2.38 us against v3's 2.59; its time per launch is
// a chain's time per layer), else v1.
inline constexpr const char* kBestFusedVersion = "v3";
inline constexpr const char* kBestHopperFusedVersionD64 = "v9";
inline constexpr const char* kBestHopperFusedVersionD128Causal = "v16";
inline constexpr const char* kBestHopperFusedVersionD128Full = "v14";
// The sm_90a keeper for the shape's head dim and mask.
inline const char* best_hopper_fused_version(std::int64_t head_dim, bool causal) {
  if (head_dim == 64) return kBestHopperFusedVersionD64;
  return causal ? kBestHopperFusedVersionD128Causal : kBestHopperFusedVersionD128Full;
}
// The sm_90a keeper on a device that runs its code and a shape it takes, else fused_v3.
std::string best_fused_version(const kernels::AttentionShape& shape, int device_index);
inline constexpr const char* kBestGemvVersion = "v1";
inline constexpr const char* kBestSm90GemvVersion = "v8";
// kBestSm90GemvVersion on a device that runs its sm_90 code, else kBestGemvVersion.
std::string best_gemv_version(int device_index);
inline constexpr std::int64_t kLongestRunForSplits = 8192;
// bulk_copy: the GPU has cp.async.bulk (sm_90 and later), which v9-v11 stage the cache through.
std::string best_split_kv_version(const kernels::AttentionShape& shape, int sm_count, bool bulk_copy);
// Whether CUDA device `device_index` has cp.async.bulk (compute capability 9.0 or later).
bool has_bulk_copy(int device_index);

void add_attention_cases(Plugin& plugin);
void add_linear_cases(Plugin& plugin);
void describe(Plugin& plugin);

}  // namespace roofbench::transformer
