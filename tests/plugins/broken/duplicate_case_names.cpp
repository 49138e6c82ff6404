// A plugin with two cases of the same name: their benchmarks would be indistinguishable.
#include "../scale_case.hpp"

namespace {

using namespace roofbench;

void describe(Plugin& plugin) {
  plugin.name = "duplicate_case_names";
  for (int copy = 0; copy < 2; ++copy)
    plugin.add(test_plugins::scale_spec("twice", "y = 2x", {Axis::ints("n", {64})},
                                        [](std::size_t n) { return std::make_unique<test_plugins::ScaleCase>(n, 2.0f); }));
}

}  // namespace

ROOFBENCH_PLUGIN("duplicate_case_names", describe)
