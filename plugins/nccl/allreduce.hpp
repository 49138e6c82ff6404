// The nccl plugin's cases: all-reduce measured as nccl-tests' all_reduce_perf measures it.
// Declared here (not only in the plugin's entry file) so the tests can drive the cases end to end.
#pragma once

#include <cstddef>
#include <vector>

#include "roofbench/plugin.hpp"

namespace roofbench::nccl {

// Adds allreduce_fp32 and allreduce_bf16 to the plugin.
void describe_plugin(Plugin& plugin);

// Which elements of a message the all-reduce gate compares: every one up to kGateFullCompareBytes,
// else an even spread of kGateSpread elements plus the last kGateTail (where a wrong element count or
// a mishandled remainder would show).
inline constexpr std::size_t kGateFullCompareBytes = std::size_t{64} << 20;
inline constexpr std::size_t kGateSpread = std::size_t{1} << 20;
inline constexpr std::size_t kGateTail = 4096;

struct GateSample {
  std::size_t elements = 0;          // in the message
  std::vector<std::size_t> indices;  // sorted and unique; empty: every element is compared
  bool every() const { return indices.empty(); }
  std::size_t size() const { return every() ? elements : indices.size(); }
  std::size_t index(std::size_t j) const { return every() ? j : indices[j]; }
};

GateSample choose_gate_sample(std::size_t elements, std::size_t element_size);

}  // namespace roofbench::nccl
