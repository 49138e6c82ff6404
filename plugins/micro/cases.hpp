// The micro plugin's cases, split by family; describe() adds them all.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "roofbench/plugin.hpp"

namespace roofbench::micro {

// Every micro case runs on one GPU along one axis; callers set rarer fields (sweep_axis) on the result.
inline CaseSpec gpu_case(std::string name, std::string description, Axis axis, Precision precision,
                         std::function<std::unique_ptr<Case>(const Params&)> make) {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.axes = {std::move(axis)};
  spec.device = DeviceNeed::gpu();
  spec.precision = precision;
  spec.make = std::move(make);
  return spec;
}

void add_matmul_cases(Plugin& plugin);       // cuBLAS per precision, hand-written fp32, batched bf16
void add_elementwise_cases(Plugin& plugin);  // add (scalar, vec16) per precision, device copy
void describe(Plugin& plugin);

}  // namespace roofbench::micro
