#include "benchmark_set.hpp"

#include <cstdio>
#include <set>

namespace roofbench {

std::vector<Params> expand_axes(const std::vector<Axis>& axes) {
  std::vector<std::vector<std::pair<std::string, std::string>>> points{{}};
  for (const Axis& axis : axes) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& point : points)
      for (const auto& value : axis.values) {
        auto extended = point;
        extended.emplace_back(axis.name, value);
        next.push_back(std::move(extended));
      }
    points = std::move(next);
  }
  std::vector<Params> out;
  for (auto& p : points) out.emplace_back(std::move(p));
  return out;
}

std::string benchmark_name(const std::string& plugin, const std::string& case_name, const Params& params) {
  std::string name = plugin + "/" + case_name;
  for (const auto& [axis, value] : params.items()) name += "/" + axis + ":" + value;
  return name;
}

static const std::vector<std::string>* override_for(const AxisOverrides& overrides, const std::string& plugin,
                                                    const std::string& case_name, const std::string& axis) {
  for (const auto& key : {plugin + "/" + case_name + "." + axis, plugin + "/*." + axis, "*/*." + axis}) {
    if (auto it = overrides.find(key); it != overrides.end()) return &it->second;
  }
  return nullptr;
}

std::vector<BenchmarkSpec> expand_plugin(const Plugin& plugin, const AxisOverrides& overrides) {
  std::vector<BenchmarkSpec> out;
  for (const CaseSpec& spec : plugin.cases) {
    std::vector<Axis> axes = spec.axes;
    for (Axis& axis : axes)
      if (auto values = override_for(overrides, plugin.name, spec.name, axis.name)) axis.values = *values;
    for (Params& params : expand_axes(axes)) {
      std::string name = benchmark_name(plugin.name, spec.name, params);
      out.push_back({std::move(name), plugin.name, &spec, std::move(params)});
    }
  }
  return out;
}

std::string first_duplicate_name(const std::vector<BenchmarkSpec>& benchmarks) {
  std::set<std::string> seen;
  for (const auto& b : benchmarks)
    if (!seen.insert(b.name).second) return b.name;
  return {};
}

std::string axis_value_problem(const std::string& value) {
  if (value.empty()) return "an empty value";
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    const bool fine = (u >= '0' && u <= '9') || (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || c == '_' || c == '.' ||
                      c == '+' || c == '-' || c == ',' || c == '=';
    if (!fine) {
      char shown[16];
      std::snprintf(shown, sizeof shown, u >= 0x21 && u < 0x7f ? "'%c'" : "byte 0x%02x", u);
      return "value '" + (u >= 0x20 && u < 0x7f ? value : std::string("?")) + "' has " + shown +
             " (allowed: letters, digits, _ . + - , =)";
    }
  }
  return {};
}

std::string sweep_group(const BenchmarkSpec& b) {
  if (b.spec->sweep_axis.empty()) return {};
  std::vector<std::pair<std::string, std::string>> rest;
  for (const auto& item : b.params.items())
    if (item.first != b.spec->sweep_axis) rest.push_back(item);
  return benchmark_name(b.plugin, b.spec->name, Params(std::move(rest)));
}

}  // namespace roofbench
