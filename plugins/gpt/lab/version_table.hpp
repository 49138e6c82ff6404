// What every lab table (attention_versions.hpp, elementwise_versions.hpp, wgrad_versions.hpp) does with its
// rows: look one up by the lab's axis value, and list the axis's values. A row has a `name`, "v1".
#pragma once

#include <span>
#include <string>
#include <vector>

#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {

// The row named `name`; throws roofbench::Error naming the table's versions when there is none.
template <typename Row>
const Row& find_version(std::span<const Row> table, const std::string& name, const char* lab) {
  std::string names;
  for (const Row& row : table) {
    if (name == row.name) return row;
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  }
  throw Error(std::string("gpt ") + lab + ": no version '" + name + "' (versions: " + names +
              "; plugins/gpt/README.md lists the retired ones)");
}

// A lab's version axis: its table's names, in the table's order.
template <typename Row>
std::vector<std::string> version_names(std::span<const Row> table) {
  std::vector<std::string> names;
  for (const Row& row : table) names.push_back(row.name);
  return names;
}

}  // namespace roofbench::gpt::cuda::lab
