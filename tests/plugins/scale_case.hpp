// y = factor * x on fp32, checked against y = 2x in fp64: the trivial CPU case the test plugins vary.
// With factor 2 it passes its gate; any other factor fails it by |factor - 2| / 2.
#pragma once

#include <roofbench/plugin.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace roofbench::test_plugins {

class ScaleCase : public Case {
 public:
  ScaleCase(std::size_t n, float factor) : n_(n), factor_(factor) {}

  void setup(Context& ctx) override {
    x_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::input));
    y_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::output));
    ctx.fill_random(x_, n_, ElementType::f32);
  }
  void run(Context&) override {
    for (std::size_t i = 0; i < n_; ++i) y_[i] = factor_ * x_[i];
  }
  Work work() const override {
    const double n = static_cast<double>(n_);
    return {.flops = n, .bytes = 2 * sizeof(float) * n, .items = n, .item_name = "elements"};
  }
  Check check(Context&) override {
    std::vector<double> reference(n_);
    for (std::size_t i = 0; i < n_; ++i) reference[i] = 2.0 * static_cast<double>(x_[i]);
    return {.rel_l2_error = relative_l2_error(y_, reference.data(), n_)};
  }

 protected:
  std::size_t n_;
  float factor_;
  float* x_ = nullptr;
  float* y_ = nullptr;
};

// A CPU fp32 CaseSpec whose cases are made by `make` from the axis "n".
template <typename MakeCase>
CaseSpec scale_spec(std::string name, std::string description, std::vector<Axis> axes, MakeCase make) {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.axes = std::move(axes);
  spec.device = DeviceNeed::cpu();
  spec.precision = Precision::fp32;
  spec.make = [make](const Params& p) -> std::unique_ptr<Case> { return make(static_cast<std::size_t>(p.integer("n"))); };
  return spec;
}

}  // namespace roofbench::test_plugins
