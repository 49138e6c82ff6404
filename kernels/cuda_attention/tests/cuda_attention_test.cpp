// The attention kernels against the fp64 reference, whole outputs of small shapes (the plugin's tests
// drive the same kernels through the sampled gate). Skips without a GPU.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "roofbench/cuda.hpp"
#include "roofbench/kernels/cuda_attention.hpp"

namespace roofbench::kernels {
namespace {

bool gpu_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct DeviceTensor {
  std::vector<double> host;  // the stored values, decoded
  void* device = nullptr;
  DeviceTensor(std::size_t n, std::mt19937& rng, double range) : host(n) {
    std::vector<__nv_bfloat16> stored(n);
    std::uniform_real_distribution<float> uniform(float(-range), float(range));
    for (std::size_t i = 0; i < n; ++i) {
      stored[i] = __float2bfloat16(uniform(rng));
      host[i] = __bfloat162float(stored[i]);
    }
    ROOFBENCH_CUDA(cudaMalloc(&device, n * 2));
    ROOFBENCH_CUDA(cudaMemcpy(device, stored.data(), n * 2, cudaMemcpyHostToDevice));
  }
  ~DeviceTensor() { (void)cudaFree(device); }
  std::vector<double> read() const {
    std::vector<__nv_bfloat16> stored(host.size());
    ROOFBENCH_CUDA(cudaMemcpy(stored.data(), device, stored.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<double> out(stored.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = __bfloat162float(stored[i]);
    return out;
  }
};

// Relative L2 error of the whole output against the reference, every (batch, head) pair and row.
template <typename Launch>
double whole_output_error(const AttentionShape& shape, Launch&& launch) {
  std::mt19937 rng(42);
  DeviceTensor q(shape.q_elements(), rng, 2), k(shape.kv_elements(), rng, 2), v(shape.kv_elements(), rng, 1),
      o(shape.q_elements(), rng, 1);
  launch(q.device, k.device, v.device, o.device);
  ROOFBENCH_CUDA(cudaDeviceSynchronize());
  const std::vector<double> got = o.read();
  std::vector<std::int64_t> rows(shape.q_len);
  for (std::int64_t r = 0; r < shape.q_len; ++r) rows[r] = r;
  double num = 0, den = 0;
  const std::int64_t d = shape.head_dim;
  for (std::int64_t pair = 0; pair < shape.batch * shape.heads; ++pair) {
    const auto ref = attention_reference(shape, q.host.data() + pair * shape.q_len * d,
                                         k.host.data() + pair * shape.kv_len * d, v.host.data() + pair * shape.kv_len * d, rows);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double e = got[pair * shape.q_len * d + i] - ref[i];
      num += e * e;
      den += ref[i] * ref[i];
    }
  }
  return std::sqrt(num / den);
}

TEST(CudaAttention, FusedVersionsMatchTheReference) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  for (const std::string& version : fused_versions())
    for (std::int64_t d : {64, 128})
      for (bool causal : {true, false}) {
        const AttentionShape shape{.batch = 2, .heads = 2, .q_len = 256, .kv_len = 256, .head_dim = d, .causal = causal};
        const double error = whole_output_error(shape, [&](void* q, void* k, void* v, void* o) {
          launch_fused_attention(version, AttentionType::bf16, shape, q, k, v, o, nullptr);
        });
        EXPECT_LT(error, 1e-2) << version << " d" << d << (causal ? " causal" : " full");
      }
}

TEST(CudaAttention, SplitKvDecodeMatchesTheReference) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  int sms = 0;
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (const std::string& version : split_kv_versions())
  for (std::int64_t kv : {1, 63, 64, 1000, 4096}) {
    const AttentionShape shape{.batch = 3, .heads = 4, .q_len = 1, .kv_len = kv, .head_dim = 64, .causal = true};
    const SplitKvPlan plan = plan_split_kv(shape, sms, version);
    void* workspace = nullptr;
    ROOFBENCH_CUDA(cudaMalloc(&workspace, plan.workspace_bytes));
    zero_split_kv_workspace(plan, shape, workspace, nullptr);
    const double error = whole_output_error(shape, [&](void* q, void* k, void* v, void* o) {
      for (int launch = 0; launch < 2; ++launch)
        launch_split_kv_decode(AttentionType::bf16, shape, plan, q, k, v, o, workspace, nullptr);
    });
    EXPECT_LT(error, 1e-2) << version << " kv " << kv << " in " << plan.blocks << " blocks";
    ROOFBENCH_CUDA(cudaFree(workspace));
  }
}

TEST(CudaAttention, SplitKvPlanCoversTheCache) {
  for (const std::string& version : split_kv_versions())
  for (std::int64_t batch : {1, 8, 64, 256})
    for (std::int64_t kv : {1, 100, 1024, 4096, 16384}) {
      const AttentionShape shape{.batch = batch, .heads = 12, .q_len = 1, .kv_len = kv, .head_dim = 64};
      const SplitKvPlan plan = plan_split_kv(shape, 132, version);
      if (plan.balanced_blocks_per_sm > 0) {  // equal runs over the whole cache, none empty, one wave at most
        const std::int64_t total = batch * 12 * kv;
        EXPECT_GE(plan.blocks * plan.split_len, total) << version;
        EXPECT_LT((plan.blocks - 1) * plan.split_len, total) << version;
        EXPECT_LE(plan.blocks, 132 * plan.balanced_blocks_per_sm) << version;
        EXPECT_GE(plan.split_len, 16 * plan.keys_in_flight) << version;  // at least one step of the block
        if (plan.bulk_stages > 0) {  // whole stages, so a run's stages start on a stage boundary of the cache
          EXPECT_EQ(plan.split_len % (16 * plan.keys_in_flight), 0) << version;
        }
        continue;
      }
      EXPECT_GE(plan.splits * plan.split_len, kv);
      EXPECT_LT((plan.splits - 1) * plan.split_len, kv);  // no empty split
      EXPECT_EQ(plan.split_len % (16 * plan.keys_in_flight), 0) << version;  // whole steps of the block
      EXPECT_EQ(plan.blocks, plan.splits * batch * 12);
    }
}

}  // namespace
}  // namespace roofbench::kernels
