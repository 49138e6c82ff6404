// --counters on a real GPU, under kernel replay and under run replay each: a copy's DRAM bytes against its
// exact traffic, passes in a row each naming its kernel, the kernels of a CUDA graph, a cuBLAS GEMM's FLOPs
// against 2MNK (on the FP32 pipe and on the tensor cores); the pass inside a measurement; CUPTI's traced
// passes (--profile, --kernel-time) where ranks in other processes agree on them; every pass after every
// other in one process, and all three in the measurements of two cases in a row. Skips without a GPU.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "device.hpp"
#include "kernel_counters.hpp"
#include "kernel_profile.hpp"
#include "kernel_time.hpp"
#include "measure.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench {

// A replay mode in a test's name, as its word.
void PrintTo(CounterReplay replay, std::ostream* out) { *out << to_string(replay); }

namespace {

__global__ void copy_kernel(const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) y[i] = x[i];
}

__global__ void sum_kernel(const float* x, std::size_t n, float* sum) {
  float s = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) s += x[i];
  if (s == -1.0f) *sum = s;
}

#define EXPECT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call
#define EXPECT_CUBLAS(call) ASSERT_EQ((call), CUBLAS_STATUS_SUCCESS) << #call

// A test's device buffers given back, each free checked (a failure here is a sticky error the test left).
void free_all(std::initializer_list<void*> buffers) {
  for (void* buffer : buffers) EXPECT_EQ(cudaFree(buffer), cudaSuccess);
}

bool have_gpu(std::string& why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  why = status != cudaSuccess ? cudaGetErrorString(status) : "no device";
  return status == cudaSuccess && count > 0;
}

class GpuCounters : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!have_gpu(why)) GTEST_SKIP() << "no CUDA GPU: " << why;
  }
};

// The same checks under each replay mode on its own (no fallback from one to the other).
class GpuCountersReplay : public GpuCounters, public ::testing::WithParamInterface<CounterReplay> {};
INSTANTIATE_TEST_SUITE_P(Replay, GpuCountersReplay, ::testing::Values(CounterReplay::kernel, CounterReplay::run),
                         [](const ::testing::TestParamInfo<CounterReplay>& p) { return std::string(to_string(p.param)); });

// Whether a pass's error is the machine's (counters restricted to administrators, MIG, a virtualised or
// CMP device, another tool holding CUPTI, a build without CUPTI): the test then skips. Any other error is
// the pass's own failure and fails the test.
bool machine_refuses(const std::string& error) {
  for (const char* reason : {"INSUFFICIENT_PRIVILEGES", "NOT_SUPPORTED", "without CUPTI"})
    if (error.find(reason) != std::string::npos) return true;
  return false;
}

// `passes` counter passes, one after another, each over one copy of `n` floats; none where the memory
// could not be had (a failure said).
std::vector<CounterProfile> count_copies(std::size_t n, int passes, CounterReplay replay) {
  const std::size_t bytes = n * sizeof(float);
  float *x = nullptr, *y = nullptr;
  std::vector<CounterProfile> profiles;
  // One launch first loads the kernel (lazily, at its first launch) outside the passes, as the timing that
  // precedes a benchmark's pass does.
  if (cudaMalloc(&x, bytes) == cudaSuccess && cudaMalloc(&y, bytes) == cudaSuccess && cudaMemset(x, 1, bytes) == cudaSuccess &&
      (copy_kernel<<<1056, 512>>>(x, y, n), cudaDeviceSynchronize()) == cudaSuccess)
    for (int pass = 0; pass < passes; ++pass)
      profiles.push_back(collect_counters([&] {
        copy_kernel<<<1056, 512>>>(x, y, n);
        if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("copy failed");
      }, -1, replay));
  else
    ADD_FAILURE() << "no memory for a copy of " << bytes << " B: " << cudaGetErrorString(cudaGetLastError());
  free_all({x, y});
  return profiles;
}

