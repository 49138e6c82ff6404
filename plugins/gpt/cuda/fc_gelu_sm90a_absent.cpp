// The bf16 keeper's sm_90a fc + GELU forward in a build without sm_90a code (ROOFBENCH_HOPPER_90A off):
// fc_gelu_sm90a.cu is not compiled, hopper_path_available is false on every device, so the trainers run cuBLASLt's
// GEMM and the GELU pass, and these refuse.
#include "layers.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda {

namespace {

[[noreturn]] void refuse() {
  throw NotApplicable("gpt: the fc + GELU keeper's sm_90a kernel needs sm_90a code, which this build leaves out "
                      "(ROOFBENCH_HOPPER_90A=OFF)");
}

}  // namespace

void fc_gelu_forward_sm90a_configure() { refuse(); }
void fc_gelu_forward_sm90a(bf16*, bf16*, const bf16*, const bf16*, const bf16*, int, int, int, cudaStream_t) {
  refuse();
}
void fc_gelu_backward_sm90a(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, const bf16*, int, int, int,
                            cudaStream_t) {
  refuse();
}

}  // namespace roofbench::gpt::cuda
