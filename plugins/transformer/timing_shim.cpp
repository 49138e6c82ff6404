// The transformer plugin's own GEMV and split-KV decode behind C entry points, for timers outside roofbench:
// scripts/like_for_like.py loads this library with ctypes and passes torch tensors' data pointers and a
// stream, so triton's do_bench, do_bench_cudagraph and torch.profiler time the kernels that
// transformer/linear_bf16/.../impl:gemv and transformer/attention_decode_bf16/impl:split_kv time, compiled
// from the same sources. Every entry returns 0 when it enqueued its work, else 1 with the reason on stderr.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "gemv.hpp"
#include "roofbench/kernels/cuda_attention.hpp"

namespace {

using roofbench::kernels::AttentionShape;

template <typename Work>
int done(const char* what, Work&& work) {
  try {
    work();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    return 1;
  }
}

// The decode shape the plugin's cases use: one query per sequence, head dim 64.
AttentionShape decode_shape(std::int64_t batch, std::int64_t heads, std::int64_t kv_len) {
  AttentionShape shape;
  shape.batch = batch, shape.heads = heads, shape.q_len = 1, shape.kv_len = kv_len, shape.head_dim = 64;
  shape.causal = true;
  return shape;
}

}  // namespace

extern "C" {

// y[tokens, out] = x[tokens, in] W^T, bf16; version: one of gemv_versions() ("v1").
int roofbench_gemv_bf16(const char* version, const void* w, const void* x, void* y, std::int64_t in,
                        std::int64_t out, std::int64_t tokens, void* stream) {
  return done("gemv_bf16", [&] {
    roofbench::transformer::gemv_bf16(version, w, x, y, in, out, tokens, static_cast<cudaStream_t>(stream));
  });
}

// The workspace a split-KV decode of this shape needs on a GPU of `sm_count` SMs; 0 after an error.
std::size_t roofbench_split_kv_workspace_bytes(const char* version, std::int64_t batch, std::int64_t heads,
                                               std::int64_t kv_len, int sm_count) {
  std::size_t bytes = 0;
  done("split_kv_workspace_bytes", [&] {
    bytes = roofbench::kernels::plan_split_kv(decode_shape(batch, heads, kv_len), sm_count, version).workspace_bytes;
  });
  return bytes;
}

// Zeroes the workspace's counters: once, before the first decode that uses it.
int roofbench_split_kv_zero(const char* version, std::int64_t batch, std::int64_t heads, std::int64_t kv_len,
                            int sm_count, void* workspace, void* stream) {
  return done("split_kv_zero", [&] {
    const AttentionShape shape = decode_shape(batch, heads, kv_len);
    const auto plan = roofbench::kernels::plan_split_kv(shape, sm_count, version);
    roofbench::kernels::zero_split_kv_workspace(plan, shape, workspace, static_cast<cudaStream_t>(stream));
  });
}

// O = softmax(Q K^T / 8) V for one bf16 query per (batch, head); Q, O [batch, heads, 1, 64], K, V [batch, heads,
// kv_len, 64]. The plan is made at each call, on the host, as the plugin makes it once in setup.
int roofbench_split_kv_decode_bf16(const char* version, const void* q, const void* k, const void* v, void* o,
                                   void* workspace, std::int64_t batch, std::int64_t heads, std::int64_t kv_len,
                                   int sm_count, void* stream) {
  return done("split_kv_decode_bf16", [&] {
    const AttentionShape shape = decode_shape(batch, heads, kv_len);
    const auto plan = roofbench::kernels::plan_split_kv(shape, sm_count, version);
    roofbench::kernels::launch_split_kv_decode(roofbench::kernels::AttentionType::bf16, shape, plan, q, k, v, o,
                                               workspace, static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
