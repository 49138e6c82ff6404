// The lab's backward walks listed by version, one list a file (attention_versions.hpp's configure_backward_walk and
// its launchers find a version in them: backward_walks.cpp). An entry holds functions, not the walk, since a walk's
// type (cuda/attention_backward_walk_sm90a.cuh's BackwardWalk) is each file's own.
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {

using WalkLaunch = void(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                        const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream);
using WalkLaunchWithBiasGradient = void(bf16* dqkv, float* dbias, float* partials, const bf16* dout, const bf16* out,
                                        const float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                        const AttentionShape& s, cudaStream_t stream);

struct VersionWalk {
  int version;
  void (*configure)();
  WalkLaunch* launch;
  WalkLaunchWithBiasGradient* launch_with_bias_gradient;  // null where the walk has no form summing dqkv's columns
};

template <auto* kWalk, auto*... kWithSums>
void configure_walks() {
  kWalk->configure();
  (kWithSums->configure(), ...);
}
template <auto* kWalk>
void launch_walk(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                 const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  kWalk->launch(dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}
template <auto* kWalk>
void launch_walk_with_bias_gradient(bf16* dqkv, float* dbias, float* partials, const bf16* dout, const bf16* out,
                                    const float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                    const AttentionShape& s, cudaStream_t stream) {
  kWalk->launch_with_bias_gradient(dqkv, dbias, partials, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

// A list's entry: version's walk, and the same walk summing dqkv's columns where there is one.
template <auto* kWalk>
constexpr VersionWalk version_walk(int version) {
  return {version, configure_walks<kWalk>, launch_walk<kWalk>, nullptr};
}
template <auto* kWalk, auto* kWithSums>
constexpr VersionWalk version_walk(int version) {
  return {version, configure_walks<kWalk, kWithSums>, launch_walk<kWalk>, launch_walk_with_bias_gradient<kWithSums>};
}

std::span<const VersionWalk> attention_v14_walks();
std::span<const VersionWalk> attention_v17_walks();
std::span<const VersionWalk> attention_v18_walks();
std::span<const VersionWalk> attention_v21_walks();
std::span<const VersionWalk> attention_v25_walks();
std::span<const VersionWalk> attention_v26_walks();
std::span<const VersionWalk> attention_v27_walks();
std::span<const VersionWalk> attention_v30_walks();
std::span<const VersionWalk> attention_v32_walks();
std::span<const VersionWalk> attention_v43_walks();
std::span<const VersionWalk> attention_v49_walks();

}  // namespace roofbench::gpt::cuda::lab
