// examples/scale on a GPU: the smallest out-of-tree CUDA plugin (y = 2x), built by the sdk test.
#include <cuda_runtime.h>
#include <roofbench/cuda.hpp>
#include <roofbench/plugin.hpp>

#include <vector>
namespace {
using namespace roofbench;
__global__ void twice(const float* x, float* y, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = 2 * x[i];
}
class Scale final : public Case {
 public:
  explicit Scale(const Params& p) : n_(p.integer("n")) {}
  void setup(Context& ctx) override {
    x_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::input));
    y_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::output));
    ctx.fill_random(x_, n_, ElementType::f32);
  }
  void run(Context& ctx) override {
    twice<<<(n_ + 255) / 256, 256, 0, roofbench::cuda::stream(ctx)>>>(x_, y_, n_);
    ROOFBENCH_CUDA_LAUNCH();
  }
  Work work() const override { return {.flops = double(n_), .bytes = 8.0 * n_, .items = double(n_), .item_name = "elements"}; }
  Check check(Context& ctx) override {
    std::vector<float> x(n_), y(n_);
    ctx.copy_to_host(x.data(), x_, n_ * sizeof(float));
    ctx.copy_to_host(y.data(), y_, n_ * sizeof(float));
    std::vector<double> reference(x.begin(), x.end());
    for (double& r : reference) r *= 2;
    return {.rel_l2_error = relative_l2_error(y.data(), reference.data(), n_)};
  }
 private:
  std::size_t n_;
  float *x_ = nullptr, *y_ = nullptr;
};
void describe(Plugin& p) {
  p.description = "y = 2x on a GPU";
  p.add({.name = "scale", .description = "y = 2x", .axes = {Axis::powers("n", 1 << 10, 1 << 20, 4)},
         .device = DeviceNeed::gpu(), .precision = Precision::fp32,
         .make = [](const Params& params) { return std::make_unique<Scale>(params); }});
}
}  // namespace
ROOFBENCH_PLUGIN("scale_cuda", describe)
