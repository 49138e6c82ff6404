// Versions 10's, 11's, 15's, 19's, 23's, 24's and 26's forwards, 12's, 14's, 17's, 18's, 21's, 25's, 26's, 27's and
// 30's to 43's and 45's backwards, v22 and v28 in a build without sm_90a code (ROOFBENCH_HOPPER_90A off):
// attention_v10.cu, _v12.cu, _v14.cu, _v15.cu, _v17.cu, _v18.cu, _v19.cu, _v21.cu, _v22.cu, _v23.cu, _v25.cu, _v26.cu,
// _v27.cu, _v30.cu, _v32.cu and _v43.cu are not compiled, so the versions are not applicable on any device and their
// benchmarks are listed as not run (the keeper's sm_90a kernels, v29's forward and v44's backward, refuse there as
// these do: cuda/attention_sm90a_absent.cpp).
#include <string>

#include "attention_versions.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {

namespace {

[[noreturn]] void refuse(const char* version) {
  throw NotApplicable(std::string("gpt attention ") + version +
                      " needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)");
}

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
void attention_v14_backward_configure() { refuse("v14's backward"); }
void attention_v14_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v14's backward");
}
void attention_v15_forward_configure() { refuse("v15's forward"); }
void attention_v15_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v15's forward");
}
void attention_v15_or_v9_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&,
                                 cudaStream_t) {
  refuse("v15's forward");
}
void attention_v17_backward_configure() { refuse("v17's backward"); }
void attention_v17_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v17's backward");
}
void attention_v18_backward_configure() { refuse("v18's backward"); }
void attention_v18_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v18's backward");
}
void attention_v21_backward_configure() { refuse("v21's backward"); }
void attention_v21_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v21's backward");
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

void attention_v25_backward_configure() { refuse("v25's backward"); }
void attention_v25_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v25's backward");
}
void attention_v27_backward_configure() { refuse("v27's backward"); }
void attention_v27_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v27's backward");
}
void attention_v30_backward_configure() { refuse("v30's backward"); }
void attention_v30_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v30's backward");
}
void attention_v31_backward_configure() { refuse("v31's backward"); }
void attention_v31_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v31's backward");
}
void attention_v32_backward_configure() { refuse("v32's backward"); }
void attention_v32_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v32's backward");
}
void attention_v33_backward_configure() { refuse("v33's backward"); }
void attention_v33_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v33's backward");
}
void attention_v34_backward_configure() { refuse("v34's backward"); }
void attention_v34_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v34's backward");
}
void attention_v34_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v34's backward with qkv's bias sums");
}
void attention_v35_backward_configure() { refuse("v35's backward"); }
void attention_v35_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v35's backward");
}
void attention_v36_backward_configure() { refuse("v36's backward"); }
void attention_v36_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v36's backward");
}
void attention_v37_backward_configure() { refuse("v37's backward"); }
void attention_v37_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v37's backward");
}
void attention_v37_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v37's backward with qkv's bias sums");
}
void attention_v38_backward_configure() { refuse("v38's backward"); }
void attention_v38_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v38's backward");
}
void attention_v38_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v38's backward with qkv's bias sums");
}
void attention_v39_backward_configure() { refuse("v39's backward"); }
void attention_v39_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v39's backward");
}
void attention_v39_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v39's backward with qkv's bias sums");
}
void attention_v40_backward_configure() { refuse("v40's backward"); }
void attention_v40_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v40's backward");
}
void attention_v40_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v40's backward with qkv's bias sums");
}
void attention_v41_backward_configure() { refuse("v41's backward"); }
void attention_v41_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v41's backward");
}
void attention_v41_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v41's backward with qkv's bias sums");
}
void attention_v42_backward_configure() { refuse("v42's backward"); }
void attention_v42_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v42's backward");
}
void attention_v42_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v42's backward with qkv's bias sums");
}
void attention_v43_backward_configure() { refuse("v43's backward"); }
void attention_v43_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v43's backward");
}
void attention_v45_backward_configure() { refuse("v45's backward"); }
void attention_v45_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v45's backward");
}
void attention_v45_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v45's backward with qkv's bias sums");
}
void attention_v46_backward_configure() { refuse("v46's backward"); }
void attention_v46_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v46's backward");
}
void attention_v46_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v46's backward with qkv's bias sums");
}
void attention_v47_backward_configure() { refuse("v47's backward"); }
void attention_v47_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v47's backward");
}
void attention_v47_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v47's backward with qkv's bias sums");
}
void attention_v26_backward_configure() { refuse("v26's backward"); }
void attention_v26_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v26's backward");
}
void attention_v26_backward_and_bias_gradient(bf16*, float*, float*, float*, const bf16*, const bf16*, const float*,
                                              const bf16*, const float*, RopeTable, const AttentionShape&,
                                              cudaStream_t) {
  refuse("v26's backward with qkv's bias sums");
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

}  // namespace roofbench::gpt::cuda::lab
