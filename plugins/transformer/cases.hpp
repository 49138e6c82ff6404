// The transformer plugin's cases: attention prefill and decode, and GPT-2 small's linear layers, from one
// token (decode) to 8192 (prefill). Split by family; describe() adds them all. The factories are here so
// the tests can build cases, including ones whose kernel is wrong on purpose.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "roofbench/kernels/cuda_attention.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::transformer {

// "8x12x1024x64" -> batch 8, heads 12, length 1024, head dim 64.
kernels::AttentionShape parse_prefill_shape(const std::string& text, bool causal);

// Prefill: impl is naive, cudnn, fused (the best version) or fused_<version>.
std::unique_ptr<Case> make_prefill_attention(const std::string& impl, kernels::AttentionType type,
                                             const kernels::AttentionShape& shape,
                                             kernels::AttentionFault fault = kernels::AttentionFault::none);
// Decode: one query per sequence against a KV cache; impl is naive, cudnn, split_kv (the best version) or
// split_kv_<version>.
std::unique_ptr<Case> make_decode_attention(const std::string& impl, const kernels::AttentionShape& shape,
                                            kernels::AttentionFault fault = kernels::AttentionFault::none);
// y[tokens, out] = x[tokens, in] W^T through cuBLAS in bf16 (fp32 accumulation).
std::unique_ptr<Case> make_linear(std::int64_t in_features, std::int64_t out_features, std::int64_t tokens);

// The versions `fused` and `split_kv` stand for.
inline constexpr const char* kBestFusedVersion = "v3";
inline constexpr const char* kBestSplitKvVersion = "v2";  // set from the GPU runs

void add_attention_cases(Plugin& plugin);
void add_linear_cases(Plugin& plugin);
void describe(Plugin& plugin);

}  // namespace roofbench::transformer
