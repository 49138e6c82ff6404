// v4's entry points in a build without sm_90a code (ROOFBENCH_HOPPER_90A off): fused_attention_sm90a.cu is
// not compiled, so v4 is unavailable on every device and its benchmarks are listed as not run.
#include "fused_attention_sm90a.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::kernels::sm90a {

std::string fused_v4_unavailable(int) {
  return "fused attention v4 needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)";
}

void launch_fused_v4(AttentionType, const AttentionShape&, const void*, const void*, const void*, void*, cudaStream_t,
                     AttentionFault) {
  throw Error(fused_v4_unavailable(0));
}

}  // namespace roofbench::kernels::sm90a
