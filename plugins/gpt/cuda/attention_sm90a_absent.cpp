// The bf16 keeper's sm_90a kernels (v29's forward, v44's backward, without and with qkv's bias sums) in a build
// without sm_90a code (ROOFBENCH_HOPPER_90A off): attention_v44.cu is not compiled, hopper_path_available is false
// on every device, so the keeper runs v9's forward and backward and these refuse (the lab's v44 row is listed as not
// run, with the reason).
#include <string>

#include "layers.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda {

namespace {

[[noreturn]] void refuse(const char* kernel) {
  throw NotApplicable(std::string("gpt attention ") + kernel +
                      " needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)");
}

}  // namespace

void fused_attention_sm90a_forward_configure() { refuse("v29's forward"); }
int fused_attention_sm90a_forward_blocks_per_sm() { refuse("v29's forward"); }
int fused_attention_sm90a_forward_grid() { refuse("v29's forward"); }
void fused_attention_sm90a_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&,
                                   cudaStream_t) {
  refuse("v29's forward");
}
void fused_attention_sm90a_backward_configure() { refuse("v44's backward"); }
int fused_attention_sm90a_backward_blocks_per_sm() { refuse("v44's backward"); }
void fused_attention_sm90a_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*,
                                    RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v44's backward");
}

int fused_attention_sm90a_backward_and_bias_gradient_blocks_per_sm() {
  refuse("v44's backward with qkv's bias sums");
}
void fused_attention_sm90a_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*,
                                                     const float*, const bf16*, const float*, RopeTable,
                                                     const AttentionShape&, cudaStream_t) {
  refuse("v44's backward with qkv's bias sums");
}

}  // namespace roofbench::gpt::cuda
