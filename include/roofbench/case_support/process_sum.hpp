// Ranks in several processes (roofbench started by torchrun, srun or mpirun, one process per GPU): the
// element-wise sum of every process's values, through Context::exchange, for a gate whose reference is what
// every rank contributed. In one process: the values themselves. Header-only, for any plugin.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "roofbench/plugin.hpp"

namespace roofbench::case_support {

// Every process must call it with as many values (T: a trivially copyable number), as often as the others.
template <typename T>
std::vector<T> sum_over_processes(Context& ctx, const std::vector<T>& values) {
  const std::size_t bytes = values.size() * sizeof(T);
  const std::vector<std::string> all = ctx.exchange(std::string(reinterpret_cast<const char*>(values.data()), bytes));
  std::vector<T> sum(values.size(), T{}), theirs(values.size());
  for (const std::string& blob : all) {
    if (blob.size() != bytes)
      throw Error("a process sent " + std::to_string(blob.size()) + " bytes to sum, not " + std::to_string(bytes));
    std::memcpy(theirs.data(), blob.data(), bytes);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += theirs[i];
  }
  return sum;
}

}  // namespace roofbench::case_support
