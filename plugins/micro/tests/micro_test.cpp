// Tests of the micro plugin. The first group needs no GPU (the case list and its work counts); the second
// drives every case through setup, poisoned outputs, run and check on a CUDA device, and shows that
// broken kernels fail the same gates the plugin uses. Decoding of stored formats is tested with the SDK
// (sdk/case_support).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cases.hpp"
#include "roofbench/case_support/cuda_test_context.hpp"
#include "roofbench/kernels/cuda_elementwise.hpp"
#include "roofbench/kernels/cuda_matmul.hpp"

namespace roofbench::micro {
namespace {

using case_support::testing::CudaTestContext;
using case_support::testing::gpu_present;
using case_support::testing::run_gate_sequence;

Params one_param(std::string axis, std::string value) {
  return Params(std::vector<std::pair<std::string, std::string>>{{std::move(axis), std::move(value)}});
}

// ---- the case list (CPU only) ----

// One described plugin for the whole test: cases hold references into it.
const Plugin& described() {
  static const Plugin plugin = [] {
    Plugin p;
    describe(p);
    return p;
  }();
  return plugin;
}

const CaseSpec& spec_named(const Plugin& plugin, std::string_view name) {
  for (const CaseSpec& spec : plugin.cases)
    if (spec.name == name) return spec;
  throw std::runtime_error("no case " + std::string(name));
}

TEST(MicroPlugin, ListsEveryCaseOnceWithADescription) {
  const Plugin plugin = described();
  EXPECT_EQ(plugin.name, "micro");
  const std::set<std::string> expected{"matmul_cublas_fp32",
                                       "matmul_cublas_tf32",
                                       "matmul_cublas_bf16",
                                       "matmul_cublas_fp16",
                                       "matmul_cublas_fp8",
                                       "matmul_naive_fp32",
                                       "matmul_tiled_fp32",
                                       "matmul_batched_bf16",
                                       "add_fp32_scalar",
                                       "add_fp32_vec16",
                                       "add_bf16_scalar",
                                       "add_bf16_vec16",
                                       "copy",
                                       "copy_kernel"};
  std::set<std::string> seen;
  const std::regex valid_name("[A-Za-z0-9_.-]+");
  for (const CaseSpec& spec : plugin.cases) {
    EXPECT_TRUE(seen.insert(spec.name).second) << "duplicate " << spec.name;
    EXPECT_TRUE(std::regex_match(spec.name, valid_name)) << spec.name;
    EXPECT_FALSE(spec.description.empty()) << spec.name;
    EXPECT_EQ(spec.description.find('\n'), std::string::npos) << spec.name;
    EXPECT_EQ(spec.device.kind, DeviceKind::cuda) << spec.name;
    EXPECT_EQ(spec.axes.size(), 1u) << spec.name;
    EXPECT_TRUE(spec.make) << spec.name;
  }
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(spec_named(plugin, "matmul_cublas_fp8").precision, Precision::fp8);
  EXPECT_EQ(spec_named(plugin, "matmul_cublas_tf32").precision, Precision::tf32);
  EXPECT_EQ(spec_named(plugin, "add_bf16_vec16").precision, Precision::bf16);
  EXPECT_EQ(spec_named(plugin, "matmul_batched_bf16").sweep_axis, "batch");
}

TEST(MicroPlugin, EveryAxisPointMakesACaseWithPositiveWork) {
  // make() and work() touch no GPU, so every point of every axis can be built here.
  for (const CaseSpec& spec : described().cases) {
    for (const std::string& value : spec.axes[0].values) {
      const Params params({{spec.axes[0].name, value}});
      const auto made = spec.make(params);
      ASSERT_TRUE(made) << spec.name << " " << value;
      const Work work = made->work();
      EXPECT_GT(work.bytes, 0) << spec.name << " " << value;
      EXPECT_GT(work.bytes_read, 0) << spec.name << " " << value;
      EXPECT_LT(work.bytes_read, work.bytes) << spec.name << " " << value;
      if (spec.name.rfind("matmul", 0) == 0) {
        EXPECT_GT(work.flops, 0) << spec.name << " " << value;
        EXPECT_LT(work.bytes, 10e9) << spec.name << " " << value << ": matmul footprint (A + B + C) over 10 GB";
      }
    }
  }
}

Work work_of(const std::string& case_name, const std::string& axis, const std::string& value) {
  return spec_named(described(), case_name).make(one_param(axis, value))->work();
}

TEST(MicroPlugin, WorkCountsFollowTheShapes) {
  const Work bf16 = work_of("matmul_cublas_bf16", "mnk", "8192x2048x512");
  EXPECT_EQ(bf16.flops, 2.0 * 8192 * 2048 * 512);
  EXPECT_EQ(bf16.bytes, 2.0 * (8192.0 * 512 + 512.0 * 2048 + 8192.0 * 2048));
  EXPECT_EQ(bf16.bytes_read, 2.0 * (8192.0 * 512 + 512.0 * 2048));  // A and B; C is written
  const Work fp8 = work_of("matmul_cublas_fp8", "mnk", "256x512x1024");
  EXPECT_EQ(fp8.bytes, 1.0 * (256.0 * 1024 + 1024.0 * 512) + 2.0 * 256 * 512);  // e4m3 in, bf16 out
  EXPECT_EQ(fp8.bytes_read, 1.0 * (256.0 * 1024 + 1024.0 * 512));
  const Work batched = work_of("matmul_batched_bf16", "batch", "64");
  EXPECT_EQ(batched.flops, 64 * 2.0 * 256 * 256 * 256);
  EXPECT_EQ(batched.items, 64);
  EXPECT_EQ(batched.item_name, "matrices");
  EXPECT_EQ(batched.bytes_read, 64 * 2.0 * (2 * 256 * 256));
  const Work add = work_of("add_bf16_scalar", "n", "1048576");
  EXPECT_EQ(add.bytes, 3.0 * 1048576 * 2);
  EXPECT_EQ(add.bytes_read, 2.0 * 1048576 * 2);  // f = 2/3: the mixed memory roof
  EXPECT_EQ(add.flops, 1048576);
  EXPECT_EQ(add.items, 1048576);
  EXPECT_EQ(add.item_name, "elements");
  const Work copy = work_of("copy", "bytes", "4194304");
  EXPECT_EQ(copy.bytes, 2.0 * 4194304);
  EXPECT_EQ(copy.bytes_read, 4194304);  // f = 1/2: the copy roof
  EXPECT_EQ(copy.items, 0);
  EXPECT_TRUE(copy.item_name.empty());
  const Work copy_kernel = work_of("copy_kernel", "bytes", "4194304");
  EXPECT_EQ(copy_kernel.bytes, copy.bytes);
  EXPECT_EQ(copy_kernel.bytes_read, copy.bytes_read);
}

TEST(MicroPlugin, RejectsMalformedShapes) {
  const CaseSpec& spec = spec_named(described(), "matmul_cublas_fp32");
  for (const char* bad : {"256x256", "256x256x256x1", "0x5x5", "axbxc", "256x256x-1", "3000000000x1x1"})
    EXPECT_THROW(spec.make(one_param("mnk", bad)), Error) << bad;
}

// ---- end to end on a GPU ----

class MicroGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_present()) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or found none)";
  }
};