// 1 GiB each way, many times the L2 (50-60 MB on H100/H200): the reads are all DRAM's, exactly; the writes
// reach DRAM as lines leave L2, so the ones still in L2 when the kernel ends are not counted, and dirty
// lines left by what ran before (the memset, a replay's restore) are: off by at most the L2's size.
TEST_P(GpuCountersReplay, CopyMovesItsExactBytes) {
  const std::size_t n = std::size_t{1} << 28, bytes = n * sizeof(float);
  const std::vector<CounterProfile> profiles = count_copies(n, 1, GetParam());
  ASSERT_EQ(profiles.size(), 1u);
  const CounterProfile& p = profiles.front();
  if (machine_refuses(p.error)) GTEST_SKIP() << "no counters on this machine: " << p.error;
  ASSERT_EQ(p.error, "");
  int l2 = 0;
  EXPECT_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  std::printf("copy of %zu B (%s replay): DRAM read %.0f, written %.0f, L2 %.0f (L2 size %d)\n", bytes, p.replay.c_str(),
              p.total.dram_read, p.total.dram_write, p.total.l2_bytes, l2);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.total.launches_per_run, 1);
  EXPECT_NEAR(p.total.dram_read, bytes, 0.01 * bytes);
  EXPECT_NEAR(p.total.dram_write, bytes, 1.05 * l2);
  EXPECT_GE(p.total.l2_bytes, 1.9 * bytes);  // every byte read and written passes the L2
}

// A clean given to the pass runs at its start, and its range is not counted: only the copy is, by name,
// with its reads from DRAM (the clean, a sum over 4x the L2, left none of x in the L2).
TEST_P(GpuCountersReplay, TheCleansRangeIsDroppedAndTheRunCounted) {
  int l2 = 0;
  EXPECT_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const std::size_t n = std::size_t{1} << 22, bytes = n * sizeof(float), clean_n = std::size_t(l2);  // 4x the L2 in floats
  float *x = nullptr, *y = nullptr, *clean = nullptr;
  EXPECT_CUDA(cudaMalloc(&x, bytes));
  EXPECT_CUDA(cudaMalloc(&y, bytes));
  EXPECT_CUDA(cudaMalloc(&clean, clean_n * sizeof(float) + sizeof(float)));
  EXPECT_CUDA(cudaMemset(x, 1, bytes));
  EXPECT_CUDA(cudaMemset(clean, 0, clean_n * sizeof(float)));
  copy_kernel<<<1056, 512>>>(x, y, n);  // x and y in the L2, as after a hot timing
  EXPECT_CUDA(cudaDeviceSynchronize());
  const CounterProfile p = collect_counters([&] {
    copy_kernel<<<1056, 512>>>(x, y, n);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("copy failed");
  }, -1, GetParam(), [&] {
    sum_kernel<<<1056, 512>>>(clean, clean_n, clean + clean_n);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("clean failed");
  });
  free_all({x, y, clean});
  if (machine_refuses(p.error)) GTEST_SKIP() << "no counters on this machine: " << p.error;
  ASSERT_EQ(p.error, "");
  std::printf("copy of %zu B after a clean (%s replay): DRAM read %.0f, written %.0f\n", bytes, p.replay.c_str(),
              p.total.dram_read, p.total.dram_write);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_NE(p.kernels.front().name.find("copy_kernel"), std::string::npos) << p.kernels.front().name;
  EXPECT_EQ(p.total.launches_per_run, 1);
  if (GetParam() == CounterReplay::run) EXPECT_NEAR(p.total.dram_read, bytes, 0.02 * bytes);
}

// Passes one after another in one process, each with its own configuration and counter data images and its
// launch callbacks: each counts its one launch, named after its kernel, and every byte through the L2.
TEST_P(GpuCountersReplay, PassesInARowEachCountTheirLaunchByName) {
  const std::size_t n = std::size_t{1} << 24, bytes = n * sizeof(float);
  const std::vector<CounterProfile> passes = count_copies(n, 3, GetParam());
  ASSERT_EQ(passes.size(), 3u);
  if (machine_refuses(passes.front().error)) GTEST_SKIP() << "no counters on this machine: " << passes.front().error;
  for (std::size_t pass = 0; pass < passes.size(); ++pass) {
    const CounterProfile& p = passes[pass];
    ASSERT_EQ(p.error, "") << "pass " << pass;
    ASSERT_EQ(p.kernels.size(), 1u) << "pass " << pass;
    EXPECT_NE(p.kernels.front().name.find("copy_kernel"), std::string::npos) << "pass " << pass << ": " << p.kernels.front().name;
    EXPECT_EQ(p.total.launches_per_run, 1) << "pass " << pass;
    EXPECT_GE(p.total.l2_bytes, 1.9 * bytes) << "pass " << pass;
  }
}

