// Axis values with '/' would make "a:x/b:1" of one point and "a:x" "b:1" of another the same name.
#include "../scale_case.hpp"

namespace {
void describe(roofbench::Plugin& plugin) {
  using roofbench::Axis;
  plugin.add(roofbench::test_plugins::scale_spec(
      "slash", "", {Axis::strings("a", {"x/b:1", "x"}), Axis::strings("b", {"1"}), Axis::ints("n", {64})},
      [](std::size_t n) { return std::make_unique<roofbench::test_plugins::ScaleCase>(n, 2.0f); }));
}
}  // namespace

ROOFBENCH_PLUGIN("slash_in_axis_value", describe)
