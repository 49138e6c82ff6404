// configure_backward_walk and its launchers (attention_versions.hpp): a version found in its file's list.
#include <string>

#include "attention_versions.hpp"
#include "backward_walks.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

const VersionWalk& version_walk(int version) {
  for (const auto walks : {attention_v14_walks(), attention_v17_walks(), attention_v18_walks(), attention_v21_walks(),
                           attention_v25_walks(), attention_v26_walks(), attention_v27_walks(), attention_v30_walks(),
                           attention_v32_walks(), attention_v43_walks(), attention_v49_walks()})
    for (const VersionWalk& w : walks)
      if (w.version == version) return w;
  throw Error("gpt lab: attention v" + std::to_string(version) + " has no backward walk");
}

}  // namespace

void configure_backward_walk(int version) { version_walk(version).configure(); }

void launch_backward_walk(int version, bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                          const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                          cudaStream_t stream) {
  version_walk(version).launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

void launch_backward_walk_and_bias_gradient(int version, bf16* dqkv, float* dbias, float* partials, const bf16* dout,
                                            const bf16* out, const float* lse, const bf16* qkv,
                                            const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                            cudaStream_t stream) {
  const VersionWalk& w = version_walk(version);
  if (w.launch_with_bias_gradient == nullptr)
    throw Error("gpt lab: attention v" + std::to_string(version) + "'s backward has no form that sums qkv's bias");
  w.launch_with_bias_gradient(dqkv, dbias, partials, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda::lab
