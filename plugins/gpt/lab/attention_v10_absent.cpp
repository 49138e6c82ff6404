// Versions 10's, 11's, 14's and 15's launchers in a build without sm_90a code (ROOFBENCH_HOPPER_90A off):
// attention_v10.cu, attention_v14.cu and attention_v15.cu are not compiled, so the versions are not applicable
// on any device and their benchmarks are listed as not run (v12's and v13's backward, the training library's,
// refuses there as these do: attention_v12_absent.cpp).
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
void attention_v15_configure() { refuse("v15"); }
int attention_v15_blocks_per_sm() { refuse("v15"); }
void attention_v15_forward(bf16*, float*, const bf16*, const float*, RopeTable, const AttentionShape&, cudaStream_t) {
  refuse("v15");
}
void attention_v14_configure() { refuse("v14"); }
int attention_v14_blocks_per_sm() { refuse("v14"); }
void attention_v14_backward(bf16*, float*, const bf16*, const bf16*, const float*, const bf16*, const float*, RopeTable,
                            const AttentionShape&, cudaStream_t) {
  refuse("v14");
}

}  // namespace roofbench::gpt::cuda::lab
