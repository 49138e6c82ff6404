// The bf16 keeper's sm_90a backward in a build without sm_90a code (ROOFBENCH_HOPPER_90A off): attention_v12.cu
// is not compiled, hopper_path_available is false on every device, so the keeper runs v9's backward and these
// refuse (the lab's v12 and v13 rows are listed as not run, with the reason).
#include "layers.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda {

namespace {

[[noreturn]] void refuse() {
  throw NotApplicable(
      "gpt attention v12's backward needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)");
}

}  // namespace

void fused_attention_sm90a_backward_configure() { refuse(); }
void fused_attention_sm90a_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*,
                                    RopeTable, const AttentionShape&, cudaStream_t) {
  refuse();
}

}  // namespace roofbench::gpt::cuda
