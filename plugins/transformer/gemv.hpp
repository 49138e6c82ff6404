// A hand GEMV for the linear layers at a few tokens: y[tokens, out] = x[tokens, in] W^T in bf16 with fp32
// accumulation, W [out, in] row-major. At one token the layer is a weight read; both versions put all of it
// in flight at once. v1: a warp per 768-wide segment of a row, its 16-byte loads all issued before any
// arithmetic (768 blocks). v2 (sm_90): 128 blocks of about 36 KB of rows, each warp's rows fetched into shared
// memory by one bulk copy (cp.async.bulk); slower on an H200 (hot in a graph 2.43 and 2.35 us against v1's
// 2.04 and 2.10, cold 6.40 and 6.18 against 5.98 and 5.86: a warp adds only once all its rows have landed).
// v3 (sm_90): v1's loads and arithmetic, launched with programmatic dependent launch (PDL), as a decode engine
// chains its layers: each launch may start while the one before it on the stream runs, issues its weight loads,
// lets the next launch start, and waits for the previous grid before it reads x, so the next layer's weight
// reads overlap this one's tail. Timed back to back (a graph, a rotation) its time per launch is a chain's
// time per layer, not one kernel's alone. v4 (sm_90): v3 with 4 rows a warp, a quarter of its threads a launch
// (120 registers a thread), so more of the chained launches' blocks fit on an SM at once and their weight loads
// start further ahead. v5 (sm_90): v4 with its rows of W held in shared memory (cp.async, 24 KB a block) rather
// than registers (45-50 a thread), so the blocks of about 6 launches fit an SM, not 2.7. v6 (sm_90): v2 launched
// with PDL as v3 is v1: a launch's whole weight read asked for by 128 x warps bulk copies before it waits, 36 KB
// of shared memory a block (6 blocks an SM at in = 768, 2 at 3072); cold by rotation on an H100 it took 2.97 us
// at 3072x768 against v3's 2.64. v7 (sm_90): v3 waiting for the launch before by counts in memory that each of
// that launch's blocks raises after its stores (acquire loads), not by griddepcontrol.wait, which also waits for
// the grid's completion; cold by rotation on an H100 it took 6.54 us at 768x3072 against v3's 2.59 (768 blocks
// adding to and polling one count cost more than the grid's completion signal). A chain's launches share one
// chain state (kGemvChainBytes of device memory, zeroed once) and one stream. Since a v7 launch never waits for
// the grid before it, no kernel but the chain's own launches may still run when it starts and write what it
// reads or touch its y: put a synchronization, or a copy or memset on the stream, between such work and the
// chain. The chained versions' weight loads come before the wait, so W must not be written by any earlier launch
// on the stream that may still run (only x and y may be a neighbour's): PDL makes a grid's writes visible to the
// next only at its wait. The host synchronizes after a case's setup, its copies and its poisoning.
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
// v3 to v5, v7: PDL's griddepcontrol; v6: both); empty for a version that runs on any GPU.
std::string gemv_sm90_feature(const std::string& version);
// Whether `version`'s launches overlap the one before them on the stream (PDL): v3 to v7.
bool gemv_launches_overlap(const std::string& version);
// Whether the code this build gives CUDA device `device` for `version` has those sm_90 instructions: compiled
// from compute_90 or later. Code JIT-compiled from an earlier PTX (a build for compute_80 alone, run on an H100)
// leaves them out: v2's and v6's kernels trap, v3's to v5's have no griddepcontrol.wait and v7's no counts, so,
// launched with PDL, they could read x before the launch before it has written it. True for a version without
// sm_90 features.
bool gemv_code_has_sm90(const std::string& version, int device);
// The blocks of a version's (v1, v3 to v7) kernel for `in` and `tokens` that an SM of CUDA device
// `device` holds at once: how many chained launches' blocks fit together. Throws std::invalid_argument for v2 or
// a shape gemv_refusal refuses.
int gemv_blocks_per_sm(const std::string& version, std::int64_t in, std::int64_t tokens, int device);
// The device memory a v7 chain's state takes; zeroed once, before the chain's first launch.
inline constexpr std::size_t kGemvChainBytes = 256;
// Whether `version`'s launches need a chain state (v7).
bool gemv_needs_chain(const std::string& version);
// version: one of gemv_versions(); chain: the chain's state where gemv_needs_chain(version), else unused.
void gemv_bf16(const std::string& version, const void* w, const void* x, void* y, std::int64_t in, std::int64_t out,
               std::int64_t tokens, cudaStream_t stream, void* chain = nullptr);

}  // namespace roofbench::transformer
