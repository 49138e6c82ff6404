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

// What roofbench_split_kv_create makes: the decode's shape and the plan for it.
struct SplitKvDecode {
  AttentionShape shape;
  roofbench::kernels::SplitKvPlan plan;
};

}  // namespace

extern "C" {

// y[tokens, out] = x[tokens, in] W^T, bf16; version: one of gemv_versions() ("v1"); chain: the chain's state
// (kGemvChainBytes of device memory, zeroed once) for a version that needs one (gemv_needs_chain), else unused.
int roofbench_gemv_bf16(const char* version, const void* w, const void* x, void* y, std::int64_t in,
                        std::int64_t out, std::int64_t tokens, void* chain, void* stream) {
  return done("gemv_bf16", [&] {
    roofbench::transformer::gemv_bf16(version, w, x, y, in, out, tokens, static_cast<cudaStream_t>(stream), chain);
  });
}

// A split-KV decode's shape and plan, made once as the plugin makes them in setup, so that a timed call only
// launches. Q, O [batch, heads, 1, 64], K, V [batch, heads, kv_len, 64], bf16. Null after an error.
void* roofbench_split_kv_create(const char* version, std::int64_t batch, std::int64_t heads, std::int64_t kv_len,
                                int sm_count) {
  SplitKvDecode* decode = nullptr;
  done("split_kv_create", [&] {
    const AttentionShape shape = decode_shape(batch, heads, kv_len);
    decode = new SplitKvDecode{shape, roofbench::kernels::plan_split_kv(shape, sm_count, version)};
  });
  return decode;
}

void roofbench_split_kv_destroy(void* decode) { delete static_cast<SplitKvDecode*>(decode); }

// The workspace the decode needs.
std::size_t roofbench_split_kv_workspace_bytes(const void* decode) {
  return static_cast<const SplitKvDecode*>(decode)->plan.workspace_bytes;
}

// Zeroes the workspace's counters: once, before the first decode that uses it.
int roofbench_split_kv_zero(const void* decode, void* workspace, void* stream) {
  const auto& d = *static_cast<const SplitKvDecode*>(decode);
  return done("split_kv_zero", [&] {
    roofbench::kernels::zero_split_kv_workspace(d.plan, d.shape, workspace, static_cast<cudaStream_t>(stream));
  });
}

// O = softmax(Q K^T / 8) V for one bf16 query per (batch, head).
int roofbench_split_kv_decode_bf16(const void* decode, const void* q, const void* k, const void* v, void* o,
                                   void* workspace, void* stream) {
  const auto& d = *static_cast<const SplitKvDecode*>(decode);
  return done("split_kv_decode_bf16", [&] {
    roofbench::kernels::launch_split_kv_decode(roofbench::kernels::AttentionType::bf16, d.shape, d.plan, q, k, v, o,
                                               workspace, static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
