// Runs the cpu plugin's cases the way the host does (setup, poison outputs, run, check) through a small
// host-memory Context, without loading the plugin.
#include "cpu_cases.hpp"

#include <gtest/gtest.h>
#include <roofbench/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace roofbench;

class HostContext final : public Context {
 public:
  explicit HostContext(Params params) : params_(std::move(params)) {}
  ~HostContext() override {
    for (const auto& buffer : buffers_) std::free(buffer.data);
  }
  HostContext(const HostContext&) = delete;
  HostContext& operator=(const HostContext&) = delete;

  const Params& params() const override { return params_; }
  int ranks() const override { return 1; }
  const DeviceInfo& device(int) const override { return device_; }
  void* stream(int) const override { return nullptr; }

  void* alloc(std::size_t bytes, BufferRole role, int) override {
    constexpr std::size_t kAlignment = 64;  // aligned_alloc wants a multiple of the alignment
    const std::size_t rounded = std::max<std::size_t>((bytes + kAlignment - 1) / kAlignment * kAlignment, kAlignment);
    void* data = std::aligned_alloc(kAlignment, rounded);
    if (data == nullptr) throw std::bad_alloc();
    buffers_.push_back({data, bytes, role});
    return data;
  }

  void fill_random(void* data, std::size_t count, ElementType type, double lo, double hi, int) override {
    std::mt19937_64 engine(seed() + fills_++);
    std::uniform_real_distribution<double> uniform(lo, hi);
    switch (type) {
      case ElementType::f64:
        std::generate_n(static_cast<double*>(data), count, [&] { return uniform(engine); });
        return;
      case ElementType::f32:
        std::generate_n(static_cast<float*>(data), count, [&] { return static_cast<float>(uniform(engine)); });
        return;
      default:
        throw Error("test context: fill_random supports only f64 and f32");
    }
  }

  void copy_to_host(void* dst, const void* src, std::size_t bytes, int) override { std::memcpy(dst, src, bytes); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes, int) override { std::memcpy(dst, src, bytes); }
  void synchronize(int) override {}
  std::uint64_t seed() const override { return 20240607; }

  // What the host does before the gate run: every output byte 0xFF, i.e. NaN in fp64 and fp32.
  void poison_outputs() {
    for (const auto& buffer : buffers_)
      if (buffer.role == BufferRole::output) std::memset(buffer.data, 0xFF, buffer.bytes);
  }

  template <typename T>
  T* output(std::size_t index = 0) {
    for (const auto& buffer : buffers_)
      if (buffer.role == BufferRole::output && index-- == 0) return static_cast<T*>(buffer.data);
    return nullptr;
  }

 private:
  struct Buffer {
    void* data;
    std::size_t bytes;
    BufferRole role;
  };
  Params params_;
  DeviceInfo device_{DeviceKind::cpu, 0, "test CPU"};
  std::vector<Buffer> buffers_;
  std::uint64_t fills_ = 0;
};

Plugin described_plugin() {
  Plugin plugin;
  plugins::cpu::add_cases(plugin);
  return plugin;
}

const CaseSpec& spec_named(const std::string& name) {
  static const Plugin plugin = described_plugin();
  for (const auto& spec : plugin.cases)
    if (spec.name == name) return spec;
  throw std::out_of_range("no case named " + name);
}

double tolerance_of(const CaseSpec& spec) {
  return spec.tolerance > 0 ? spec.tolerance : default_tolerance(spec.precision);
}

Params smallest_params(const CaseSpec& spec) {
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& axis : spec.axes) items.emplace_back(axis.name, axis.values.front());
  return Params(std::move(items));
}

// The host's gate run, up to check(): `run_before_check` false leaves the outputs poisoned.
void gate_run(HostContext& ctx, Case& benchmark, bool run_before_check = true) {
  benchmark.setup(ctx);
  ctx.poison_outputs();
  if (run_before_check) benchmark.run(ctx);
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& spec : described_plugin().cases) names.push_back(spec.name);
  return names;
}

TEST(CpuPlugin, DescribesEveryCaseForTheCpu) {
  std::set<std::string> expected{"stream_copy", "stream_triad", "add", "matmul_naive", "matmul_blocked"};
#ifdef ROOFBENCH_HAVE_CBLAS
  expected.insert("matmul_blas");
#endif
  const auto names = case_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  EXPECT_EQ(names.size(), expected.size()) << "duplicate case names";
  for (const auto& spec : described_plugin().cases) {
    SCOPED_TRACE(spec.name);
    EXPECT_FALSE(spec.description.empty());
    EXPECT_EQ(spec.device.kind, DeviceKind::cpu);
    ASSERT_EQ(spec.axes.size(), 1u);
    EXPECT_EQ(spec.axes[0].name, "n");
    EXPECT_TRUE(spec.make);
  }
}

