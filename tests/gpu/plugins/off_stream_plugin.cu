// Test plugin `off_stream`: y = 2x on 16 Mi floats, once on the stream the host gives (ctx.stream()) and
// once on a stream of the case's own, which the host's timing never sees: timed at next to nothing, that
// one must fail as implausible, with graphs and without.
#include <cuda_runtime.h>
#include <roofbench/cuda.hpp>
#include <roofbench/plugin.hpp>

#include <memory>
#include <string>
#include <vector>

namespace {
using namespace roofbench;

__global__ void scale_kernel(const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    y[i] = 2.0f * x[i];
}

class ScaleCase final : public Case {
 public:
  explicit ScaleCase(bool own_stream) : own_stream_(own_stream) {}
  void setup(Context& ctx) override {
    x_ = static_cast<float*>(ctx.alloc(kN * sizeof(float), BufferRole::input));
    y_ = static_cast<float*>(ctx.alloc(kN * sizeof(float), BufferRole::output));
    ctx.fill_random(x_, kN, ElementType::f32);
    if (own_stream_) ROOFBENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void run(Context& ctx) override {
    scale_kernel<<<264, 512, 0, own_stream_ ? stream_ : roofbench::cuda::stream(ctx)>>>(x_, y_, kN);
    ROOFBENCH_CUDA_LAUNCH();
  }
  Work work() const override { return {.flops = double(kN), .bytes = 8.0 * kN}; }
  Check check(Context& ctx) override {
    if (stream_) ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
    std::vector<float> x(kN), y(kN);
    ctx.copy_to_host(x.data(), x_, kN * sizeof(float));
    ctx.copy_to_host(y.data(), y_, kN * sizeof(float));
    std::vector<double> reference(x.begin(), x.end());
    for (double& r : reference) r *= 2;
    return {.rel_l2_error = relative_l2_error(y.data(), reference.data(), kN)};
  }
  void teardown(Context&) override {
    if (!stream_) return;
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
    ROOFBENCH_CUDA(cudaStreamDestroy(stream_));
    stream_ = nullptr;
  }

 private:
  static constexpr std::size_t kN = std::size_t{1} << 24;
  bool own_stream_;
  cudaStream_t stream_ = nullptr;
  float *x_ = nullptr, *y_ = nullptr;
};

CaseSpec gpu_spec(std::string name, bool own_stream) {
  CaseSpec s;
  s.name = std::move(name);
  s.device = DeviceNeed::gpu();
  s.precision = Precision::fp32;
  s.make = [own_stream](const Params&) { return std::make_unique<ScaleCase>(own_stream); };
  return s;
}

void describe(Plugin& plugin) {
  plugin.description = "y = 2x on the host's stream, and on a stream the host does not time";
  plugin.add(gpu_spec("on_given_stream", false));
  plugin.add(gpu_spec("on_own_stream", true));
}
}  // namespace

ROOFBENCH_PLUGIN("off_stream", describe)