// A run that launches a CUDA graph (two copies, there and back) is refused under either replay, and says
// why: the range profiler does not count a graph's kernels (kernel replay counted one of these two).
TEST_P(GpuCountersReplay, RefusesARunThatLaunchesAGraph) {
  const std::size_t n = std::size_t{1} << 26, bytes = n * sizeof(float);
  float *x = nullptr, *y = nullptr;
  EXPECT_CUDA(cudaMalloc(&x, bytes));
  EXPECT_CUDA(cudaMalloc(&y, bytes));
  EXPECT_CUDA(cudaMemset(x, 1, bytes));
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  EXPECT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  copy_kernel<<<1056, 512, 0, stream>>>(x, y, n);
  copy_kernel<<<1056, 512, 0, stream>>>(y, x, n);
  EXPECT_CUDA(cudaStreamEndCapture(stream, &graph));
  EXPECT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  EXPECT_CUDA(cudaGraphLaunch(exec, stream));  // loads the kernel before the pass
  EXPECT_CUDA(cudaStreamSynchronize(stream));
  const CounterProfile p = collect_counters([&] {
    if (cudaGraphLaunch(exec, stream) != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess)
      throw std::runtime_error("the graph failed");
  }, -1, GetParam());
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  free_all({x, y});
  if (machine_refuses(p.error)) GTEST_SKIP() << "no counters on this machine: " << p.error;
  EXPECT_NE(p.error.find("launched CUDA graphs"), std::string::npos) << p.error;
  EXPECT_TRUE(p.kernels.empty());
}

void expect_gemm_flops(cublasComputeType_t compute, cudaDataType_t type, std::size_t element, bool tensor, CounterReplay replay) {
  const int n = 4096;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  EXPECT_CUDA(cudaMalloc(&a, element * n * n));
  EXPECT_CUDA(cudaMalloc(&b, element * n * n));
  EXPECT_CUDA(cudaMalloc(&c, sizeof(float) * n * n));
  EXPECT_CUDA(cudaMemset(a, 0, element * n * n));
  EXPECT_CUDA(cudaMemset(b, 0, element * n * n));
  cublasHandle_t handle = nullptr;
  EXPECT_CUBLAS(cublasCreate(&handle));
  const float one = 1, zero = 0;
  auto gemm = [&] {
    return cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, type, n, b, type, n, &zero, c, CUDA_R_32F, n,
                        compute, CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_CUBLAS(gemm());  // loads the kernel before the pass
  EXPECT_CUDA(cudaDeviceSynchronize());
  const CounterProfile p = collect_counters([&] {
    if (gemm() != CUBLAS_STATUS_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("GEMM failed");
  }, -1, replay);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  free_all({a, b, c});
  if (machine_refuses(p.error)) GTEST_SKIP() << "no counters on this machine: " << p.error;
  ASSERT_EQ(p.error, "");
  const double model = 2.0 * n * n * n;
  std::printf("GEMM %d^3 (%s replay): %.4g FLOPs counted (%.4f x 2MNK), tensor %.4g, fp32 pipe %.4g, in %zu kernels\n", n,
              p.replay.c_str(), p.total.flops(), p.total.flops() / model, p.total.flops_tensor, p.total.flops_fp32, p.kernels.size());
  EXPECT_NEAR(p.total.flops(), model, 0.01 * model);
  EXPECT_NEAR(tensor ? p.total.flops_tensor : p.total.flops_fp32, model, 0.01 * model);
}

TEST_P(GpuCountersReplay, Fp32GemmExecutes2MNK) {
  expect_gemm_flops(CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, sizeof(float), false, GetParam());
}

TEST_P(GpuCountersReplay, Bf16TensorGemmExecutes2MNK) { expect_gemm_flops(CUBLAS_COMPUTE_32F, CUDA_R_16BF, 2, true, GetParam()); }

class CopyCase final : public Case {
 public:
  explicit CopyCase(std::size_t n) : n_(n) {}
  void setup(Context& ctx) override {
    x_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::input));
    y_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::output));
    ctx.fill_random(x_, n_, ElementType::f32);
  }
  void run(Context& ctx) override {
    copy_kernel<<<1056, 512, 0, roofbench::cuda::stream(ctx)>>>(x_, y_, n_);
    ROOFBENCH_CUDA_LAUNCH();
  }
  Work work() const override { return {.bytes = 8.0 * n_}; }
  Check check(Context&) override { return {.rel_l2_error = 0}; }

 private:
  std::size_t n_;
  float *x_ = nullptr, *y_ = nullptr;
};

