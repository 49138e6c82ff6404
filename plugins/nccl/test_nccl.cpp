// Tests of the nccl plugin: communicators on their own, then the all-reduce cases driven end to end
// through a minimal multi-GPU Context that plays the host's part (setup, poison, run, check, teardown).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "allreduce.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/nccl/communicators.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::nccl {
namespace {

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error for these tests
    return 0;
  }
  return count;
}

std::vector<int> first_devices(int count) {
  std::vector<int> devices;
  for (int d = 0; d < count; ++d) devices.push_back(d);
  return devices;
}

#define SKIP_WITHOUT_GPU()                                             \
  do {                                                                 \
    if (visible_gpus() < 1) GTEST_SKIP() << "no CUDA GPU visible here"; \
  } while (0)

// A device buffer of floats on one GPU, freed on scope exit.
class DeviceFloats {
 public:
  DeviceFloats(int device, std::size_t count) : device_(device), count_(count) {
    ROOFBENCH_CUDA(cudaSetDevice(device));
    ROOFBENCH_CUDA(cudaMalloc(&data_, count * sizeof(float)));
  }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  ~DeviceFloats() { (void)cudaFree(data_); }
  float* data() const { return static_cast<float*>(data_); }
  void upload(const std::vector<float>& values) {
    ROOFBENCH_CUDA(cudaMemcpy(data_, values.data(), count_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    std::vector<float> values(count_);
    ROOFBENCH_CUDA(cudaMemcpy(values.data(), data_, count_ * sizeof(float), cudaMemcpyDeviceToHost));
    return values;
  }
  int device() const { return device_; }

 private:
  int device_;
  std::size_t count_;
  void* data_ = nullptr;
};

// A blocking stream: it waits for the legacy default stream, where the tests' plain cudaMemcpy and
// cudaMemset land (a pageable upload can return before its DMA is done).
class DeviceStream {
 public:
  explicit DeviceStream(int device) {
    ROOFBENCH_CUDA(cudaSetDevice(device));
    ROOFBENCH_CUDA(cudaStreamCreate(&stream_));
  }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  ~DeviceStream() { (void)cudaStreamDestroy(stream_); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Sums small integers, exact in fp32 whatever order NCCL adds them in.
void expect_exact_sum(const std::vector<int>& devices) {
  constexpr std::size_t kElements = 1000;  // not a multiple of any NCCL slice: exercises the remainder
  Communicators comms = make_communicators(devices);
  ASSERT_EQ(comms.size(), static_cast<int>(devices.size()));
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");

  std::vector<std::unique_ptr<DeviceFloats>> send, recv;
  std::vector<std::unique_ptr<DeviceStream>> streams;
  std::vector<float> expected(kElements, 0.0f);
  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    std::vector<float> values(kElements);
    for (std::size_t i = 0; i < kElements; ++i) values[i] = static_cast<float>((i % 13) + 100 * rank) - 6.0f;
    for (std::size_t i = 0; i < kElements; ++i) expected[i] += values[i];
    send.push_back(std::make_unique<DeviceFloats>(devices[rank], kElements));
    recv.push_back(std::make_unique<DeviceFloats>(devices[rank], kElements));
    send.back()->upload(values);
    ROOFBENCH_CUDA(cudaMemset(recv.back()->data(), 0xFF, kElements * sizeof(float)));  // NaN until written
    streams.push_back(std::make_unique<DeviceStream>(devices[rank]));
  }

  {
    GroupScope group;
    for (int rank = 0; rank < comms.size(); ++rank)
      ROOFBENCH_NCCL(ncclAllReduce(send[rank]->data(), recv[rank]->data(), kElements, ncclFloat32, ncclSum,
                                   comms[rank], streams[rank]->get()));
    group.end();
  }
  for (auto& stream : streams) ROOFBENCH_CUDA(cudaStreamSynchronize(stream->get()));

  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    const std::vector<float> got = recv[rank]->download();
    for (std::size_t i = 0; i < kElements; ++i)
      ASSERT_EQ(got[i], expected[i]) << "rank " << rank << " element " << i;
  }
  comms.destroy();
  EXPECT_TRUE(comms.empty());
}

TEST(NcclCommunicators, OneRankAllReduceReturnsItsInput) {
  SKIP_WITHOUT_GPU();
  expect_exact_sum({0});
}

TEST(NcclCommunicators, AllVisibleGpusSumExactly) {
  SKIP_WITHOUT_GPU();
  expect_exact_sum(first_devices(visible_gpus()));
}

TEST(NcclCommunicators, NoDevicesIsAnError) { EXPECT_THROW(make_communicators({}), Error); }

// --- the cases end to end -------------------------------------------------------------------------

std::uint16_t bf16_bits_nearest_even(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

// The host's side for a case on several GPUs: one stream per rank, cudaMalloc'd buffers it frees,
// random fills made on the host, and the output poisoning the real host does before the gate run.
class MultiGpuContext final : public Context {
 public:
  MultiGpuContext(std::vector<int> devices, Params params) : params_(std::move(params)) {
    for (int device : devices) {
      cudaDeviceProp properties{};
      ROOFBENCH_CUDA(cudaGetDeviceProperties(&properties, device));
      devices_.push_back(DeviceInfo{DeviceKind::cuda, device, properties.name});
      streams_.push_back(std::make_unique<DeviceStream>(device));
    }
  }
  ~MultiGpuContext() override {
    for (const Allocation& allocation : allocations_) (void)cudaFree(allocation.data);
  }

  const Params& params() const override { return params_; }
  int ranks() const override { return static_cast<int>(devices_.size()); }
  const DeviceInfo& device(int rank) const override { return devices_.at(static_cast<std::size_t>(rank)); }
  void* stream(int rank) const override { return streams_.at(static_cast<std::size_t>(rank))->get(); }

  void* alloc(std::size_t bytes, BufferRole role, int rank) override {
    ROOFBENCH_CUDA(cudaSetDevice(device(rank).index));
    void* data = nullptr;
    ROOFBENCH_CUDA(cudaMalloc(&data, bytes));
    allocations_.push_back({data, bytes, role, rank});
    return data;
  }

  void fill_random(void* data, std::size_t count, ElementType type, double lo, double hi, int rank) override {
    std::mt19937_64 generator(seed_ + fills_++);
    std::uniform_real_distribution<float> uniform(static_cast<float>(lo), static_cast<float>(hi));
    if (type == ElementType::f32) {
      std::vector<float> values(count);
      for (float& value : values) value = uniform(generator);
      copy_to_device(data, values.data(), count * sizeof(float), rank);
    } else if (type == ElementType::bf16) {
      std::vector<std::uint16_t> values(count);
      for (std::uint16_t& value : values) value = bf16_bits_nearest_even(uniform(generator));
      copy_to_device(data, values.data(), count * sizeof(std::uint16_t), rank);
    } else {
      throw Error("test context: fill_random supports f32 and bf16 only");
    }
  }

  void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, int rank) override {
    ROOFBENCH_CUDA(cudaSetDevice(device(rank).index));
    ROOFBENCH_CUDA(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, int rank) override {
    ROOFBENCH_CUDA(cudaSetDevice(device(rank).index));
    ROOFBENCH_CUDA(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  }
  void synchronize(int rank) override {
    ROOFBENCH_CUDA(cudaStreamSynchronize(cuda::stream(*this, rank)));
  }
  std::uint64_t seed() const override { return seed_; }

  void poison_outputs() {
    for (const Allocation& allocation : allocations_) {
      if (allocation.role != BufferRole::output) continue;
      ROOFBENCH_CUDA(cudaSetDevice(device(allocation.rank).index));
      ROOFBENCH_CUDA(cudaMemset(allocation.data, 0xFF, allocation.bytes));
      ROOFBENCH_CUDA(cudaDeviceSynchronize());
    }
  }
  void synchronize_all() {
    for (int rank = 0; rank < ranks(); ++rank) synchronize(rank);
  }

 private:
  struct Allocation {
    void* data;
    std::size_t bytes;
    BufferRole role;
    int rank;
  };
  Params params_;
  std::vector<DeviceInfo> devices_;
  std::vector<std::unique_ptr<DeviceStream>> streams_;
  std::vector<Allocation> allocations_;
  std::uint64_t seed_ = 20261129;
  std::uint64_t fills_ = 0;
};

const CaseSpec& find_case(const Plugin& plugin, std::string_view name) {
  for (const CaseSpec& spec : plugin.cases)
    if (spec.name == name) return spec;
  throw Error("no case " + std::string(name));
}

struct GateOutcome {
  Check check;
  Work work;
  std::vector<Figure> figures;
  double tolerance = 0;
};

// What the host does for one benchmark, up to the gate; run_before_check false leaves outputs poisoned.
GateOutcome run_gate(const std::string& case_name, std::int64_t bytes, bool in_place, int ranks,
                     bool run_before_check = true) {
  Plugin plugin;
  describe_plugin(plugin);
  const CaseSpec& spec = find_case(plugin, case_name);
  Params params({{"bytes", std::to_string(bytes)}, {"inplace", in_place ? "1" : "0"}});
  MultiGpuContext ctx(first_devices(ranks), params);
  std::unique_ptr<Case> benchmark = spec.make(params);
  benchmark->setup(ctx);
  ctx.poison_outputs();
  if (run_before_check) {
    benchmark->run(ctx);
    ctx.synchronize_all();
  }
  GateOutcome outcome;
  outcome.check = benchmark->check(ctx);
  outcome.work = benchmark->work();
  outcome.figures = benchmark->figures();
  outcome.tolerance = spec.tolerance > 0 ? spec.tolerance : default_tolerance(spec.precision);
  // A few more runs, as the timed loop would do, must not fail either.
  if (run_before_check) {
    for (int repeat = 0; repeat < 3; ++repeat) benchmark->run(ctx);
  }
  ctx.synchronize_all();
  benchmark->teardown(ctx);
  return outcome;
}

double rate(const Work& work, const std::string& name) {
  for (const Amount& amount : work.rates)
    if (amount.name == name) return amount.value;
  ADD_FAILURE() << "no rate " << name;
  return 0;
}

struct GateCase {
  const char* name;
  std::int64_t bytes;
  bool in_place;
};

// Names the parameter in test output instead of gtest's byte dump.
void PrintTo(const GateCase& gate_case, std::ostream* out) {
  *out << gate_case.name << " bytes " << gate_case.bytes << (gate_case.in_place ? " in place" : " out of place");
}

class AllReduceGate : public ::testing::TestWithParam<GateCase> {};

TEST_P(AllReduceGate, PassesOnOneRankAndOnAllGpus) {
  SKIP_WITHOUT_GPU();
  const GateCase& param = GetParam();
  for (int ranks : {1, visible_gpus()}) {
    SCOPED_TRACE("ranks " + std::to_string(ranks));
    if (param.in_place && ranks == 1) {
      // NCCL launches nothing for it: the case says so instead of timing nothing.
      EXPECT_THROW(run_gate(param.name, param.bytes, param.in_place, ranks), NotApplicable);
      continue;
    }
    const GateOutcome outcome = run_gate(param.name, param.bytes, param.in_place, ranks);
    EXPECT_LE(outcome.check.rel_l2_error, outcome.tolerance) << outcome.check.detail;
    EXPECT_TRUE(outcome.check.passed_extra) << outcome.check.detail;
    if (ranks == 1) {
      EXPECT_EQ(outcome.check.rel_l2_error, 0.0) << outcome.check.detail;
    }

    const double k = ranks;
    const double element_size = std::string(param.name) == "allreduce_bf16" ? 2 : 4;
    EXPECT_EQ(outcome.work.bytes, static_cast<double>(param.bytes));
    EXPECT_EQ(outcome.work.flops, (k - 1) * static_cast<double>(param.bytes) / element_size);
    EXPECT_EQ(rate(outcome.work, "algbw"), static_cast<double>(param.bytes));
    EXPECT_DOUBLE_EQ(rate(outcome.work, "busbw"), param.bytes * 2 * (k - 1) / k);
    ASSERT_EQ(outcome.figures.size(), 2u);
    EXPECT_EQ(outcome.figures[0].name, "ranks");
    EXPECT_EQ(outcome.figures[0].number, k);
    EXPECT_EQ(outcome.figures[1].name, "gate_elements");
  }
}

INSTANTIATE_TEST_SUITE_P(
    SmallAndSampled, AllReduceGate,
    ::testing::Values(GateCase{"allreduce_fp32", 8, false}, GateCase{"allreduce_fp32", 4096, true},
                      GateCase{"allreduce_bf16", 32768, false}, GateCase{"allreduce_bf16", 32768, true},
                      // past kGateFullCompareBytes: the gate compares a sample
                      GateCase{"allreduce_fp32", std::int64_t{128} << 20, true}),
    [](const ::testing::TestParamInfo<GateCase>& info) {
      return std::string(info.param.name) + "_" + std::to_string(info.param.bytes) +
             (info.param.in_place ? "_inplace" : "_outofplace");
    });

TEST(AllReduceGate, CatchesAnOutputNeverWritten) {
  SKIP_WITHOUT_GPU();
  const GateOutcome outcome = run_gate("allreduce_fp32", 1 << 16, false, visible_gpus(), false);
  EXPECT_TRUE(std::isnan(outcome.check.rel_l2_error)) << outcome.check.detail;
}

// --- what needs no GPU ----------------------------------------------------------------------------

TEST(AllReduceDescribe, CasesAndAxes) {
  Plugin plugin;
  describe_plugin(plugin);
  EXPECT_EQ(plugin.name, "nccl");
  ASSERT_EQ(plugin.cases.size(), 2u);
  for (const CaseSpec& spec : plugin.cases) {
    EXPECT_FALSE(spec.timing.graphable);
    EXPECT_EQ(spec.device.kind, DeviceKind::cuda);
    EXPECT_EQ(spec.device.count, 1);
    ASSERT_EQ(spec.axes.size(), 2u);
    EXPECT_EQ(spec.axes[0].name, "bytes");
    EXPECT_EQ(spec.axes[0].values.front(), "8");
    EXPECT_EQ(spec.axes[0].values.back(), std::to_string(std::int64_t{1} << 30));
    EXPECT_EQ(spec.axes[1].values, (std::vector<std::string>{"0", "1"}));
  }
  EXPECT_EQ(find_case(plugin, "allreduce_bf16").precision, Precision::bf16);
  EXPECT_EQ(find_case(plugin, "allreduce_fp32").precision, Precision::fp32);
}

TEST(AllReduceDescribe, BadAxisValuesAreRefused) {
  Plugin plugin;
  describe_plugin(plugin);
  const CaseSpec& spec = find_case(plugin, "allreduce_fp32");
  EXPECT_THROW(spec.make(Params({{"bytes", "64"}, {"inplace", "yes"}})), Error);
  EXPECT_THROW(spec.make(Params({{"bytes", "0"}, {"inplace", "0"}})), Error);
}

TEST(AllReduceDescribe, WorkBeforeSetupLeavesOutWhatNeedsTheRankCount) {
  Plugin plugin;
  describe_plugin(plugin);
  const std::unique_ptr<Case> benchmark =
      find_case(plugin, "allreduce_bf16").make(Params({{"bytes", "64"}, {"inplace", "0"}}));
  const Work work = benchmark->work();
  EXPECT_EQ(work.bytes, 64.0);
  EXPECT_EQ(work.flops, 0.0);
  ASSERT_EQ(work.rates.size(), 1u);
  EXPECT_EQ(work.rates[0].name, "algbw");
  EXPECT_EQ(work.rates[0].value, 64.0);
  EXPECT_TRUE(benchmark->figures().empty());
}

TEST(GateSample, EveryElementUpTo64MiB) {
  const GateSample sample = choose_gate_sample((std::size_t{64} << 20) / 4, 4);
  EXPECT_TRUE(sample.every());
  EXPECT_EQ(sample.size(), (std::size_t{64} << 20) / 4);
  EXPECT_EQ(sample.index(12345), 12345u);
}

TEST(GateSample, SpreadPlusTailAbove64MiB) {
  const std::size_t elements = (std::size_t{1} << 30) / 2;  // 1 GiB of bf16
  const GateSample sample = choose_gate_sample(elements, 2);
  ASSERT_FALSE(sample.every());
  // The spread steps every elements / kGateSpread elements, so a few of its points fall in the tail.
  const std::size_t spread_points_in_tail = kGateTail / (elements / kGateSpread);
  EXPECT_EQ(sample.size(), kGateSpread + kGateTail - spread_points_in_tail);
  EXPECT_EQ(sample.index(0), 0u);
  EXPECT_EQ(sample.index(sample.size() - 1), elements - 1);
  EXPECT_EQ(sample.index(sample.size() - kGateTail), elements - kGateTail);
  for (std::size_t j = 1; j < sample.size(); ++j) ASSERT_LT(sample.index(j - 1), sample.index(j));
}

}  // namespace
}  // namespace roofbench::nccl
