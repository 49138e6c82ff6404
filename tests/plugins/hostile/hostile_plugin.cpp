// Test plugin `hostile`: cases that lie about their work or say things a terminal would act on.
#include "../scale_case.hpp"

namespace {

using namespace roofbench;
using test_plugins::ScaleCase;
using test_plugins::scale_spec;

// run() does nothing while work() claims a billion FLOPs: timed at next to nothing, it would report
// millions of percent of the roof. Its check passes, as a case that checks nothing would.
class IdleCase final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void run(Context&) override {}
  Work work() const override { return {.flops = 1e9, .bytes = 0}; }
  Check check(Context&) override { return {.rel_l2_error = 0}; }
};

// Fails in setup with a message full of terminal control sequences (clear screen, red, bell, carriage
// return).
class EscapesCase final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void setup(Context&) override { throw Error("\x1b[2J\x1b[31mred\x07 bell\rover"); }
};

// Counts its items under a name with a newline in it.
class NewlineItemsCase final : public ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  Work work() const override {
    Work w = ScaleCase::work();
    w.item_name = "rows\nbroken";
    return w;
  }
};

template <typename C>
CaseSpec spec_of(std::string name, std::string description) {
  return scale_spec(std::move(name), std::move(description), {Axis::ints("n", {1024})},
                    [](std::size_t n) { return std::make_unique<C>(n, 2.0f); });
}

void describe(Plugin& plugin) {
  plugin.name = "hostile";
  plugin.description = "test plugin: cases that lie or say things a terminal would act on";
  plugin.add(spec_of<IdleCase>("idle", "run() does nothing, work() claims 1e9 FLOP"));
  plugin.add(spec_of<ScaleCase>("honest", "y = 2x"));
  plugin.add(spec_of<EscapesCase>("escapes", "fails with escape sequences in its message"));
  plugin.add(spec_of<NewlineItemsCase>("newline_items", "a newline in its item name"));
}

}  // namespace

ROOFBENCH_PLUGIN("hostile", describe)
