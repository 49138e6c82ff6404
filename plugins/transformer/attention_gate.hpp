// The attention gate: fp64 attention on the CPU, from the inputs as stored, for a sample of (batch, head)
// pairs and of query rows, against the kernel's output; the whole output is scanned for non-finite values.
#pragma once

#include <cstdint>
#include <vector>

#include "roofbench/case_support/gate.hpp"
#include "roofbench/kernels/cuda_attention.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::transformer {

struct AttentionOperands {
  kernels::AttentionShape shape;
  ElementType type = ElementType::bf16;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  std::vector<std::int64_t> must_check;  // (batch, head) pairs compared besides the sampled ones
};

// The (batch, head) pairs in which a balanced split-KV grid's runs of `run_len` keys start part-way
// through a head's `kv_len` keys, so that one head's result is merged from two blocks: at most `count`
// of them, spread over the grid of `blocks` runs. A wrong cross-head merge shows only there.
std::vector<std::int64_t> run_boundary_pairs(std::int64_t blocks, std::int64_t run_len, std::int64_t kv_len,
                                             std::int64_t pairs, std::size_t count);

// (batch, head) pairs compared: the first, the last and random others, `count` in all (fewer if there
// are fewer pairs); each pair is judged on its own (the gate's error is the worst pair's), so one bad head
// cannot hide in an L2 norm pooled with good ones. Query rows: the first and last rows and those at the 64- and 128-row block edges
// near both ends (where a mask or a last block goes wrong), plus random ones.
std::vector<std::int64_t> sampled_pairs(std::int64_t pairs, std::size_t count, std::uint64_t seed);
std::vector<std::int64_t> sampled_rows(std::int64_t q_len, std::size_t random_rows, std::uint64_t seed);

// Sets `figures` to the gate's count of non-finite outputs.
Check check_attention(Context& ctx, const AttentionOperands& operands, const case_support::NonfiniteScan& scan,
                      std::vector<Figure>& figures);

}  // namespace roofbench::transformer
