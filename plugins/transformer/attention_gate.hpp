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
};

// (batch, head) pairs compared: the first, the last and random others, `count` in all (fewer if there
// are fewer pairs). Query rows: the first and last rows and those at the 64- and 128-row block edges
// near both ends (where a mask or a last block goes wrong), plus random ones.
std::vector<std::int64_t> sampled_pairs(std::int64_t pairs, std::size_t count, std::uint64_t seed);
std::vector<std::int64_t> sampled_rows(std::int64_t q_len, std::size_t random_rows, std::uint64_t seed);

Check check_attention(Context& ctx, const AttentionOperands& operands, const case_support::NonfiniteScan& scan);

}  // namespace roofbench::transformer