double tolerance_of(const CaseSpec& spec) {
  return spec.tolerance > 0 ? spec.tolerance : default_tolerance(spec.precision);
}

bool has_fp8_tensor_cores() {
  int device = 0, major = 0, minor = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor >= 89;
}

// The host's gate sequence: setup, poison outputs, run (or `run_instead`), synchronise, check, teardown.
using RunInstead = std::function<void(Case&, CudaTestContext&)>;
Check gate(const CaseSpec& spec, const Params& params, const RunInstead& run_instead = {},
           unsigned char output_fill = 0xFF) {
  CudaTestContext ctx(params);
  const auto made = spec.make(params);
  return run_gate_sequence(*made, ctx, {.output_fill = output_fill, .run_instead = run_instead}).check;
}

// Cold by rotation: the add and copy cases pass their gate on every copy the host makes of their buffers.
TEST_F(MicroGpu, RotatingCasesPassTheirGateOnEveryCopy) {
  for (const CaseSpec& spec : described().cases) {
    if (spec.name.rfind("add_", 0) != 0 && spec.name.rfind("copy", 0) != 0) continue;
    for (const char* value : {"4100", "1000004"}) {
      const Params params = one_param(spec.axes[0].name, value);
      CudaTestContext ctx(params);
      const auto made = spec.make(params);
      const std::vector<Check> checks = case_support::testing::gate_on_every_copy(*made, ctx, 3);
      ASSERT_EQ(checks.size(), 3u) << spec.name << ": no copies to rotate";
      for (std::size_t copy = 0; copy < checks.size(); ++copy)
        EXPECT_LE(checks[copy].rel_l2_error, tolerance_of(spec)) << spec.name << " " << value << " copy " << copy;
    }
  }
}

