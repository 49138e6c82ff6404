// Test plugin `mixed`: one case for each line the console prints about a benchmark (passed, gate failed,
// errored, not applicable here, needs a GPU, a sweep that ends), so one CPU run shows the whole table and
// summary.
#include "../scale_case.hpp"

namespace {

using namespace roofbench;
using test_plugins::ScaleCase;
using test_plugins::scale_spec;

class Throws final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void run(Context&) override { throw Error("run() of mixed/throws failed on purpose"); }
};

class DoesNotApply final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void setup(Context&) override { throw NotApplicable("this case applies to no device (on purpose)"); }
};

// One item per run however large n is: the rate falls as n grows, so the sweep ends after its third
// point (two in a row not rising) with its knee at the first, and the fourth is not run.
class FallingRate final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  Work work() const override {
    Work w = ScaleCase::work();
    w.items = 1;
    w.item_name = "sweeps";
    return w;
  }
};

template <typename CaseType>
CaseSpec spec(std::string name, std::vector<std::int64_t> sizes, float factor = 2.0f) {
  return scale_spec(std::move(name), "", {Axis::ints("n", std::move(sizes))},
                    [factor](std::size_t n) { return std::make_unique<CaseType>(n, factor); });
}

void describe(Plugin& plugin) {
  plugin.name = "mixed";
  plugin.description = "test plugin: a case for each kind of console line";
  plugin.add(spec<ScaleCase>("passes", {1024}));
  plugin.add(spec<ScaleCase>("gate_fails", {1024}, 2.02f));
  plugin.add(spec<Throws>("throws", {1024}));
  plugin.add(spec<DoesNotApply>("does_not_apply", {1024}));
  CaseSpec gpu = spec<ScaleCase>("needs_gpu", {1024, 4096});
  gpu.device = DeviceNeed::gpu();
  plugin.add(std::move(gpu));
  CaseSpec sweep = spec<FallingRate>("sweep_falls", {1024, 65536, 4194304, 16777216});
  sweep.sweep_axis = "n";
  plugin.add(std::move(sweep));
}

}  // namespace

ROOFBENCH_PLUGIN("mixed", describe)