// The pass in a measurement: after the samples, through the same timer, per run; the timing is kept. Timed
// as a graph or on the stream, the pass enqueues the runs, so the kernel is counted by its name either way.
class GpuCountersInAMeasurement : public GpuCounters, public ::testing::WithParamInterface<GraphMode> {};
INSTANTIATE_TEST_SUITE_P(Timing, GpuCountersInAMeasurement, ::testing::Values(GraphMode::on, GraphMode::off),
                         [](const ::testing::TestParamInfo<GraphMode>& p) { return p.param == GraphMode::on ? "graph" : "stream"; });

// A copy of n floats each way, timed in `graph` mode, with the passes `passes` asks for after its samples.
Measurement measured_copy(std::size_t n, GraphMode graph, const std::function<void(MeasureOptions&)>& passes) {
  std::string why;
  auto devices = make_cuda_devices(why);
  if (devices.empty()) {
    ADD_FAILURE() << why;
    return {};
  }
  CaseSpec spec{.name = "copy", .device = DeviceNeed::gpu(), .precision = Precision::fp32,
                .make = [n](const Params&) { return std::make_unique<CopyCase>(n); }};
  BenchmarkSpec b{"test/copy", "test", &spec, Params{}};
  Ceilings ceilings;
  ceilings.bandwidth = 4e12;
  MeasureOptions o;
  o.max_time = 0.3;
  o.gate = false;
  o.graph = graph;
  passes(o);
  return take_measurement(b, {devices.front().get()}, ceilings, o);
}

// A copy of n floats each way, timed in `graph` mode and counted under --counters=auto.
Measurement counted_copy(std::size_t n, GraphMode graph) {
  return measured_copy(n, graph, [](MeasureOptions& o) { o.counters = true; });
}

TEST_P(GpuCountersInAMeasurement, ReportsMeasuredBytesBesideTheModel) {
  const std::size_t n = std::size_t{1} << 27;  // 512 MiB each way
  const Measurement r = counted_copy(n, GetParam());
  ASSERT_TRUE(r.passed()) << r.message;
  if (machine_refuses(r.counters.error)) GTEST_SKIP() << "no counters on this machine: " << r.counters.error;
  ASSERT_EQ(r.counters.error, "");
  std::printf("copy of 2 x %zu B: %.0f B per run counted in %.2f s (%g runs a sample, %s replay%s%s)\n", n * 4,
              r.counters.total.dram_bytes(), r.counters.seconds, double(r.runs_per_sample), r.counters.replay.c_str(),
              r.counters.run_replay_failure.empty() ? "" : ": run replay failed: ", r.counters.run_replay_failure.c_str());
  EXPECT_NEAR(r.counters.total.dram_read, 4.0 * n, 0.02 * 4 * n);
  EXPECT_NEAR(r.counters.total.dram_bytes(), 8.0 * n, 0.1 * 8 * n);
  EXPECT_NEAR(r.counters.total.launches_per_run, 1, 1e-9);
  ASSERT_EQ(r.counters.kernels.size(), 1u);
  EXPECT_NE(r.counters.kernels.front().name.find("copy_kernel"), std::string::npos) << r.counters.kernels.front().name;
  EXPECT_GT(r.counters.seconds, 0);
  EXPECT_FALSE(r.samples.empty());
}