TEST_F(MicroGpu, EveryCasePassesItsGateAtSmallAndOddSizes) {
  // Per case, the axis values to try: the first real one, plus odd ones that leave partial tiles and
  // vector tails (fp8 needs multiples of 16).
  const std::map<std::string, std::vector<std::string>> odd_values{
      {"mnk", {"257x129x65", "8x520x1000"}}, {"n", {"1", "7", "1000003"}}, {"bytes", {"4", "4100"}}, {"batch", {"3"}}};
  for (const CaseSpec& spec : described().cases) {
    if (spec.name == "matmul_cublas_fp8" && !has_fp8_tensor_cores()) continue;
    std::vector<std::string> values{spec.axes[0].values.front()};
    if (spec.name != "matmul_cublas_fp8")
      for (const auto& value : odd_values.at(spec.axes[0].name)) values.push_back(value);
    else
      values.push_back("48x272x1040");
    for (const std::string& value : values) {
      const Check check = gate(spec, one_param(spec.axes[0].name, value));
      EXPECT_LE(check.rel_l2_error, tolerance_of(spec)) << spec.name << " " << value << ": " << check.detail;
      EXPECT_TRUE(check.passed_extra) << spec.name << " " << value << ": " << check.detail;
    }
  }
}

TEST_F(MicroGpu, Fp8CaseRefusesDevicesWithoutFp8) {
  if (has_fp8_tensor_cores()) GTEST_SKIP() << "this device has fp8 tensor cores";
  const CaseSpec& spec = spec_named(described(), "matmul_cublas_fp8");
  EXPECT_THROW(gate(spec, one_param("mnk", "256x256x256")), Error);
}

// The buffers a case allocated, in allocation order (add: a, b, c).
template <typename T>
T* buffer(CudaTestContext& ctx, std::size_t index) {
  return static_cast<T*>(ctx.allocations().at(index).data);
}

TEST_F(MicroGpu, AddThatSkipsTheLastElementFailsTheGate) {
  const CaseSpec& spec = spec_named(described(), "add_fp32_vec16");
  const std::size_t n = 1000003;
  const Params params({{"n", std::to_string(n)}});
  // A vectorised add with an off-by-one tail: the last element is never written.
  const RunInstead off_by_one = [n](Case&, CudaTestContext& ctx) {
    kernels::launch_add_vec16(buffer<float>(ctx, 0), buffer<float>(ctx, 1), buffer<float>(ctx, 2), n - 1,
                              ctx.cuda_stream());
  };
  const Check poisoned = gate(spec, params, off_by_one);
  EXPECT_TRUE(std::isnan(poisoned.rel_l2_error)) << poisoned.detail;  // the poison is still there
  // Without the poison (output happened to hold zeros) the per-element comparison still catches it,
  // although one wrong element in a million is far below the L2 tolerance.
  const Check zeroed = gate(spec, params, off_by_one, 0x00);
  EXPECT_FALSE(zeroed.passed_extra) << zeroed.detail;
  EXPECT_NE(zeroed.detail.find("index " + std::to_string(n - 1)), std::string::npos) << zeroed.detail;
}

