// The cpu plugin's cases, kept apart from its entry point so that tests can run them directly.
#pragma once

#include <roofbench/plugin.hpp>

#include <cstdint>
#include <vector>

namespace roofbench::plugins::cpu {

// Adds every case: stream_copy, stream_triad, add, matmul_naive, matmul_blocked, and matmul_blas where
// the system BLAS was found at build time.
void add_cases(Plugin& plugin);

// The rows of an n x n matmul output that its gate compares with the fp64 reference: all of them up to
// n = 512, beyond that 64 evenly spaced rows (first and last included), since the full reference at
// n = 2048 would cost 17 GFLOP in fp64. The gate still checks every output is finite.
std::vector<std::int64_t> matmul_checked_rows(std::int64_t n);

}  // namespace roofbench::plugins::cpu