// Timed hot, an 8 MiB copy runs from the L2; its counted run starts from clean caches all the same, so its
// reads are all DRAM's. Kernel replay's memory restores left an H100's L2 holding a GEMV's weights: it
// counted 6 kB of DRAM reads for a 4.7 MB matrix.
TEST_P(GpuCountersInAMeasurement, ACopyThatFitsTheL2IsCountedFromCleanCaches) {
  const std::size_t n = std::size_t{1} << 21;
  const Measurement r = counted_copy(n, GetParam());
  ASSERT_TRUE(r.passed()) << r.message;
  if (machine_refuses(r.counters.error)) GTEST_SKIP() << "no counters on this machine: " << r.counters.error;
  ASSERT_EQ(r.counters.error, "");
  std::printf("copy of 2 x %zu B timed hot: DRAM read %.0f B in the counted run (%s replay)\n", n * 4,
              r.counters.total.dram_read, r.counters.replay.c_str());
  EXPECT_EQ(r.counters.replay, "run");
  EXPECT_NEAR(r.counters.total.dram_read, 4.0 * n, 0.02 * 4 * n);
}

// --profile, --kernel-time and --counters together, as one roofbench run measures two cases: every pass of
// each measurement has its figures, though the first case's traces precede its counters pass and the
// second case's traces follow it.
TEST_P(GpuCountersInAMeasurement, ProfileKernelTimeAndCountersTogetherInTwoCasesInARow) {
  const std::size_t n = std::size_t{1} << 24;  // 64 MiB each way
  for (int which = 1; which <= 2; ++which) {
    const Measurement r = measured_copy(n, GetParam(), [](MeasureOptions& o) {
      o.profile_runs = 2;
      o.kernel_time_samples = 3;
      o.counters = true;
    });
    ASSERT_TRUE(r.passed()) << "case " << which << ": " << r.message;
    if (machine_refuses(r.kernel_time.error)) GTEST_SKIP() << "no CUPTI trace on this machine: " << r.kernel_time.error;
    EXPECT_TRUE(r.kernel_time.measured()) << "case " << which << ": " << r.kernel_time.error;
    EXPECT_EQ(r.profile.error, "") << "case " << which;
    ASSERT_EQ(r.profile.kernels.size(), 1u) << "case " << which;
    EXPECT_NE(r.profile.kernels.front().name.find("copy_kernel"), std::string::npos) << r.profile.kernels.front().name;
    if (machine_refuses(r.counters.error)) GTEST_SKIP() << "no counters on this machine: " << r.counters.error;
    ASSERT_EQ(r.counters.error, "") << "case " << which;
    ASSERT_EQ(r.counters.kernels.size(), 1u) << "case " << which;
    EXPECT_NE(r.counters.kernels.front().name.find("copy_kernel"), std::string::npos) << r.counters.kernels.front().name;
    EXPECT_NEAR(r.counters.total.dram_read, 4.0 * n, 0.02 * 4 * n) << "case " << which;
  }
}

// One copy of n floats, launched and waited for: the work of the passes below.
std::function<void()> one_copy(const float* x, float* y, std::size_t n) {
  return [=] {
    copy_kernel<<<1056, 512>>>(x, y, n);
    if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("copy failed");
  };
}

// What one traced pass found in a copy's trace: "" where it recorded the copy once per call, else why not.
std::string traced_copy_trouble(const KernelTrace& t, int calls) {
  if (!t.error.empty()) return t.error;
  const KernelProfile p = profile_of(t);
  if (p.kernels.size() != 1 || p.kernels.front().name.find("copy_kernel") == std::string::npos)
    return "the trace holds " + std::to_string(p.kernels.size()) + " kernel names, not the copy's alone";
  if (p.kernels.front().launches_per_run != 1) return "launches per call: " + std::to_string(p.kernels.front().launches_per_run);
  if (t.passes != calls || !kernel_time_of(t, 1).measured()) return "no kernel time over " + std::to_string(calls) + " calls";
  return "";
}

