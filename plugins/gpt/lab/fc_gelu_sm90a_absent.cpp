// lab_fc_gelu_bf16 v5-v27 and lab_fc_gelu_backward_bf16 v2-v9 in a build without sm_90a code (ROOFBENCH_HOPPER_90A
// off): fc_gelu_sm90a.cu is not compiled, so they are not applicable on any device and their benchmarks are listed as
// not run.
#include "fc_gelu_sm90a.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {

namespace {

[[noreturn]] void refuse() {
  throw NotApplicable(
      "gpt lab_fc_gelu_bf16 v5-v27 and lab_fc_gelu_backward_bf16 v2-v9 need sm_90a code, which this build leaves out "
      "(ROOFBENCH_HOPPER_90A=OFF)");
}

}  // namespace

void fc_gelu_sm90a_configure() { refuse(); }
void fc_gelu_sm90a(int, bf16*, bf16*, const bf16*, const bf16*, const bf16*, int, int, int, cudaStream_t) { refuse(); }
void fc_gelu_backward_sm90a(int, bf16*, float*, float*, const bf16*, const bf16*, const bf16*, const bf16*, int, int,
                            int, cudaStream_t) {
  refuse();
}

}  // namespace roofbench::gpt::cuda::lab
