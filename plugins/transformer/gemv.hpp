// A hand GEMV for the linear layers at a few tokens: y[tokens, out] = x[tokens, in] W^T in bf16 with fp32
// accumulation, W [out, in] row-major. At one token the layer is a weight read, so every version puts all of W
// in flight before any arithmetic. The versions (plugins/transformer/README.md has each one's figures):
//   v1  a warp per 768-wide segment of a row, its 16-byte loads all issued first (768 blocks at GPT-2's sizes);
//   v2  (sm_90) 128 blocks of about 36 KB of rows, each warp's rows brought into shared memory by one bulk copy;
//   v3  (sm_90) v1 launched with programmatic dependent launch (PDL), as a decode engine chains its layers: a
//       launch may start while the one before it runs, issues its weight loads, lets the next launch start and
//       waits for the previous grid before it reads x, so back-to-back launches overlap and the time per launch
//       is a chain's time per layer;
//   v4  (sm_90) v3 with 4 rows a warp, so more chained launches' blocks fit an SM at once;
//   v5  (sm_90) v4 with its rows held in shared memory (cp.async) rather than registers;
//   v6  (sm_90) v2 launched with PDL as v3 is v1;
//   v7  (sm_90) v3 waiting for the launch before by counts in memory that its blocks raise after their stores,
//       not by griddepcontrol.wait;
//   v8  (sm_90) v3 asking the L2 for the next launch's weights (a bulk prefetch, a share a block) once its own
//       loads are issued, so the next layer's weight read runs under this layer's chained wait;
//   v9  (sm_90) v8 asking for the next launch's x as well, where the caller names one (the linear case does not:
//       in a chain x is the previous layer's output, still in the L2, and under --cold it stays in place);
//   v10 (sm_90) v8 asking for the weights of the launch after next, two layers ahead, so each prefetch has two
//       chained launches' time to land.
// A v7 chain's launches share one chain state (kGemvChainBytes of device memory, zeroed once) and one stream.
// Since a v7 launch never waits for the grid before it, no kernel but the chain's own launches may still run when
// it starts and write what it reads or touch its y: put a synchronization, or a copy or memset on the stream,
// between such work and the chain. The chained versions' weight loads come before the wait, so W must not be
// written by any earlier launch on the stream that may still run (only x and y may be a neighbour's): PDL makes a
// grid's writes visible to the next only at its wait. The host synchronizes after a case's setup, its copies and
// its poisoning.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace roofbench::transformer {

// The empty string when gemv_bf16 takes the shape, else why not (in must be 768, 1536 or 3072, tokens 1, 2, 4 or 8).
std::string gemv_refusal(std::int64_t in, std::int64_t out, std::int64_t tokens);
const std::vector<std::string>& gemv_versions();
// What `version` uses that only sm_90 and later have, in words (v2: cp.async.bulk, elsewhere its kernel traps;
// v3 to v5, v7: PDL's griddepcontrol; v6, v8 to v10: both); empty for a version that runs on any GPU.
std::string gemv_sm90_feature(const std::string& version);
// Whether `version`'s launches overlap the one before them on the stream (PDL): v3 to v10.
bool gemv_launches_overlap(const std::string& version);
// Whether the code this build gives CUDA device `device` for `version` has those sm_90 instructions: compiled
// from compute_90 or later. Code JIT-compiled from an earlier PTX (a build for compute_80 alone, run on an H100)
// leaves them out: v2's and v6's kernels trap, v3's to v5's and v8's to v10's have no griddepcontrol.wait and v7's no
// counts, so, launched with PDL, they could read x before the launch before it has written it. True for a version
// without sm_90 features.
bool gemv_code_has_sm90(const std::string& version, int device);
// The blocks of a version's (v1, v3 to v10) kernel for `in` and `tokens` that an SM of CUDA device
// `device` holds at once: how many chained launches' blocks fit together. Throws std::invalid_argument for v2 or
// a shape gemv_refusal refuses.
int gemv_blocks_per_sm(const std::string& version, std::int64_t in, std::int64_t tokens, int device);
// The device memory a v7 chain's state takes; zeroed once, before the chain's first launch.
inline constexpr std::size_t kGemvChainBytes = 256;
// Whether `version`'s launches need a chain state (v7).
bool gemv_needs_chain(const std::string& version);
// How many launches ahead `version` prefetches (GemvNextRun): 1 for v8 and v9, 2 for v10, else 0.
int gemv_prefetch_distance(const std::string& version);
// What a later launch on the stream reads, for the versions that prefetch it (16-byte multiples, under 4 GiB): the
// launch gemv_prefetch_distance(version) launches ahead; v8 and v10 ask the L2 for w, v9 for w and x, once their
// own weight loads are issued. Empty: nothing to prefetch.
struct GemvNextRun {
  const void* w = nullptr;
  std::size_t w_bytes = 0;
  const void* x = nullptr;
  std::size_t x_bytes = 0;
};
// version: one of gemv_versions(); chain: the chain's state where gemv_needs_chain(version), else unused.
void gemv_bf16(const std::string& version, const void* w, const void* x, void* y, std::int64_t in, std::int64_t out,
               std::int64_t tokens, cudaStream_t stream, void* chain = nullptr, const GemvNextRun& next = {});

}  // namespace roofbench::transformer
