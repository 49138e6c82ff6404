// A hand GEMV for the linear layers at a few tokens: y[tokens, out] = x[tokens, in] W^T in bf16 with fp32
// accumulation, W [out, in] row-major. At one token the layer is a weight read; this kernel puts all of it
// in flight at once (a warp per 768-wide segment of a row, its 16-byte loads all issued before any arithmetic).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace roofbench::transformer {

// The empty string when gemv_bf16 takes the shape, else why not (in must be 768, 1536 or 3072, tokens 1, 2, 4 or 8).
std::string gemv_refusal(std::int64_t in, std::int64_t out, std::int64_t tokens);
void gemv_bf16(const void* w, const void* x, void* y, std::int64_t in, std::int64_t out, std::int64_t tokens,
               cudaStream_t stream);

}  // namespace roofbench::transformer
