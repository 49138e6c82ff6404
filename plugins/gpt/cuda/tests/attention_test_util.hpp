// What the fused attention's GPU tests share (the keepers' in layers_test.cpp, the kernel lab's versions'
// in plugins/gpt/lab/tests): one forward + backward on small inputs, and the inputs' RoPE table.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "bf16.hpp"
#include "gpu_test_util.hpp"
#include "layers.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench::gpt::cuda::testing {

struct FusedAttentionRun {
  std::vector<float> out, lse, dqkv;
};

// One forward + backward (configure, then forward(out, lse, qkv, bias, rope, shape, stream), then
// backward(dqkv, delta, dout, out, lse, qkv, bias, rope, shape, stream), layers.hpp's contract) on Elem
// (float or bf16) copies of qkv and dout (for bf16 already bf16-exact), outputs poisoned with NaN first so
// every element must be written.
template <typename Elem, typename Configure, typename Forward, typename Backward>
FusedAttentionRun run_fused_attention(Configure configure, Forward forward, Backward backward,
                                      const AttentionShape& shape, const std::vector<float>& qkv,
                                      const std::vector<float>& bias, const std::vector<float>& dout,
                                      const std::vector<float>& cos, const std::vector<float>& sin) {
  const auto to_elem = [](const std::vector<float>& v) {
    std::vector<Elem> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<Elem>(v[i]);
    return out;
  };
  const auto to_float = [](const std::vector<Elem>& v) {
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
    return out;
  };
  Device dev;
  const bool has_lane_order = shape.head_dim == 2 * kRopeLaneOrderedPairs;
  const RopeTable rope{dev.upload(cos), dev.upload(sin),
                       has_lane_order ? dev.upload(rope_lane_ordered(cos, sin, shape.head_dim)) : nullptr};
  const std::size_t n = static_cast<std::size_t>(shape.batch) * shape.T, c = shape.channels();
  const std::size_t stats = static_cast<std::size_t>(shape.batch) * shape.heads * shape.T;
  Elem *d_qkv = dev.upload(to_elem(qkv)), *d_dout = dev.upload(to_elem(dout));
  float *d_bias = dev.upload(bias), *d_lse = dev.alloc<float>(stats), *d_delta = dev.alloc<float>(stats);
  Elem *d_out = dev.alloc<Elem>(n * c), *d_dqkv = dev.alloc<Elem>(n * 3 * c);
  ROOFBENCH_CUDA(cudaMemset(d_out, 0xff, n * c * sizeof(Elem)));
  ROOFBENCH_CUDA(cudaMemset(d_lse, 0xff, stats * sizeof(float)));
  ROOFBENCH_CUDA(cudaMemset(d_dqkv, 0xff, n * 3 * c * sizeof(Elem)));
  configure();
  forward(d_out, d_lse, static_cast<const Elem*>(d_qkv), static_cast<const float*>(d_bias), rope, shape, nullptr);
  backward(d_dqkv, d_delta, static_cast<const Elem*>(d_dout), static_cast<const Elem*>(d_out),
           static_cast<const float*>(d_lse), static_cast<const Elem*>(d_qkv), static_cast<const float*>(d_bias), rope,
           shape, nullptr);
  return FusedAttentionRun{to_float(Device::download(d_out, n * c)), Device::download(d_lse, stats),
                           to_float(Device::download(d_dqkv, n * 3 * c))};
}

// RoPE's table [T, hd/2] as the trainer computes it (in double).
inline void rope_table(std::vector<float>& cos, std::vector<float>& sin, int T, int hd, double base) {
  cos.resize(static_cast<std::size_t>(T) * hd / 2);
  sin.resize(cos.size());
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < hd / 2; ++i) {
      const double angle = t * std::pow(base, -2.0 * i / hd);
      cos[t * hd / 2 + i] = static_cast<float>(std::cos(angle));
      sin[t * hd / 2 + i] = static_cast<float>(std::sin(angle));
    }
}

inline std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

}  // namespace roofbench::gpt::cuda::testing
