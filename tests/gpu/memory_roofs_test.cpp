// The GPU's memory roofs bound what kernels do: the read roof is at least every variant it is the best of,
// the copy roof at least every copy (micro's copy_kernel among them), and the split-KV decode's every version
// reads its KV cache below the read roof at the largest decode shape the transformer plugin ships (B256
// KV16384, where it reads faster than the grid-stride read kernel alone).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cuda_devices_test.hpp"
#include "cuda_event_timing.hpp"
#include "device.hpp"
#include "memory_roofs.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/kernels/cuda_attention.hpp"
#include "roofbench/kernels/cuda_elementwise.hpp"

namespace roofbench {
namespace {

constexpr std::size_t kRoofBytes = std::size_t{2} << 30;  // a buffer as large as most GPUs' roofs stream
// Two measurements of one kernel, each the best of 10, differ by a few tenths of a percent on an idle
// H200; the roof measured first and a variant measured again may differ that much either way.
constexpr double kNoise = 0.02;

// Device memory that frees itself.
struct Buffer {
  Device& device;
  void* data;
  Buffer(Device& d, std::size_t bytes) : device(d), data(d.allocate(bytes)) {}
  ~Buffer() { device.release(data); }
};

class MemoryRoofs : public CudaDevicesTest {
 protected:
  void SetUp() override {
    CudaDevicesTest::SetUp();
    if (IsSkipped()) return;
    ROOFBENCH_CUDA(cudaSetDevice(device().info().index));
  }
  Device& device() { return *devices_.front(); }
  // Every variant of `table` over kRoofBytes of random data.
  std::vector<MemoryRun> measure(const std::vector<MemoryVariant>& table, bool copy) {
    Buffer from(device(), kRoofBytes), to(device(), kRoofBytes);
    device().fill_random(from.data, kRoofBytes / 4, ElementType::f32, -1, 1, 7);
    return measure_memory_variants(table, copy, device().stream(), from.data, to.data, kRoofBytes, 10);
  }
};

TEST_F(MemoryRoofs, EachRoofIsAtLeastEveryVariantItIsTheBestOf) {
  std::vector<std::string> how;
  const Ceilings c = device().measure_ceilings(how);
  for (const MemoryRun& r : measure(read_variants(), false))
    EXPECT_LE(r.rate, c.read_bandwidth * (1 + kNoise)) << describe(r.variant);
  for (const MemoryRun& r : measure(copy_variants(), true))
    EXPECT_LE(r.rate, c.bandwidth * (1 + kNoise)) << describe(r.variant);
  // The how lines name the winners.
  auto line = [&](const std::string& start) {
    auto it = std::find_if(how.begin(), how.end(), [&](const std::string& h) { return h.rfind(start, 0) == 0; });
    return it == how.end() ? std::string() : *it;
  };
  EXPECT_NE(line("read_bandwidth: the best of " + std::to_string(read_variants().size()) + " kernels"), "");
  EXPECT_NE(line("bandwidth: the best of " + std::to_string(copy_variants().size()) + " ways"), "");
  for (const std::string& h : how) std::printf("how: %s\n", h.c_str());
}

// micro's copy_kernel, the kernel itself (not the roof's one_step form of it), over the roofs' bytes: at most
// the copy roof, measured in the same process.
TEST_F(MemoryRoofs, TheShippedCopyKernelCopiesBelowTheCopyRoof) {
  const std::vector<MemoryRun> copies = measure(copy_variants(), true);
  const double roof = copies[best_run(copies)].rate;
  Buffer from(device(), kRoofBytes), to(device(), kRoofBytes);
  device().fill_random(from.data, kRoofBytes / 4, ElementType::f32, -1, 1, 7);
  const auto stream = static_cast<cudaStream_t>(device().stream());
  const double s = best_event_seconds(stream, 3, 10, [&] {
    kernels::launch_copy_vec16(static_cast<const float*>(from.data), static_cast<float*>(to.data), kRoofBytes / 4,
                               stream);
  });
  const double rate = 2.0 * double(kRoofBytes) / s;
  std::printf("copy_kernel: %.3f TB/s, %.1f%% of the copy roof %.3f TB/s (%s)\n", rate * 1e-12, 100 * rate / roof,
              roof * 1e-12, describe(copies[best_run(copies)].variant).c_str());
  EXPECT_LE(rate, roof * (1 + kNoise)) << "micro's copy_kernel copies above the copy roof";
}

// attention_decode_bf16 at batch 256, kv 16384 (12 heads of 64): 12.9 GB of K and V read once.
TEST_F(MemoryRoofs, EverySplitKvDecodeReadsBelowTheReadRoof) {
  using namespace kernels;
  const std::vector<MemoryRun> reads = measure(read_variants(), false);
  const double roof = reads[best_run(reads)].rate;
  const AttentionShape shape{.batch = 256, .heads = 12, .q_len = 1, .kv_len = 16384, .head_dim = 64, .causal = true};
  const std::size_t kv_bytes = std::size_t(shape.kv_elements()) * 2, q_bytes = std::size_t(shape.q_elements()) * 2;
  Buffer q(device(), q_bytes), k(device(), kv_bytes), v(device(), kv_bytes), o(device(), q_bytes);
  device().fill_random(q.data, shape.q_elements(), ElementType::bf16, -1, 1, 1);
  device().fill_random(k.data, shape.kv_elements(), ElementType::bf16, -2, 2, 2);
  device().fill_random(v.data, shape.kv_elements(), ElementType::bf16, -1, 1, 3);
  int sms = 0, major = 0;
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device().info().index));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device().info().index));
  const auto stream = static_cast<cudaStream_t>(device().stream());
  for (const std::string& version : split_kv_versions()) {
    const SplitKvPlan plan = plan_split_kv(shape, sms, version);
    if (plan.bulk_stages > 0 && major < 9) continue;  // cp.async.bulk is sm_90's
    Buffer workspace(device(), plan.workspace_bytes);
    zero_split_kv_workspace(plan, shape, workspace.data, stream);
    const double s = best_event_seconds(stream, 2, 10, [&] {
      launch_split_kv_decode(AttentionType::bf16, shape, plan, q.data, k.data, v.data, o.data, workspace.data, stream);
    });
    const double rate = shape.min_bytes(2) / s;
    std::printf("split_kv %s: %.3f TB/s, %.1f%% of the read roof %.3f TB/s\n", version.c_str(), rate * 1e-12,
                100 * rate / roof, roof * 1e-12);
    EXPECT_LE(rate, roof) << "split_kv " << version << " reads above the read roof";
  }
}

}  // namespace
}  // namespace roofbench
