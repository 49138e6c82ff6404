// Test plugin `good`: small CPU cases that always pass their gates.
#include "../scale_case.hpp"

namespace {

using namespace roofbench;
using test_plugins::ScaleCase;
using test_plugins::scale_spec;

void describe(Plugin& plugin) {
  plugin.name = "good";
  plugin.description = "test plugin: cases that pass";
  plugin.add(scale_spec("scale", "y = 2x", {Axis::ints("n", {1024, 4096})},
                        [](std::size_t n) { return std::make_unique<ScaleCase>(n, 2.0f); }));
  CaseSpec sweep = scale_spec("sweep", "y = 2x, n swept upward", {Axis::powers("n", 256, 4096, 4)},
                              [](std::size_t n) { return std::make_unique<ScaleCase>(n, 2.0f); });
  sweep.sweep_axis = "n";
  plugin.add(std::move(sweep));
}

}  // namespace

ROOFBENCH_PLUGIN("good", describe)
