// A plugin whose second case kills the process: the results of the first must survive it.
#include <cstdlib>

#include "../scale_case.hpp"

namespace {
using namespace roofbench;
using roofbench::test_plugins::ScaleCase;

class AbortingCase final : public ScaleCase {
 public:
  AbortingCase() : ScaleCase(1024, 2.0f) {}
  void run(Context&) override { std::abort(); }
};

void describe(Plugin& plugin) {
  plugin.description = "a passing case, then one that aborts the process";
  plugin.add({.name = "a_passes", .device = DeviceNeed::cpu(), .precision = Precision::fp32,
              .make = [](const Params&) { return std::make_unique<ScaleCase>(1024, 2.0f); }});
  plugin.add({.name = "b_aborts", .device = DeviceNeed::cpu(), .precision = Precision::fp32,
              .make = [](const Params&) { return std::make_unique<AbortingCase>(); }});
}
}  // namespace

ROOFBENCH_PLUGIN("crash", describe)