TEST_F(MicroGpu, Bf16AddWithAWrongElementFailsTheGate) {
  const CaseSpec& spec = spec_named(described(), "add_bf16_scalar");
  const Check check = gate(spec, one_param("n", "4097"), [](Case& made, CudaTestContext& ctx) {
    made.run(ctx);
    ctx.synchronize(0);
    const __nv_bfloat16 wrong = __float2bfloat16_rn(3.0f);  // |a + b| < 2, so never right
    ROOFBENCH_CUDA(cudaMemcpy(buffer<__nv_bfloat16>(ctx, 2) + 1234, &wrong, sizeof(wrong), cudaMemcpyHostToDevice));
  });
  EXPECT_FALSE(check.passed_extra) << check.detail;
}

TEST_F(MicroGpu, SampledAddGateCatchesStrayNanAndWrongLastElement) {
  // Above the full-comparison limit: compared on a sample, scanned whole for non-finite values.
  const CaseSpec& spec = spec_named(described(), "add_fp32_scalar");
  const std::size_t n = (std::size_t{1} << 26) + 4099;
  const Params params({{"n", std::to_string(n)}});
  const Check clean = gate(spec, params);
  EXPECT_LE(clean.rel_l2_error, tolerance_of(spec)) << clean.detail;
  EXPECT_TRUE(clean.passed_extra) << clean.detail;

  auto run_then_overwrite = [](std::size_t index, float value) {
    return [index, value](Case& made, CudaTestContext& ctx) {
      made.run(ctx);
      ctx.synchronize(0);
      ROOFBENCH_CUDA(cudaMemcpy(buffer<float>(ctx, 2) + index, &value, sizeof(value), cudaMemcpyHostToDevice));
    };
  };
  // Between sample blocks: only the whole-output scan sees it.
  const Check stray_nan = gate(spec, params, run_then_overwrite(n / 256 + 5000, std::nanf("")));
  EXPECT_TRUE(std::isnan(stray_nan.rel_l2_error)) << stray_nan.detail;
  const Check wrong_last = gate(spec, params, run_then_overwrite(n - 1, 5.0f));
  EXPECT_FALSE(wrong_last.passed_extra) << wrong_last.detail;
}

TEST_F(MicroGpu, MatmulThatSkipsTheLastRowFailsTheGate) {
  const CaseSpec& spec = spec_named(described(), "matmul_tiled_fp32");
  const Check check = gate(spec, one_param("mnk", "300x200x100"), [](Case&, CudaTestContext& ctx) {
    kernels::launch_matmul_tiled_fp32(buffer<float>(ctx, 0), buffer<float>(ctx, 1), buffer<float>(ctx, 2), 299, 200,
                                      100, ctx.cuda_stream());
  });
  EXPECT_TRUE(std::isnan(check.rel_l2_error)) << check.detail;
}

TEST_F(MicroGpu, MatmulThatIsNeverRunFailsTheGate) {
  const CaseSpec& spec = spec_named(described(), "matmul_cublas_bf16");
  const Check check = gate(spec, one_param("mnk", "256x256x256"), [](Case&, CudaTestContext&) {});
  EXPECT_TRUE(std::isnan(check.rel_l2_error)) << check.detail;
}

TEST_F(MicroGpu, MatmulWithWrongValuesFailsTheGate) {
  // Finite but wrong everywhere (A B^T-like garbage): zeros instead of the product.
  const CaseSpec& spec = spec_named(described(), "matmul_cublas_fp32");
  const Check check = gate(
      spec, one_param("mnk", "256x256x256"), [](Case&, CudaTestContext&) {}, 0x00);
  EXPECT_GT(check.rel_l2_error, tolerance_of(spec)) << check.detail;
}

}  // namespace
}  // namespace roofbench::micro
