// A hand GEMV for the linear layers at a few tokens: y[tokens, out] = x[tokens, in] W^T in bf16 with fp32
// accumulation, W [out, in] row-major. At one token the layer is a weight read; both versions put all of it
// in flight at once. v1: a warp per 768-wide segment of a row, its 16-byte loads all issued before any
// arithmetic (768 blocks). v2 (sm_90): 128 blocks of about 36 KB of rows, each warp's rows fetched into shared
// memory by one bulk copy (cp.async.bulk); slower on an H200 (hot in a graph 2.43 and 2.35 us against v1's
// 2.04 and 2.10, cold 6.40 and 6.18 against 5.98 and 5.86: a warp adds only once all its rows have landed).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace roofbench::transformer {

// The empty string when gemv_bf16 takes the shape, else why not (in must be 768, 1536 or 3072, tokens 1, 2, 4 or 8).
std::string gemv_refusal(std::int64_t in, std::int64_t out, std::int64_t tokens);
const std::vector<std::string>& gemv_versions();
// Whether `version` copies through cp.async.bulk, which only sm_90 and later have (elsewhere its kernel traps).
bool gemv_needs_bulk_copy(const std::string& version);
// version: one of gemv_versions().
void gemv_bf16(const std::string& version, const void* w, const void* x, void* y, std::int64_t in, std::int64_t out,
               std::int64_t tokens, cudaStream_t stream);

}  // namespace roofbench::transformer
