// Versions 10's, 11's, 15's, 19's, 23's, 24's and 26's forwards, 12's backward, v22 and v28, and the backward walks
// (configure_backward_walk's versions) in a build without sm_90a code (ROOFBENCH_HOPPER_90A off): attention_v10.cu,
// _v12.cu, _v14.cu, _v15.cu, _v17.cu, _v18.cu, _v19.cu, _v21.cu, _v22.cu, _v23.cu, _v25.cu, _v26.cu, _v27.cu, _v30.cu,
// _v32.cu, _v43.cu, _v49.cu and backward_walks.cpp are not compiled, so the versions are not applicable on any device
// and their benchmarks are listed as not run (the keeper's sm_90a kernels, v29's forward and v44's backward, refuse
// there as these do: cuda/attention_sm90a_absent.cpp).
#include <string>

#include "attention_versions.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {

namespace {

[[noreturn]] void refuse(const std::string& version) {
  throw NotApplicable("gpt attention " + version +
                      " needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)");
}
[[noreturn]] void refuse_walk(int version) { refuse("v" + std::to_string(version) + "'s backward"); }

}  // namespace

void attention_v10_configure() { refuse("v10"); }
void attention_v10_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v10");
}
void attention_v11_configure() { refuse("v11"); }
void attention_v11_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v11");
}
void attention_v12_backward_configure() { refuse("v12's backward"); }
void attention_v12_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v12's backward");
}
void attention_v15_forward_configure() { refuse("v15's forward"); }
void attention_v15_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v15's forward");
}
void attention_v15_or_v9_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&,
                                 cudaStream_t) {
  refuse("v15's forward");
}
void attention_v19_forward_configure() { refuse("v19's forward"); }
void attention_v19_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v19's forward");
}

void attention_v22_configure() { refuse("v22"); }
void attention_v22_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v22");
}
void attention_v22_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v22");
}

void attention_v23_configure() { refuse("v23"); }
void attention_v24_configure() { refuse("v24"); }
void attention_v23_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v23");
}
void attention_v24_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v24");
}

void attention_v50_forward_configure() { refuse("v50's forward"); }
void attention_v50_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v50's forward");
}
void attention_v26_forward_configure() { refuse("v26's forward"); }
void attention_v26_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v26's forward");
}
void attention_v28_configure() { refuse("v28"); }
void attention_v28_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v28");
}
void attention_v28_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v28");
}

void configure_backward_walk(int version) { refuse_walk(version); }
void launch_backward_walk(int version, bf16*, const bf16*, const bf16*, const float*, const bf16*, const float*,
                          RopeTable, const AttentionShape&, cudaStream_t) {
  refuse_walk(version);
}
void launch_backward_walk_and_bias_gradient(int version, bf16*, float*, float*, const bf16*, const bf16*, const float*,
                                            const bf16*, const float*, RopeTable, const AttentionShape&,
                                            cudaStream_t) {
  refuse_walk(version);
}

}  // namespace roofbench::gpt::cuda::lab
