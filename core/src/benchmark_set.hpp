// From loaded plugins to the list of benchmarks: one per (case x point of its axes' cartesian product),
// named <plugin>/<case>/<axis>:<value>/...
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cuda_arch.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench {

struct BenchmarkSpec {
  std::string name;
  std::string plugin;
  const CaseSpec* spec = nullptr;  // owned by the loaded plugin
  Params params;
  // The plugin's CUDA probe, set by whoever runs the benchmark: measure() asks each GPU rank through it
  // whether the plugin has code for that device before anything else runs.
  CudaProbe cuda_probe = nullptr;
};

// The cartesian product of the axes, the first axis varying slowest. No axes: one empty point.
std::vector<Params> expand_axes(const std::vector<Axis>& axes);
std::string benchmark_name(const std::string& plugin, const std::string& case_name, const Params& params);

// Axis values restricted by a suite: key "<plugin>/<case>.<axis>" (or "<plugin>/*.<axis>") -> values.
using AxisOverrides = std::map<std::string, std::vector<std::string>>;

std::vector<BenchmarkSpec> expand_plugin(const Plugin& plugin, const AxisOverrides& overrides = {});

// The first name that two benchmarks share; empty when all are unique.
std::string first_duplicate_name(const std::vector<BenchmarkSpec>& benchmarks);

// Why `value` cannot be an axis value (it would make names ambiguous or unprintable); empty when fine.
// Allowed: ASCII letters, digits and _ . + - x , = (no '/', which separates a name's parts, no ':').
std::string axis_value_problem(const std::string& value);

// The name of the benchmark without its sweep axis: benchmarks that share it form one sweep.
std::string sweep_group(const BenchmarkSpec& b);

}  // namespace roofbench