TEST(CpuPlugin, StreamingSizesRunFromCacheToFarPastIt) {
  const std::vector<std::string> expected{"4096", "16384", "65536", "262144", "1048576", "4194304", "16777216"};
  for (const auto* name : {"stream_copy", "stream_triad", "add"}) EXPECT_EQ(spec_named(name).axes[0].values, expected);
}

TEST(CpuPlugin, WorkCountsMinimumTraffic) {
  struct Expected {
    const char* name;
    double n, flops, bytes, items;
    const char* item_name;
  };
  const double n = 4096, m = 64;
  for (const auto& e : {Expected{"stream_copy", n, 0, 16 * n, n, "elements"},
                        Expected{"stream_triad", n, 2 * n, 24 * n, n, "elements"},
                        Expected{"add", n, n, 12 * n, n, "elements"},
                        Expected{"matmul_naive", m, 2 * m * m * m, 12 * m * m, 1, "matmuls"}}) {
    SCOPED_TRACE(e.name);
    const auto benchmark = spec_named(e.name).make(Params({{"n", std::to_string(static_cast<int>(e.n))}}));
    const Work work = benchmark->work();
    EXPECT_EQ(work.flops, e.flops);
    EXPECT_EQ(work.bytes, e.bytes);
    EXPECT_EQ(work.items, e.items);
    EXPECT_EQ(work.item_name, e.item_name);
  }
}

class EveryCase : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryCase, PassesItsGateAfterOneRunAtTheSmallestSize) {
  const CaseSpec& spec = spec_named(GetParam());
  HostContext ctx(smallest_params(spec));
  const auto benchmark = spec.make(ctx.params());
  gate_run(ctx, *benchmark);
  const Check check = benchmark->check(ctx);
  EXPECT_LE(check.rel_l2_error, tolerance_of(spec)) << check.detail;
  EXPECT_TRUE(check.passed_extra);
  benchmark->teardown(ctx);
}

TEST_P(EveryCase, FailsItsGateWhenTheOutputIsLeftPoisoned) {
  const CaseSpec& spec = spec_named(GetParam());
  HostContext ctx(smallest_params(spec));
  const auto benchmark = spec.make(ctx.params());
  gate_run(ctx, *benchmark, /*run_before_check=*/false);
  const Check check = benchmark->check(ctx);
  EXPECT_TRUE(std::isnan(check.rel_l2_error)) << check.detail;
}

INSTANTIATE_TEST_SUITE_P(CpuPlugin, EveryCase, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

// Above n = 512 the gate compares a sample of rows; an error outside them must still fail it.
class SampledMatmulGate : public ::testing::Test {
 protected:
  static constexpr std::int64_t kN = 1024;
  SampledMatmulGate() : ctx_(Params({{"n", std::to_string(kN)}})), benchmark_(spec().make(ctx_.params())) {}
  static const CaseSpec& spec() { return spec_named("matmul_blocked"); }

  HostContext ctx_;
  std::unique_ptr<Case> benchmark_;
};

TEST_F(SampledMatmulGate, PassesAndSaysItSampled) {
  gate_run(ctx_, *benchmark_);
  const Check check = benchmark_->check(ctx_);
  EXPECT_LE(check.rel_l2_error, tolerance_of(spec())) << check.detail;
  EXPECT_NE(check.detail.find("64 evenly spaced rows"), std::string::npos) << check.detail;
}

TEST_F(SampledMatmulGate, CatchesANonFiniteOutputOutsideTheSampledRows) {
  const auto sampled = plugins::cpu::matmul_checked_rows(kN);
  ASSERT_EQ(sampled.size(), 64u);
  std::int64_t unsampled_row = 1;
  while (std::find(sampled.begin(), sampled.end(), unsampled_row) != sampled.end()) ++unsampled_row;

  gate_run(ctx_, *benchmark_);
  ctx_.output<float>()[unsampled_row * kN + 7] = std::numeric_limits<float>::quiet_NaN();
  const Check check = benchmark_->check(ctx_);
  EXPECT_TRUE(std::isnan(check.rel_l2_error)) << check.detail;
  EXPECT_NE(check.detail.find("C[" + std::to_string(unsampled_row) + ",7]"), std::string::npos) << check.detail;
}

TEST_F(SampledMatmulGate, CatchesAWrongValueInASampledRow) {
  gate_run(ctx_, *benchmark_);
  const std::int64_t last_row = kN - 1;  // always sampled
  ctx_.output<float>()[last_row * kN + 3] += 1.0f;
  const Check check = benchmark_->check(ctx_);
  EXPECT_GT(check.rel_l2_error, tolerance_of(spec())) << check.detail;
  EXPECT_NE(check.detail.find("C[" + std::to_string(last_row) + ",3]"), std::string::npos) << check.detail;
}

}  // namespace
