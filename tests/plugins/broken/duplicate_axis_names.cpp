// Two axes of one name: Params::str could only ever return the first.
#include "../scale_case.hpp"

namespace {
void describe(roofbench::Plugin& plugin) {
  using roofbench::Axis;
  plugin.add(roofbench::test_plugins::scale_spec(
      "twice", "", {Axis::ints("n", {64}), Axis::ints("n", {128})},
      [](std::size_t n) { return std::make_unique<roofbench::test_plugins::ScaleCase>(n, 2.0f); }));
}
}  // namespace

ROOFBENCH_PLUGIN("duplicate_axis_names", describe)
