// Test plugin `crash`: cases that do what a hostile or broken plugin does while it runs, each between
// cases that pass. With process isolation each costs only its own benchmark.
#include <cstdlib>
#include <limits>
#include <string>

#include "../scale_case.hpp"

namespace {
using namespace roofbench;
using roofbench::test_plugins::ScaleCase;

enum class Flaw {
  aborts,              // std::abort() in run()
  segfaults,           // a null write in run()
  exits_zero,          // exit(0) in run()
  teardown_throws_int, // teardown() throws something that is not a std::exception
  never_ends,          // run() loops forever (the case's timeout_s ends it)
  host_field_counters, // figures named like the host's fields
  not_utf8,            // an error message, a text figure and a number's name with bytes that are not UTF-8
  negative_error,      // check() returns a negative error
  nan_flops,           // work() gives NaN FLOPs
};

class FlawedCase final : public ScaleCase {
 public:
  explicit FlawedCase(Flaw flaw) : ScaleCase(1024, 2.0f), flaw_(flaw) {}
  void run(Context& ctx) override {
    if (flaw_ == Flaw::aborts) std::abort();
    if (flaw_ == Flaw::segfaults) *static_cast<volatile int*>(nullptr) = 1;
    if (flaw_ == Flaw::exits_zero) std::exit(0);
    if (flaw_ == Flaw::never_ends)
      for (volatile bool forever = true; forever;) {
      }
    ScaleCase::run(ctx);
  }
  void teardown(Context&) override {
    if (flaw_ == Flaw::teardown_throws_int) throw 42;
  }
  Work work() const override {
    Work w = ScaleCase::work();
    if (flaw_ == Flaw::nan_flops) w.flops = std::numeric_limits<double>::quiet_NaN();
    return w;
  }
  Check check(Context& ctx) override {
    Check c = ScaleCase::check(ctx);
    if (flaw_ == Flaw::negative_error) c.rel_l2_error = -0.5;
    return c;
  }
  std::vector<Figure> figures() const override {
    if (flaw_ == Flaw::host_field_counters)
      return {{"samples", 1}, {"name", 2}, {"noise", 3}, {"FLOP/s", 4}, {"noise", 7}, {"real_time", 8}};
    if (flaw_ == Flaw::not_utf8)
      return {{"bad\xff" "counter", 1}, {"algorithm", "caf\xc3" "\x28"}, {"algorithm", "twice"}};
    return {};
  }

 private:
  Flaw flaw_;
};

// A gate that fails with a message that is not UTF-8.
class BadMessageCase final : public ScaleCase {
 public:
  BadMessageCase() : ScaleCase(1024, 2.0f) {}
  Check check(Context& ctx) override {
    Check c = ScaleCase::check(ctx);
    c.passed_extra = false;
    c.detail = "latin-1 \xe9t\xe9 and a lone \x80";
    return c;
  }
};

CaseSpec spec(std::string name, std::function<std::unique_ptr<Case>()> make, double timeout_s = 0) {
  CaseSpec s;
  s.name = std::move(name);
  s.device = DeviceNeed::cpu();
  s.precision = Precision::fp32;
  s.make = [make](const Params&) { return make(); };
  s.timeout_s = timeout_s;
  return s;
}

void describe(Plugin& plugin) {
  plugin.description = "cases that crash, exit, hang or report nonsense, between cases that pass";
  auto passes = [] { return std::make_unique<ScaleCase>(1024, 2.0f); };
  auto flawed = [](Flaw f) { return [f] { return std::make_unique<FlawedCase>(f); }; };
  plugin.add(spec("a_passes", passes));
  plugin.add(spec("b_aborts", flawed(Flaw::aborts)));
  plugin.add(spec("c_segfaults", flawed(Flaw::segfaults)));
  plugin.add(spec("d_exits_zero", flawed(Flaw::exits_zero)));
  plugin.add(spec("e_teardown_throws_int", flawed(Flaw::teardown_throws_int)));
  plugin.add(spec("f_never_ends", flawed(Flaw::never_ends), 1.5));
  plugin.add(spec("g_host_field_counters", flawed(Flaw::host_field_counters)));
  plugin.add(spec("h_not_utf8", flawed(Flaw::not_utf8)));
  plugin.add(spec("i_not_utf8_message", [] { return std::make_unique<BadMessageCase>(); }));
  plugin.add(spec("j_negative_error", flawed(Flaw::negative_error)));
  plugin.add(spec("k_nan_flops", flawed(Flaw::nan_flops)));
  plugin.add(spec("z_passes", passes));
}
}  // namespace

ROOFBENCH_PLUGIN("crash", describe)
