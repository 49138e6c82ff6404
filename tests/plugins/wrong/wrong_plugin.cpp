// Test plugin `wrong`: one case per way a benchmark can fail, between two cases that pass, so a test
// can see that failures neither stop the run nor lose the results around them.
#include "../scale_case.hpp"

namespace {

using namespace roofbench;
using test_plugins::ScaleCase;
using test_plugins::scale_spec;

constexpr std::size_t kElements = 4096;

// The output is never written: the gate sees the host's poison (NaN).
class ForgetsOutput final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void run(Context&) override {}
};

class ThrowsInRun final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void run(Context&) override { throw Error("run() of throws_in_run failed on purpose"); }
};

class ThrowsInSetup final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void setup(Context&) override { throw Error("setup() of throws_in_setup failed on purpose"); }
};

template <typename CaseType>
CaseSpec spec(std::string name, std::string description, float factor = 2.0f) {
  return scale_spec(std::move(name), std::move(description), {Axis::ints("n", {kElements})},
                    [factor](std::size_t n) { return std::make_unique<CaseType>(n, factor); });
}

void describe(Plugin& plugin) {
  plugin.name = "wrong";
  plugin.description = "test plugin: cases that fail in every way a case can";
  plugin.add(spec<ScaleCase>("before_failures", "y = 2x, passes"));
  plugin.add(spec<ScaleCase>("off_by_one_percent", "y = 2.02x against y = 2x: relative error 1e-2", 2.02f));
  plugin.add(spec<ForgetsOutput>("forgets_output", "never writes y"));
  plugin.add(spec<ThrowsInRun>("throws_in_run", "run() throws"));
  plugin.add(spec<ThrowsInSetup>("throws_in_setup", "setup() throws"));
  plugin.add(spec<ScaleCase>("after_failures", "y = 2x, passes"));
}

}  // namespace

ROOFBENCH_PLUGIN("wrong", describe)
