// The host's GPU path, end to end on a real device: its timer agrees with a plain CUDA-event timing of
// the same kernel, a wrong kernel fails its gate, and out-of-memory and sticky errors cost one case.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_devices_test.hpp"
#include "device.hpp"
#include "measure.hpp"
#include "roofbench/case_support/input_copies.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench {
namespace {

__global__ void scale_kernel(const float* x, float* y, std::size_t n, float factor, std::size_t skip_from) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    if (i < skip_from) y[i] = factor * x[i];
}

// Arithmetic only: its duration depends on the SM clock alone, not on DRAM, so two timings of it
// can be compared closely.
__global__ void fma_loop_kernel(float* out, int iterations) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f;
  for (int i = 0; i < iterations; ++i) a = fmaf(a, b, 1e-7f);
  if (a == 12345.f) out[threadIdx.x] = a;  // never true: keeps the loop alive
}

__global__ void illegal_address_kernel(float* p) { p[threadIdx.x] = *reinterpret_cast<float*>(0x10); }

void launch_scale(const float* x, float* y, std::size_t n, float factor, std::size_t skip_from, cudaStream_t s) {
  scale_kernel<<<264, 512, 0, s>>>(x, y, n, factor, skip_from);
  ROOFBENCH_CUDA_LAUNCH();
}

// y = factor * x; `broken` variants leave the tail unwritten, scale wrongly, or fault.
enum class Flaw { none, skips_tail, wrong_factor, illegal_address, huge_allocation };

// `rotates`: offers copies of x and y for cold runs (Case::rotation()).
class ScaleCase final : public Case {
 public:
  ScaleCase(std::size_t n, Flaw flaw, bool rotates = false) : n_(n), flaw_(flaw), rotates_(rotates) {}
  void setup(Context& ctx) override {
    const std::size_t bytes = flaw_ == Flaw::huge_allocation ? (std::size_t{1} << 50) : n_ * sizeof(float);
    x_ = static_cast<float*>(ctx.alloc(bytes, BufferRole::input));
    y_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::output));
    ctx.fill_random(x_, n_, ElementType::f32);
    copies_.add(x_, n_ * sizeof(float), BufferRole::input);
    copies_.add(y_, n_ * sizeof(float), BufferRole::output);
  }
  Rotation* rotation() override { return rotates_ ? &copies_ : nullptr; }
  void run(Context& ctx) override {
    auto stream = roofbench::cuda::stream(ctx);
    if (flaw_ == Flaw::illegal_address) {
      illegal_address_kernel<<<1, 32, 0, stream>>>(y_);
      ROOFBENCH_CUDA_LAUNCH();
      return;
    }
    launch_scale(x_, y_, n_, flaw_ == Flaw::wrong_factor ? 2.02f : 2.0f, flaw_ == Flaw::skips_tail ? n_ - 1 : n_, stream);
  }
  Work work() const override { return {.flops = double(n_), .bytes = 8.0 * n_}; }
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
  Flaw flaw_;
  bool rotates_;
  float *x_ = nullptr, *y_ = nullptr;
  case_support::InputCopies copies_;
};

class GpuHost : public CudaDevicesTest {
 protected:
  void SetUp() override {
    CudaDevicesTest::SetUp();
    if (IsSkipped()) return;
    ceilings_.bandwidth = 4e12;
    ceilings_.flops_of(Precision::fp32) = 60e12;
  }
  Measurement measure_case(Flaw flaw, std::size_t n = 1 << 24, double energy_seconds = 0) {
    spec_ = CaseSpec{.name = "scale", .device = DeviceNeed::gpu(), .precision = Precision::fp32,
                     .make = [n, flaw](const Params&) { return std::make_unique<ScaleCase>(n, flaw); }};
    BenchmarkSpec b{"test/scale", "test", &spec_, Params{}};
    MeasureOptions o;
    o.max_time = 0.3;
    o.energy_seconds = energy_seconds;
    return take_measurement(b, {devices_.front().get()}, ceilings_, o);
  }
  // The scale case over n elements, hot or cold, with or without copies to rotate over.
  Measurement measure_scale(std::size_t n, bool rotates, bool cold) {
    spec_ = CaseSpec{.name = "scale", .device = DeviceNeed::gpu(), .precision = Precision::fp32,
                     .make = [n, rotates](const Params&) { return std::make_unique<ScaleCase>(n, Flaw::none, rotates); }};
    BenchmarkSpec b{"test/scale", "test", &spec_, Params{}};
    MeasureOptions o;
    o.max_time = 0.5;
    o.cold = cold;
    return take_measurement(b, {devices_.front().get()}, ceilings_, o);
  }
  Ceilings ceilings_;
  CaseSpec spec_;
};

