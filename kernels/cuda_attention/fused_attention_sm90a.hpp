// The fused prefill versions on Hopper's own instructions (sm_90a: TMA, wgmma, setmaxnreg), kept apart from
// fused_attention.cu because their translation unit is compiled for sm_90a alone. In a build without sm_90a
// code (ROOFBENCH_HOPPER_90A off) fused_attention_sm90a_absent.cpp stands in: never available.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "roofbench/kernels/cuda_attention.hpp"

namespace roofbench::kernels::sm90a {

// Empty when v4 runs on `device`; else why not (no sm_90a code in this build, or not compute capability 9.0).
std::string fused_v4_unavailable(int device);

// v4 on the current device: q_len == kv_len a multiple of 128, head_dim 64 or 128 (check_fused_supports), and
// fused_v4_unavailable(device) empty; throws roofbench::Error otherwise.
void launch_fused_v4(AttentionType type, const AttentionShape& shape, const void* q, const void* k, const void* v,
                     void* o, cudaStream_t stream, AttentionFault fault);

}  // namespace roofbench::kernels::sm90a
