// A minimal roofbench::Context over one CUDA device, for driving CUDA cases end to end in tests:
// cudaMalloc'd buffers, host-generated random inputs, synchronous copies, and hooks to poison or
// overwrite outputs the way the host does before a gate run; and that gate run itself.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::case_support::testing {

inline bool gpu_present() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

class CudaTestContext final : public Context {
 public:
  struct Allocation {
    void* data;
    std::size_t bytes;
    BufferRole role;
  };

  explicit CudaTestContext(Params params) : params_(std::move(params)) {
    device_.kind = DeviceKind::cuda;
    ROOFBENCH_CUDA(cudaGetDevice(&device_.index));
    cudaDeviceProp properties{};
    ROOFBENCH_CUDA(cudaGetDeviceProperties(&properties, device_.index));
    device_.name = properties.name;
    // Non-blocking, like a host that keeps the legacy default stream out of its timings: a case that
    // forgets to order its work on ctx.stream() shows up here.
    ROOFBENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  CudaTestContext(const CudaTestContext&) = delete;
  CudaTestContext& operator=(const CudaTestContext&) = delete;
  ~CudaTestContext() override {
    // Destructor: nothing can be reported, so statuses are dropped.
    (void)cudaStreamSynchronize(stream_);
    for (const Allocation& allocation : allocations_) (void)cudaFree(allocation.data);
    (void)cudaStreamDestroy(stream_);
  }

  const Params& params() const override { return params_; }
  int ranks() const override { return 1; }
  const DeviceInfo& device(int) const override { return device_; }
  void* stream(int) const override { return stream_; }

  void* alloc(std::size_t bytes, BufferRole role, int) override {
    void* data = nullptr;
    ROOFBENCH_CUDA(cudaMalloc(&data, bytes));
    allocations_.push_back({data, bytes, role});
    return data;
  }

  void fill_random(void* data, std::size_t count, ElementType type, double lo, double hi, int) override {
    std::mt19937_64 rng(seed() + fills_++);
    std::uniform_real_distribution<double> uniform(lo, hi);
    std::vector<unsigned char> bytes;
    auto encode_all = [&]<typename Stored>(auto encode) {
      bytes.resize(count * sizeof(Stored));
      for (std::size_t i = 0; i < count; ++i) {
        const Stored value = encode(uniform(rng));
        std::memcpy(bytes.data() + i * sizeof(Stored), &value, sizeof(Stored));
      }
    };
    switch (type) {
      case ElementType::f64:
        encode_all.template operator()<double>([](double x) { return x; });
        break;
      case ElementType::f32:
        encode_all.template operator()<float>([](double x) { return float(x); });
        break;
      case ElementType::bf16:
        encode_all.template operator()<__nv_bfloat16>([](double x) { return __float2bfloat16_rn(float(x)); });
        break;
      case ElementType::f16:
        encode_all.template operator()<__half>([](double x) { return __float2half_rn(float(x)); });
        break;
      case ElementType::fp8_e4m3:
        encode_all.template operator()<__nv_fp8_e4m3>([](double x) { return __nv_fp8_e4m3(float(x)); });
        break;
      case ElementType::i32:
        encode_all.template operator()<std::int32_t>([](double x) { return std::int32_t(x); });
        break;
    }
    copy_to_device(data, bytes.data(), bytes.size(), 0);
  }

  // Copies on the case's stream, waited for, as the host's (cuda_device.cu): a plain cudaMemcpy from pageable
  // memory runs on the legacy stream, which this non-blocking stream does not wait for, and may return before
  // its last bytes have landed, so a kernel launched next on the stream could read the buffer unwritten.
  void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, int) override {
    ROOFBENCH_CUDA(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
    synchronize(0);
  }
  void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, int) override {
    ROOFBENCH_CUDA(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    synchronize(0);
  }
  void synchronize(int) override { ROOFBENCH_CUDA(cudaStreamSynchronize(stream_)); }
  std::uint64_t seed() const override { return 20261129; }

  // Sets every byte of every output buffer: 0xFF is the host's NaN poison.
  void fill_outputs(unsigned char byte) {
    for (const Allocation& allocation : allocations_)
      if (allocation.role == BufferRole::output)
        ROOFBENCH_CUDA(cudaMemsetAsync(allocation.data, byte, allocation.bytes, stream_));
    synchronize(0);
  }
  const std::vector<Allocation>& allocations() const { return allocations_; }
  cudaStream_t cuda_stream() const { return stream_; }

 private:
  Params params_;
  DeviceInfo device_;
  cudaStream_t stream_ = nullptr;
  std::vector<Allocation> allocations_;
  std::uint64_t fills_ = 0;
};

// How a test takes a case through the host's gate sequence, and where it may step in.
struct GateSteps {
  unsigned char output_fill = 0xFF;  // every output's bytes before the runs: 0xFF is the host's NaN poison
  int runs = 1;                      // the host runs a case once before its check
  std::function<void(Case&, CudaTestContext&)> run_instead;   // replaces the runs (a kernel that is wrong)
  std::function<void(Case&, CudaTestContext&)> before_check;  // after the runs (spoil an input or an output)
};

struct GateOutcome {
  Check check;
  std::vector<Figure> figures;  // read after the check, before teardown, as the host does
};

// The host's gate sequence after a successful setup: outputs poisoned, the runs, synchronise, check,
// teardown.
inline GateOutcome gate_after_setup(Case& c, CudaTestContext& ctx, const GateSteps& steps = {}) {
  ctx.fill_outputs(steps.output_fill);
  if (steps.run_instead)
    steps.run_instead(c, ctx);
  else
    for (int r = 0; r < steps.runs; ++r) c.run(ctx);
  ctx.synchronize(0);
  if (steps.before_check) steps.before_check(c, ctx);
  GateOutcome outcome{c.check(ctx), c.figures()};  // a braced list runs them in order
  c.teardown(ctx);
  return outcome;
}

// What the host does to a case before it times it: setup (whose NotApplicable or Error propagates),
// then gate_after_setup.
inline GateOutcome run_gate_sequence(Case& c, CudaTestContext& ctx, const GateSteps& steps = {}) {
  c.setup(ctx);
  return gate_after_setup(c, ctx, steps);
}

// A rotating case (Case::rotation()) after setup, given `copies` sets as the host makes them under --cold:
// the gate on each set in turn (its outputs poisoned, one run reading it, the check), then teardown. One
// Check per set, in order; a case without copies fails the test's expectation of `copies` of them.
inline std::vector<Check> gate_on_every_copy(Case& c, CudaTestContext& ctx, int copies) {
  c.setup(ctx);
  std::vector<Check> checks;
  if (Rotation* rotation = c.rotation()) {
    rotation->make_copies(ctx, copies);
    for (int copy = 0; copy < copies; ++copy) {
      rotation->use(copy);
      ctx.fill_outputs(0xFF);
      c.run(ctx);
      ctx.synchronize(0);
      checks.push_back(c.check(ctx));
    }
  }
  c.teardown(ctx);
  return checks;
}

}  // namespace roofbench::case_support::testing