std::string fact_of(const Measurement& m, const std::string& name) {
  for (const Fact& f : m.case_facts)
    if (f.name == name) return f.value;
  return "";
}

// A bare CUDA graph of `untimed` launches, then `timed` launches between two of its own event nodes
// (external event records), so a replay's span leaves out the host's latency in submitting it. Freed
// however the test ends.
class EventFramedGraph {
 public:
  template <typename Launch>
  EventFramedGraph(cudaStream_t stream, Launch&& launch, int untimed, int timed) : stream_(stream) {
    ROOFBENCH_CUDA(cudaEventCreate(&start_));
    ROOFBENCH_CUDA(cudaEventCreate(&stop_));
    ROOFBENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < untimed; ++i) launch();
    ROOFBENCH_CUDA(cudaEventRecordWithFlags(start_, stream, cudaEventRecordExternal));
    for (int i = 0; i < timed; ++i) launch();
    ROOFBENCH_CUDA(cudaEventRecordWithFlags(stop_, stream, cudaEventRecordExternal));
    ROOFBENCH_CUDA(cudaStreamEndCapture(stream, &graph_));
    ROOFBENCH_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  EventFramedGraph(const EventFramedGraph&) = delete;
  EventFramedGraph& operator=(const EventFramedGraph&) = delete;
  ~EventFramedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // One replay, synchronised: the seconds between its two event nodes.
  double replay_seconds() {
    ROOFBENCH_CUDA(cudaGraphLaunch(exec_, stream_));
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
    float ms = 0;
    ROOFBENCH_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The same kernel timed by the host's timer (stream and graph modes) and by bare events.
TEST_F(GpuHost, TimerAgreesWithIndependentEventTiming) {
  Device& d = *devices_.front();
  auto* out = static_cast<float*>(d.allocate(1024 * sizeof(float)));
  auto stream = static_cast<cudaStream_t>(d.stream());
  auto launch = [&] {
    fma_loop_kernel<<<132 * 4, 256, 0, stream>>>(out, 20000);
    ROOFBENCH_CUDA_LAUNCH();
  };

  cudaEvent_t start, stop;
  ROOFBENCH_CUDA(cudaEventCreate(&start));
  ROOFBENCH_CUDA(cudaEventCreate(&stop));
  // The independent timings are do_bench's and do_bench_cudagraph's: events around a burst of
  // back-to-back launches, and around one replay of a bare graph of the burst; so the gap between an
  // event and a single kernel does not count as kernel time (about 4% at this size). Each host mode is
  // held to the bare timing of the same launch path (on an H200: 108.8 and 108.6 us per launch from the
  // host, 107.7 and 107.7 us replayed from a graph). The four timings take turns, so they see the same
  // clock: this kernel runs an H200 into its power limit, and timed one after the other, a short burst
  // after an idle gap ran 13-16% faster than a long one under the limit. The clocks are brought up first
  // (an idle H200 sits at 345 MHz).
  const int burst = 20;
  auto stream_timer = make_cuda_timer({&d}, launch, TimingOptions{.cold = false, .graph = false, .hold = true});
  auto graph_timer = make_cuda_timer({&d}, launch, TimingOptions{.cold = false, .graph = true, .hold = true});
  graph_timer->time(burst);  // instantiates the graph
  // The bare graph records its own events (external event nodes), so the host's latency in submitting
  // the replay stays out of it: from outside, one H200 machine showed 117.6 us per launch instead of 107.7.
  EventFramedGraph bare(stream, launch, 0, burst);
  const auto warm_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < warm_until) {
    for (int i = 0; i < burst; ++i) launch();
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream));
  }
  auto bare_timing = [&](auto enqueue) {
    ROOFBENCH_CUDA(cudaEventRecord(start, stream));
    enqueue();
    ROOFBENCH_CUDA(cudaEventRecord(stop, stream));
    ROOFBENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    ROOFBENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return ms * 1e-3 / burst;
  };
  std::vector<double> bare_stream, bare_replay, stream_host, graph_host;
  for (int i = 0; i < 30; ++i) {
    bare_stream.push_back(bare_timing([&] {
      for (int j = 0; j < burst; ++j) launch();
    }));
    bare_replay.push_back(bare.replay_seconds() / burst);
    stream_host.push_back(stream_timer->time(burst).seconds / burst);
    graph_host.push_back(graph_timer->time(burst).seconds / burst);
  }
  std::printf("per launch: bare stream %.2f us, host stream %.2f us, bare graph %.2f us, host graph %.2f us\n",
              1e6 * median(bare_stream), 1e6 * median(stream_host), 1e6 * median(bare_replay), 1e6 * median(graph_host));
  EXPECT_NEAR(median(stream_host), median(bare_stream), 0.03 * median(bare_stream)) << "stream timing";
  EXPECT_NEAR(median(graph_host), median(bare_replay), 0.03 * median(bare_replay)) << "graph timing";
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  d.release(out);
}

