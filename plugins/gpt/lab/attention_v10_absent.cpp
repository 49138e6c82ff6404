// Version 10's launchers in a build without sm_90a code (ROOFBENCH_HOPPER_90A off): attention_v10.cu is not
// compiled, so the version is not applicable on any device and its benchmark is listed as not run.
#include "attention_versions.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {

void attention_v10_configure() {
  throw NotApplicable("gpt attention v10 needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)");
}

void attention_v10_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  throw Error("gpt attention v10 runs after attention_v10_configure(), which refuses in this build");
}

}  // namespace roofbench::gpt::cuda::lab
