// The sm_90a versions' entry points in a build without sm_90a code (ROOFBENCH_HOPPER_90A off):
// fused_attention_sm90a.cu is not compiled, so v4 to v16 are unavailable on every device and their benchmarks
// are listed as not run.
#include "fused_attention_sm90a.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::kernels::sm90a {

std::string fused_sm90a_unavailable(const std::string& version, int) {
  return "fused attention " + version + " needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)";
}

void launch_fused_sm90a(const std::string& version, AttentionType, const AttentionShape&, const void*, const void*,
                        const void*, void*, cudaStream_t, AttentionFault) {
  throw Error(fused_sm90a_unavailable(version, 0));
}

int fused_sm90a_blocks_per_sm(const std::string& version, AttentionType, int) {
  throw Error(fused_sm90a_unavailable(version, 0));
}

}  // namespace roofbench::kernels::sm90a