// A cold sample in graph mode times its run from inside the graph (the flush and the events are captured
// into it, launch_strategy.hpp), so the graph's own launch stays out: a compute-only kernel of a few
// microseconds, which a flushed L2 does not slow, takes what it takes between two event nodes after three
// neighbours in a bare graph (H200: 4.22 and 4.13 us). Both spans hold the kernel's launch inside the graph.
TEST_F(GpuHost, ColdGraphSamplesTimeTheRunFromInsideTheGraph) {
  Device& d = *devices_.front();
  auto* out = static_cast<float*>(d.allocate(1024 * sizeof(float)));
  auto stream = static_cast<cudaStream_t>(d.stream());
  auto launch = [&] {
    fma_loop_kernel<<<132, 256, 0, stream>>>(out, 400);  // about 4 us between events on an H200
    ROOFBENCH_CUDA_LAUNCH();
  };
  auto cold_graph = make_cuda_timer({&d}, launch, TimingOptions{.cold = true, .graph = true, .hold = true});
  EventFramedGraph bare(stream, launch, 3, 1);
  std::vector<double> cold, among_neighbours;
  for (int i = 0; i < 200; ++i) {
    cold.push_back(cold_graph->time(1).seconds);
    among_neighbours.push_back(bare.replay_seconds());
  }
  std::printf("cold graph sample %.2f us, the kernel among its neighbours in a graph %.2f us\n", 1e6 * median(cold),
              1e6 * median(among_neighbours));
  EXPECT_NEAR(median(cold), median(among_neighbours), 0.1 * median(among_neighbours) + 0.5e-6);
  d.release(out);
}

// Spins one warp for `ns` nanoseconds of the GPU's global timer: a kernel of known duration.
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

class SpinCase final : public Case {
 public:
  explicit SpinCase(unsigned long long ns) : ns_(ns) {}
  void setup(Context&) override {}
  void run(Context& ctx) override {
    spin_kernel<<<1, 32, 0, roofbench::cuda::stream(ctx)>>>(ns_);
    ROOFBENCH_CUDA_LAUNCH();
  }
  Work work() const override { return {.flops = 32, .bytes = 4}; }
  Check check(Context&) override { return {.rel_l2_error = 0}; }

 private:
  unsigned long long ns_;
};