// Each CUPTI pass after each other one in one process, as cases in a row make them: a counters pass after
// a trace (--profile, then --counters), a trace after a counters pass (the next case's --kernel-time),
// traces in a row and counters passes in a row. Each tears down what it set up and leaves CUPTI detached,
// so each starts as the first would have.
TEST_F(GpuCounters, EveryCuptiPassWorksAfterEveryOtherInOneProcess) {
  const std::size_t n = std::size_t{1} << 26, bytes = n * sizeof(float);  // 256 MiB: read from DRAM
  float *x = nullptr, *y = nullptr;
  EXPECT_CUDA(cudaMalloc(&x, bytes));
  EXPECT_CUDA(cudaMalloc(&y, bytes));
  EXPECT_CUDA(cudaMemset(x, 1, bytes));
  const std::function<void()> copy = one_copy(x, y, n);
  copy();  // loads the kernel before the passes
  std::vector<std::string> steps;    // "profile", "counters", "kernel time": the order they ran in
  std::vector<std::string> trouble;  // per step: "" or what went wrong
  auto trace = [&](const char* step, int calls) {
    steps.push_back(step);
    trouble.push_back(traced_copy_trouble(trace_kernels(copy, calls), calls));
  };
  auto count = [&] {
    const CounterProfile c = collect_counters(copy);
    steps.push_back("counters");
    if (!c.error.empty()) trouble.push_back(c.error);
    else if (c.kernels.size() != 1 || c.kernels.front().name.find("copy_kernel") == std::string::npos)
      trouble.push_back("counted " + std::to_string(c.kernels.size()) + " kernel names, not the copy's alone");
    else if (std::abs(c.total.dram_read - double(bytes)) > 0.05 * double(bytes))
      trouble.push_back("DRAM read " + std::to_string(c.total.dram_read) + " B of a " + std::to_string(bytes) + " B copy");
    else trouble.push_back("");
  };
  trace("profile", 3);
  count();
  trace("kernel time", 2);
  trace("profile", 3);
  count();
  count();
  free_all({x, y});
  ASSERT_EQ(steps.size(), trouble.size());
  for (const std::string& t : trouble)
    if (machine_refuses(t)) GTEST_SKIP() << "no CUPTI passes on this machine: " << t;
  for (std::size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(trouble[i], "") << "step " << i + 1 << ", " << steps[i];
}

// --profile and --kernel-time across processes: where CUPTI fails on another rank, this one runs no traced pass
// (its collective would wait for that rank), and says which rank and why.
TEST_F(GpuCounters, ATraceRunsNoPassWhereAnotherRankCouldNotStartOne) {
  int passes_run = 0;
  const KernelTrace t = trace_kernels([&] { ++passes_run; }, 3, [](const std::string& own) {
    return own.empty() ? std::string("rank 1: cuptiActivityEnable(kind): CUPTI_ERROR_NOT_INITIALIZED") : own;
  });
  if (machine_refuses(t.error)) GTEST_SKIP() << "no CUPTI trace on this machine: " << t.error;
  EXPECT_EQ(passes_run, 0);
  EXPECT_EQ(t.error, "rank 1: cuptiActivityEnable(kind): CUPTI_ERROR_NOT_INITIALIZED");
  EXPECT_TRUE(t.records.empty());
}

// A pass that fails on another rank ends the passes on every rank after it, and CUPTI is torn down in full:
// the next trace records kernels again.
TEST_F(GpuCounters, ATraceStopsWhereAnotherRanksPassFailedAndTheNextTraceWorks) {
  const std::size_t n = std::size_t{1} << 20;
  float *x = nullptr, *y = nullptr;
  EXPECT_CUDA(cudaMalloc(&x, n * sizeof(float)));
  EXPECT_CUDA(cudaMalloc(&y, n * sizeof(float)));
  int passes_run = 0, rounds = 0;
  auto pass = [&] {
    ++passes_run;
    copy_kernel<<<132, 256>>>(x, y, n);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("copy failed");
  };
  const KernelTrace stopped = trace_kernels(pass, 5, [&](const std::string& own) {
    return ++rounds == 3 && own.empty() ? std::string("rank 1: the traced runs failed: boom") : own;
  });
  const KernelTrace next = trace_kernels(pass, 2);
  free_all({x, y});
  if (machine_refuses(stopped.error)) GTEST_SKIP() << "no CUPTI trace on this machine: " << stopped.error;
  EXPECT_EQ(rounds, 3) << "one round before the passes, one after each";
  EXPECT_EQ(passes_run, 2 + 2);
  EXPECT_EQ(stopped.error, "rank 1: the traced runs failed: boom");
  ASSERT_EQ(next.error, "");
  EXPECT_EQ(next.passes, 2);
  EXPECT_FALSE(next.records.empty());
}

}  // namespace
}  // namespace roofbench
