// examples/scale/scale.cpp: y = 2x on the CPU, the plugin docs/writing-plugins.md walks through.
#include <roofbench/plugin.hpp>
#include <vector>

namespace {
using namespace roofbench;

class Scale final : public Case {  // y = 2x
 public:
  explicit Scale(const Params& p) : n_(p.integer("n")) {}
  void setup(Context& ctx) override {
    x_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::input));
    y_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::output));
    ctx.fill_random(x_, n_, ElementType::f32);
  }
  void run(Context&) override {
    for (std::size_t i = 0; i < n_; ++i) y_[i] = 2 * x_[i];
  }
  Work work() const override { return {.flops = double(n_), .bytes = 8.0 * n_, .items = double(n_), .item_name = "elements"}; }
  Check check(Context&) override {
    std::vector<double> reference(x_, x_ + n_);
    for (double& r : reference) r *= 2;
    return {.rel_l2_error = relative_l2_error(y_, reference.data(), n_)};
  }

 private:
  std::size_t n_;
  float *x_ = nullptr, *y_ = nullptr;
};

void describe(Plugin& p) {
  p.description = "y = 2x on the CPU";
  p.add({.name = "scale", .description = "y = 2x in fp32", .axes = {Axis::powers("n", 1 << 10, 1 << 20, 4)},
         .device = DeviceNeed::cpu(), .precision = Precision::fp32,
         .make = [](const Params& params) { return std::make_unique<Scale>(params); }});
}
}  // namespace

ROOFBENCH_PLUGIN("scale", describe)