// --kernel-time on a kernel of known duration (50 us by the global timer, whose steps are at most 1 us), on
// the stream and replayed from a graph: kernel_time is the spin, and the event time, with one launch gap in
// 50 us, is within 5% of it.
TEST_F(GpuHost, KernelTimeIsTheKernelsOwnDurationOnTheStreamAndInAGraph) {
  constexpr double spin = 50e-6;
  CaseSpec spec{.name = "spin", .device = DeviceNeed::gpu(), .precision = Precision::fp32,
                .make = [](const Params&) { return std::make_unique<SpinCase>(50'000); }};
  BenchmarkSpec b{"test/spin", "test", &spec, Params{}};
  for (GraphMode graph : {GraphMode::off, GraphMode::on}) {
    MeasureOptions o;
    o.max_time = 0.3;
    o.graph = graph;
    o.kernel_time_samples = 5;
    const Measurement r = take_measurement(b, {devices_.front().get()}, ceilings_, o);
    ASSERT_EQ(r.status, Status::ok) << r.message;
    ASSERT_TRUE(r.kernel_time.measured()) << r.kernel_time.error;
    std::printf("%s: kernel_time %.3f us, event time %.3f us, %d runs a sample\n", r.graph ? "graph" : "stream",
                1e6 * r.kernel_time.seconds, 1e6 * r.stats.median, r.runs_per_sample);
    EXPECT_EQ(r.graph, graph == GraphMode::on);
    EXPECT_EQ(r.kernel_time.samples, 5);
    EXPECT_NEAR(r.kernel_time.seconds, spin, 0.03 * spin + 1e-6);
    EXPECT_NEAR(r.stats.median, r.kernel_time.seconds, 0.05 * r.kernel_time.seconds);
  }
}

// Cold by rotation reads from DRAM: x and y of a quarter of the L2 together, timed hot, stay in the L2; rotated over
// copies that exceed twice the L2 each run reads them from DRAM, so its time is well above the hot one. It is
// below the flushed time by at most the launch a flushed sample holds between its events (2.59 us for an
// empty kernel on an H200, docs/method.md) and the noise.
TEST_F(GpuHost, ColdByRotationReadsFromMainMemory) {
  const std::size_t n = static_cast<std::size_t>(devices_.front()->cache_bytes() / 4 / (2 * sizeof(float)));
  const Measurement hot = measure_scale(n, true, false);
  const Measurement flushed = measure_scale(n, false, true);
  const Measurement rotated = measure_scale(n, true, true);
  for (const Measurement* m : {&hot, &flushed, &rotated}) ASSERT_EQ(m->status, Status::ok) << m->message;
  EXPECT_EQ(hot.cold_copies, 0);
  EXPECT_EQ(flushed.cold_copies, 0);
  EXPECT_EQ(fact_of(flushed, "cold_mode"), "flush: the case has no copies of its inputs to rotate");
  EXPECT_GE(rotated.cold_copies, 8);  // 8 x (a quarter of the L2) = twice the L2
  EXPECT_EQ(fact_of(rotated, "cold_mode").rfind("rotate: ", 0), 0u) << fact_of(rotated, "cold_mode");
  EXPECT_EQ(rotated.runs_per_sample % rotated.cold_copies, 0);
  const double t_hot = hot.stats.median, t_flushed = flushed.stats.median, t_rotated = rotated.stats.median;
  std::printf("scale over %.1f MB: hot %.2f us, cold by flush %.2f us, cold by rotation over %d copies %.2f us\n",
              8e-6 * double(n), 1e6 * t_hot, 1e6 * t_flushed, rotated.cold_copies, 1e6 * t_rotated);
  EXPECT_GT(t_rotated, 1.2 * t_hot);
  EXPECT_GE(t_rotated, t_flushed - 3e-6 - 0.1 * t_flushed);
}

TEST_F(GpuHost, ClockProbeReadsAPlausibleSmClock) {
  Device& d = *devices_.front();
  auto timer = make_cuda_timer({&d}, [] {}, TimingOptions{});
  const SampleTime s = timer->time(1);
  EXPECT_GT(s.clock_mhz, 100);
  EXPECT_LT(s.clock_mhz, 1.1 * timer->max_clock_mhz());
}

// A sample long enough to move the clock: its clock is the mean over the sample when the hold and the
// probe ran on one SM (said by clock_spans_sample), and plausible either way.
TEST_F(GpuHost, SampleClockIsPlausibleAndUsuallyTheMeanOverTheSample) {
  Device& d = *devices_.front();
  auto* out = static_cast<float*>(d.allocate(1024 * sizeof(float)));
  auto stream = static_cast<cudaStream_t>(d.stream());
  auto timer = make_cuda_timer({&d}, [&] {
    fma_loop_kernel<<<132 * 4, 256, 0, stream>>>(out, 20000);
    ROOFBENCH_CUDA_LAUNCH();
  }, TimingOptions{});
  int spanning = 0;
  for (int i = 0; i < 20; ++i) {
    const SampleTime s = timer->time(10);
    EXPECT_GT(s.clock_mhz, 100);
    EXPECT_LT(s.clock_mhz, 1.1 * timer->max_clock_mhz());
    spanning += s.clock_spans_sample;
  }
  std::printf("%d of 20 samples had the mean clock over the sample\n", spanning);
  d.release(out);
}

// --energy on a real GPU: NVML's counter is there (it comes with the driver), sampling lasts the energy
// seconds, and the figures agree with each other and with what a GPU can draw.
TEST_F(GpuHost, EnergyPerRunIsPlausibleAndAgreesWithPowerTimesTime) {
  std::string why;
  ASSERT_TRUE(devices_.front()->energy_counter(why)) << why;
  const Measurement r = measure_case(Flaw::none, std::size_t{1} << 26, 1.0);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  ASSERT_TRUE(std::isfinite(r.energy_per_run_j)) << r.energy_note;
  EXPECT_GE(r.phases.sampling, 1.0);
  EXPECT_GE(r.energy_window_s, 0.5);
  EXPECT_GT(r.mean_power_w, 50);
  EXPECT_LT(r.mean_power_w, 1500);
  // The window's runs kept the device at least 80% busy, so power x time per run comes within 25%.
  const double power_times_time = r.mean_power_w * r.stats.median;
  EXPECT_NEAR(r.energy_per_run_j, power_times_time, 0.25 * power_times_time);
  std::printf("energy per run %.4g J at %.0f W (window %.2f s, median %.4g s)\n", r.energy_per_run_j, r.mean_power_w,
              r.energy_window_s, r.stats.median);
}

TEST_F(GpuHost, CorrectKernelPassesItsGate) {
  const Measurement r = measure_case(Flaw::none);
  EXPECT_EQ(r.status, Status::ok) << r.message;
  EXPECT_EQ(r.gate_error, 0);
  EXPECT_GT(r.stats.count, 0u);
  EXPECT_GT(r.memory.peak, 2.0 * (1 << 24) * sizeof(float) - 1);
}

TEST_F(GpuHost, KernelThatSkipsTheTailFailsItsGate) {
  const Measurement r = measure_case(Flaw::skips_tail);
  EXPECT_EQ(r.status, Status::gate_failed);
  EXPECT_NE(r.message.find("tolerance"), std::string::npos) << r.message;
}

TEST_F(GpuHost, KernelOffByOnePercentFailsItsGate) {
  const Measurement r = measure_case(Flaw::wrong_factor);
  EXPECT_EQ(r.status, Status::gate_failed) << r.message;
  EXPECT_NEAR(r.gate_error, 0.01, 1e-4);
}

TEST_F(GpuHost, OutOfMemoryCostsOneCase) {
  EXPECT_EQ(measure_case(Flaw::huge_allocation).status, Status::out_of_memory);
  EXPECT_EQ(measure_case(Flaw::none).status, Status::ok);
}

// A kernel that faults leaves a sticky error: that case is reported, and the device is either reset or
// marked lost, so the next case either runs or fails at once saying why; nothing crashes.
TEST_F(GpuHost, StickyErrorCostsItsCaseAndLaterCasesSayWhy) {
  const Measurement broken = measure_case(Flaw::illegal_address);
  EXPECT_EQ(broken.status, Status::error);
  EXPECT_NE(broken.message.find("illegal memory access"), std::string::npos) << broken.message;
  const bool reset = broken.message.find("reset after") != std::string::npos;
  EXPECT_TRUE(reset || broken.message.find("was lost") != std::string::npos) << broken.message;
  // The next case either runs (the reset gave the device back) or fails at once saying why: the device
  // was marked lost, or (seen on an H200, driver 580: the reset succeeded, then cudaSetDevice answered
  // "busy or unavailable") it could not be used.
  const Measurement after = measure_case(Flaw::none);
  if (!reset) {  // marked lost: the next case is not even tried
    EXPECT_EQ(after.status, Status::error);
    EXPECT_NE(after.message.find("was lost"), std::string::npos) << after.message;
  } else if (after.status != Status::ok) {  // the reset's claim did not hold: the next case must say so
    EXPECT_EQ(after.status, Status::error);
    EXPECT_NE(after.message.find("the device could not be used"), std::string::npos) << after.message;
  }
  std::cout << "after the sticky error: " << broken.message << "\nnext case: " << to_string(after.status) << " "
            << after.message << "\n";
}

}  // namespace
}  // namespace roofbench
