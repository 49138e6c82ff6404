// The fused prefill versions on Hopper's own instructions, v4 to v16 (sm_90a: TMA, wgmma, setmaxnreg), kept apart
// from fused_attention.cu because their translation unit is compiled for sm_90a alone. In a build without sm_90a
// code (ROOFBENCH_HOPPER_90A off) fused_attention_sm90a_absent.cpp stands in: never available.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "roofbench/kernels/cuda_attention.hpp"

namespace roofbench::kernels::sm90a {

// Whether `version` is one of these.
inline bool is_sm90a_version(const std::string& version) {
  return version == "v4" || version == "v5" || version == "v6" || version == "v7" || version == "v8" ||
         version == "v9" || version == "v10" || version == "v11" || version == "v12" || version == "v13" ||
         version == "v14" || version == "v15" || version == "v16";
}

// Empty when the sm_90a version runs on `device`; else why not (no sm_90a code in this build, or not compute
// capability 9.0).
std::string fused_sm90a_unavailable(const std::string& version, int device);

// An sm_90a version on the current device: q_len == kv_len a multiple of 128, head_dim 64 or 128
// (check_fused_supports), and fused_sm90a_unavailable empty; throws roofbench::Error otherwise.
void launch_fused_sm90a(const std::string& version, AttentionType type, const AttentionShape& shape, const void* q,
                        const void* k, const void* v, void* o, cudaStream_t stream, AttentionFault fault);

// The blocks of the version's kernel an SM of the current device holds at once (the occupancy the version's
// register and shared-memory split was made for); throws roofbench::Error where it does not run.
int fused_sm90a_blocks_per_sm(const std::string& version, AttentionType type, int head_dim);

}  // namespace roofbench::kernels::sm90a
