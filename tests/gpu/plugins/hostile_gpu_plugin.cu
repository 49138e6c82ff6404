// Test plugin `hostile_gpu`: GPU cases that wreck their process or device, each followed by a case that
// must still pass its gate (with process isolation, in a fresh worker and CUDA context).
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
__global__ void illegal_address_kernel(float* p) { p[threadIdx.x] = *reinterpret_cast<volatile float*>(0x10); }
__global__ void endless_kernel(volatile int* never_set) {
  while (*never_set == 0) {
  }
}

enum class Flaw { none, illegal_access, device_reset, synchronize_in_run, endless_kernel, leaks_10_gib };

class GpuCase final : public Case {
 public:
  explicit GpuCase(Flaw flaw) : flaw_(flaw) {}
  void setup(Context& ctx) override {
    x_ = static_cast<float*>(ctx.alloc(kN * sizeof(float), BufferRole::input));
    y_ = static_cast<float*>(ctx.alloc(kN * sizeof(float), BufferRole::output));
    flag_ = static_cast<int*>(ctx.alloc(sizeof(int), BufferRole::scratch));
    ROOFBENCH_CUDA(cudaMemset(flag_, 0, sizeof(int)));
    ctx.fill_random(x_, kN, ElementType::f32);
    if (flaw_ == Flaw::leaks_10_gib) {
      void* leaked = nullptr;
      ROOFBENCH_CUDA(cudaMalloc(&leaked, std::size_t{10} << 30));  // never freed
    }
  }
  void run(Context& ctx) override {
    auto stream = roofbench::cuda::stream(ctx);
    switch (flaw_) {
      case Flaw::illegal_access: illegal_address_kernel<<<1, 32, 0, stream>>>(y_); break;
      case Flaw::device_reset: ROOFBENCH_CUDA(cudaDeviceReset()); break;
      case Flaw::endless_kernel: endless_kernel<<<1, 1, 0, stream>>>(flag_); break;
      case Flaw::synchronize_in_run:
        // Fine on a stream; inside a CUDA-graph capture (--graph, or auto for short runs) it is illegal.
        scale_kernel<<<8, 128, 0, stream>>>(x_, y_, kN);
        ROOFBENCH_CUDA(cudaDeviceSynchronize());
        return;
      default: break;
    }
    scale_kernel<<<8, 128, 0, stream>>>(x_, y_, kN);
    ROOFBENCH_CUDA_LAUNCH();
  }
  Work work() const override { return {.flops = double(kN), .bytes = 8.0 * kN}; }
  Check check(Context& ctx) override {
    std::vector<float> x(kN), y(kN);
    ctx.copy_to_host(x.data(), x_, kN * sizeof(float));
    ctx.copy_to_host(y.data(), y_, kN * sizeof(float));
    std::vector<double> reference(x.begin(), x.end());
    for (double& r : reference) r *= 2;
    return {.rel_l2_error = relative_l2_error(y.data(), reference.data(), kN)};
  }

 private:
  static constexpr std::size_t kN = 4096;
  Flaw flaw_;
  float *x_ = nullptr, *y_ = nullptr;
  int* flag_ = nullptr;
};

CaseSpec gpu_spec(std::string name, Flaw flaw, std::vector<Axis> axes = {}) {
  CaseSpec s;
  s.name = std::move(name);
  s.axes = std::move(axes);
  s.device = DeviceNeed::gpu();
  s.precision = Precision::fp32;
  s.make = [flaw](const Params&) { return std::make_unique<GpuCase>(flaw); };
  if (flaw == Flaw::endless_kernel) s.timeout_s = 10;
  return s;
}

void describe(Plugin& plugin) {
  plugin.description = "GPU cases that wreck their process or device, each followed by one that passes";
  plugin.add(gpu_spec("a_passes", Flaw::none));
  plugin.add(gpu_spec("b_illegal_access", Flaw::illegal_access));
  plugin.add(gpu_spec("c_passes", Flaw::none));
  plugin.add(gpu_spec("d_device_reset", Flaw::device_reset));
  plugin.add(gpu_spec("e_passes", Flaw::none));
  plugin.add(gpu_spec("f_synchronize_in_run", Flaw::synchronize_in_run));
  plugin.add(gpu_spec("g_passes", Flaw::none));
  plugin.add(gpu_spec("h_endless_kernel", Flaw::endless_kernel));
  plugin.add(gpu_spec("i_passes", Flaw::none));
  // 16 x 10 GiB: more than an H200 has, so without a fresh worker after each the last ones would fail.
  plugin.add(gpu_spec("j_leaks_10_gib", Flaw::leaks_10_gib, {Axis::powers("k", 1, 1 << 15)}));
  plugin.add(gpu_spec("k_passes", Flaw::none));
}
}  // namespace

ROOFBENCH_PLUGIN("hostile_gpu", describe)
