// The attention kernels against the fp64 reference, whole outputs of small shapes (the plugin's tests
// drive the same kernels through the sampled gate). Skips without a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "roofbench/cuda.hpp"
#include "roofbench/kernels/cuda_attention.hpp"
#include "roofbench/kernels/persistent_schedule.hpp"

namespace roofbench::kernels {
namespace {

bool gpu_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct DeviceTensor {
  std::vector<double> host;  // the stored values, decoded
  AttentionType type;
  void* device = nullptr;
  DeviceTensor(std::size_t n, std::mt19937& rng, double range, AttentionType t = AttentionType::bf16)
      : host(n), type(t) {
    std::vector<std::uint16_t> stored(n);
    std::uniform_real_distribution<float> uniform(float(-range), float(range));
    for (std::size_t i = 0; i < n; ++i) {
      const float x = uniform(rng);
      if (type == AttentionType::bf16) {
        const __nv_bfloat16 b = __float2bfloat16(x);
        stored[i] = __nv_bfloat16_raw(b).x;
        host[i] = __bfloat162float(b);
      } else {
        const __half h = __float2half(x);
        stored[i] = __half_raw(h).x;
        host[i] = __half2float(h);
      }
    }
    ROOFBENCH_CUDA(cudaMalloc(&device, n * 2));
    ROOFBENCH_CUDA(cudaMemcpy(device, stored.data(), n * 2, cudaMemcpyHostToDevice));
  }
  ~DeviceTensor() { (void)cudaFree(device); }
  std::vector<double> read() const {
    std::vector<std::uint16_t> stored(host.size());
    ROOFBENCH_CUDA(cudaMemcpy(stored.data(), device, stored.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<double> out(stored.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (type == AttentionType::bf16) {
        __nv_bfloat16_raw raw;
        raw.x = stored[i];
        out[i] = __bfloat162float(__nv_bfloat16(raw));
      } else {
        __half_raw raw;
        raw.x = stored[i];
        out[i] = __half2float(__half(raw));
      }
    }
    return out;
  }
};

// The fp64 attention of every (batch, head) pair and row, laid out as O.
std::vector<double> reference_output(const AttentionShape& shape, const DeviceTensor& q, const DeviceTensor& k,
                                     const DeviceTensor& v) {
  std::vector<std::int64_t> rows(shape.q_len);
  for (std::int64_t r = 0; r < shape.q_len; ++r) rows[r] = r;
  std::vector<double> out;
  const std::int64_t d = shape.head_dim;
  for (std::int64_t pair = 0; pair < shape.batch * shape.heads; ++pair) {
    const auto ref = attention_reference(shape, q.host.data() + pair * shape.q_len * d,
                                         k.host.data() + pair * shape.kv_len * d, v.host.data() + pair * shape.kv_len * d, rows);
    out.insert(out.end(), ref.begin(), ref.end());
  }
  return out;
}

double relative_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double e = std::isfinite(got[i]) ? got[i] - want[i] : INFINITY;
    num += e * e;
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// Q, K and V of random values (scores spread well beyond a uniform softmax), and an output to write.
struct AttentionInputs {
  std::mt19937 rng{42};
  DeviceTensor q, k, v, o;
  AttentionInputs(const AttentionShape& shape, AttentionType type)
      : q(shape.q_elements(), rng, 2, type), k(shape.kv_elements(), rng, 2, type), v(shape.kv_elements(), rng, 1, type),
        o(shape.q_elements(), rng, 1, type) {}

  // Fused `version`'s output on these inputs, O poisoned first (0xFFFF: NaN in bf16 and fp16), so that an output
  // a version leaves unwritten fails instead of passing with the previous version's values.
  std::vector<double> fused_output(const std::string& version, AttentionType type, const AttentionShape& shape) {
    ROOFBENCH_CUDA(cudaMemset(o.device, 0xFF, o.host.size() * 2));
    launch_fused_attention(version, type, shape, q.device, k.device, v.device, o.device, nullptr);
    ROOFBENCH_CUDA(cudaDeviceSynchronize());
    return o.read();
  }
};

// Relative L2 error of the whole output against the reference, every (batch, head) pair and row.
template <typename Launch>
double whole_output_error(const AttentionShape& shape, Launch&& launch) {
  AttentionInputs in(shape, AttentionType::bf16);
  launch(in.q.device, in.k.device, in.v.device, in.o.device);
  ROOFBENCH_CUDA(cudaDeviceSynchronize());
  return relative_l2(in.o.read(), reference_output(shape, in.q, in.k, in.v));
}

// Why `version` cannot run on device 0 (empty when it can).
std::string unavailable(const std::string& version) { return fused_unavailable_reason(version, 0); }

// Without a GPU too: the mma.sync versions run anywhere, the sm_90a ones (v4 to v16) not on a device that does
// not exist, and an unknown version is refused.
TEST(CudaAttention, FusedVersionsSayWhereTheyRun) {
  for (const std::string& version : fused_versions()) {
    if (fused_version_needs_sm90a(version))
      EXPECT_NE(fused_unavailable_reason(version, -1).find("sm_90a"), std::string::npos) << version;
    else
      EXPECT_EQ(fused_unavailable_reason(version, -1), "") << version;
  }
  for (const char* version : {"v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16"})
    EXPECT_TRUE(fused_version_needs_sm90a(version)) << version;
  EXPECT_THROW(fused_unavailable_reason("v17", 0), std::invalid_argument);
  EXPECT_NE(fused_version_form("v12").find("head by head"), std::string::npos);
  EXPECT_NE(fused_version_form("v12").find("taking turns"), std::string::npos);
  EXPECT_EQ(fused_version_form("v3"), "");
  EXPECT_EQ(fused_version_form("v6"), "sm_90a: TMA + wgmma, warp specialised");
  EXPECT_NE(fused_version_form("v9").find("persistent"), std::string::npos);
  EXPECT_NE(fused_version_form("v10").find("taking turns"), std::string::npos);
  EXPECT_NE(fused_version_form("v13").find("rescaled under"), std::string::npos);
  EXPECT_EQ(fused_version_form("v13").find("taking turns"), std::string::npos);
  EXPECT_NE(fused_version_form("v14").find("raw scores"), std::string::npos);
  EXPECT_NE(fused_version_form("v15").find("unit rescales skipped"), std::string::npos);
  EXPECT_NE(fused_version_form("v16").find("next item's first scores"), std::string::npos);
  EXPECT_EQ(fused_version_form("v16").find("unit rescales skipped"), std::string::npos);
}

TEST(CudaAttention, FusedVersionsMatchTheReference) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  for (const std::string& version : fused_versions()) {
    if (const std::string why = unavailable(version); !why.empty()) {
      std::printf("[ not applicable ] fused %s: %s\n", version.c_str(), why.c_str());
      continue;
    }
    for (std::int64_t d : {64, 128})
      for (bool causal : {true, false}) {
        const AttentionShape shape{.batch = 2, .heads = 2, .q_len = 256, .kv_len = 256, .head_dim = d, .causal = causal};
        const double error = whole_output_error(shape, [&](void* q, void* k, void* v, void* o) {
          launch_fused_attention(version, AttentionType::bf16, shape, q, k, v, o, nullptr);
        });
        EXPECT_LT(error, 1e-2) << version << " d" << d << (causal ? " causal" : " full");
      }
  }
}

// The sm_90a versions (v4 to v16: TMA, wgmma, warp specialised) at small shapes of odd head counts, one and
// several query blocks, both masks, both head dims and both types, against fp64 and against the mma.sync
// version v3 on the same inputs (T 640: five query blocks, so each K/V ring goes round more than once; v6's
// d 128 walks its overlapped loop there, whose first and last tiles run apart from it).
TEST(CudaAttention, FusedSm90aVersionsMatchTheReferenceAndV3) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  if (const std::string why = unavailable("v4"); !why.empty()) GTEST_SKIP() << why;
  for (const AttentionType type : {AttentionType::bf16, AttentionType::fp16})
    for (const auto& [batch, heads, t] : {std::tuple{1, 3, 128}, std::tuple{2, 5, 256}, std::tuple{1, 1, 640}})
      for (const std::int64_t d : {64, 128})
        for (const bool causal : {true, false}) {
          const AttentionShape shape{.batch = batch, .heads = heads, .q_len = t, .kv_len = t, .head_dim = d, .causal = causal};
          AttentionInputs in(shape, type);
          const auto run = [&](const std::string& version) { return in.fused_output(version, type, shape); };
          const std::vector<double> v3 = run("v3"), reference = reference_output(shape, in.q, in.k, in.v);
          const std::string what = std::string(type == AttentionType::bf16 ? "bf16" : "fp16") + " B" +
                                   std::to_string(batch) + " H" + std::to_string(heads) + " T" + std::to_string(t) +
                                   " d" + std::to_string(d) + (causal ? " causal" : " full");
          for (const std::string& version : fused_versions()) {
            if (!fused_version_needs_sm90a(version)) continue;
            const std::vector<double> got = run(version);
            EXPECT_LT(relative_l2(got, reference), 1e-2) << version << " against fp64, " << what;
            EXPECT_LT(relative_l2(got, v3), 1e-2) << version << " against v3, " << what;
          }
        }
}

// Every block's items under the snake, taken as the persistent kernels take them (up to the first -1).
std::vector<std::vector<int>> dealt(int blocks, int items) {
  std::vector<std::vector<int>> of_block(blocks);
  for (int c = 0; c < blocks; ++c)
    for (int n = 0;; ++n) {
      const int item = snake_work_item(n, blocks, c, items);
      if (item < 0) break;
      of_block[c].push_back(item);
    }
  return of_block;
}

// Without a GPU: every item is dealt exactly once, for any number of blocks and items (a last round part full
// in either direction included).
TEST(CudaAttention, TheSnakeDealsEveryItemOnce) {
  for (int blocks : {1, 2, 3, 5, 7, 132})
    for (int items = 1; items <= 5 * blocks + 2; ++items) {
      std::vector<int> times(items, 0);
      for (const std::vector<int>& mine : dealt(blocks, items))
        for (int item : mine) ++times[item];
      EXPECT_EQ(std::count(times.begin(), times.end(), 1), items) << blocks << " blocks, " << items << " items";
    }
}

// Without a GPU: at B8 H12 T1024 causal (96 heads of 8 query blocks, the x-th heaviest walking 8 - x tiles of
// 128 keys) on 132 SMs, the longest block walks at most 5% over the mean, where dealing the rounds in one
// order gives one 15% over it.
TEST(CudaAttention, TheSnakeBalancesCausalWalks) {
  constexpr int kBlocks = 132, kHeads = 96, kQueryBlocks = 8, kItems = kHeads * kQueryBlocks;
  const auto tiles = [](int item) { return kQueryBlocks - item / kHeads; };
  int longest = 0, total = 0;
  for (const std::vector<int>& mine : dealt(kBlocks, kItems)) {
    int walked = 0;
    for (int item : mine) walked += tiles(item);
    longest = std::max(longest, walked);
    total += walked;
  }
  const double mean = double(total) / kBlocks;
  EXPECT_LE(longest, 1.05 * mean) << "longest " << longest << " tiles against a mean of " << mean;
  int round_robin_longest = 0;
  for (int c = 0; c < kBlocks; ++c) {
    int walked = 0;
    for (int item = c; item < kItems; item += kBlocks) walked += tiles(item);
    round_robin_longest = std::max(round_robin_longest, walked);
  }
  EXPECT_GT(round_robin_longest, 1.1 * mean);  // why the snake: rounds in one order overload the first blocks
}

// Without a GPU: v11's order, head by head, at B4 H16 T4096 causal (64 heads of 32 query blocks) on 132 SMs:
// the longest block still within 5% of the mean, and a round of 132 items spans at most 6 heads (their K and
// V, 2 MB each at d128, fit the L2 together).
TEST(CudaAttention, TheHeadMajorSnakeBalancesAndKeepsARoundToAFewHeads) {
  constexpr int kBlocks = 132, kHeads = 64, kQueryBlocks = 32, kItems = kHeads * kQueryBlocks;
  int longest = 0, total = 0;
  for (const std::vector<int>& mine : dealt(kBlocks, kItems)) {
    int walked = 0;
    for (int item : mine) walked += kQueryBlocks - item % kQueryBlocks;
    longest = std::max(longest, walked);
    total += walked;
  }
  EXPECT_LE(longest, 1.05 * double(total) / kBlocks);
  for (int first = 0; first < kItems; first += kBlocks) {
    const int last = std::min(first + kBlocks, kItems) - 1;
    EXPECT_LE(last / kQueryBlocks - first / kQueryBlocks + 1, 6) << "round from item " << first;
  }
}

// The worst relative L2 error of any query block of 128 rows (one work item of the persistent version) of
// O ([pairs x t, d]) against `want`: one wrong or missing block shows however many agree.
double worst_block_error(const std::vector<double>& got, const std::vector<double>& want, std::int64_t d) {
  const std::size_t block = std::size_t(128 * d);
  double worst = 0;
  for (std::size_t first = 0; first < want.size(); first += block) {
    const auto piece = [&](const std::vector<double>& o) {
      return std::vector<double>(o.begin() + first, o.begin() + std::min(first + block, o.size()));
    };
    worst = std::max(worst, relative_l2(piece(got), piece(want)));
  }
  return worst;
}

// The persistent v9 to v15 where each block walks several work items, against v3 on the same inputs: heads chosen
// so that the items (B1 T1024: 8 a head) number between 3 and 4 times the SMs, each block walking 3 or 4 and
// the last, part-full round of the snake running backwards (block c's fourth item is 4G - 1 - c). Each item's
// 128 rows are checked on their own, over three launches, O poisoned before each: an item left out, given
// another's rows or raced on shows in its block.
TEST(CudaAttention, PersistentVersionsWalkSeveralItemsABlockAsV3Does) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  if (const std::string why = unavailable("v9"); !why.empty()) GTEST_SKIP() << why;
  int sms = 0;
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::int64_t heads = (7 * sms + 15) / 16;  // 3.5 x the SMs' items at 8 a head
  for (const std::int64_t d : {64, 128})
    for (const bool causal : {true, false}) {
      const AttentionShape shape{
          .batch = 1, .heads = heads, .q_len = 1024, .kv_len = 1024, .head_dim = d, .causal = causal};
      ASSERT_GT(heads * 8, 3 * sms);
      ASSERT_LT(heads * 8, 4 * sms);
      AttentionInputs in(shape, AttentionType::bf16);
      const auto run = [&](const char* version) { return in.fused_output(version, AttentionType::bf16, shape); };
      const std::vector<double> v3 = run("v3");
      for (const char* version : {"v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16"})
        for (int launch = 0; launch < 3; ++launch)
          EXPECT_LT(worst_block_error(run(version), v3, d), 1e-2)
              << version << " d" << d << (causal ? " causal" : " full") << ", launch " << launch;
    }
}

// v13 to v16 move, merge or skip multiplies of v11's softmax and stores without changing one result (O rescaled
// under the next scores' product; the maximum of the scaled scores taken as the scaled maximum, the scale being
// positive; multiplies by exactly 1 left out; an item's O stored under the next item's first scores), so they
// give v11's output bit for bit: both head dims, both masks, walks of one tile to 32 (T 4096).
TEST(CudaAttention, V13ToV16GiveV11sOutputBitForBit) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  if (const std::string why = unavailable("v13"); !why.empty()) GTEST_SKIP() << why;
  for (const std::int64_t d : {64, 128})
    for (const bool causal : {true, false}) {
      const AttentionShape shape{.batch = 1, .heads = 3, .q_len = 4096, .kv_len = 4096, .head_dim = d, .causal = causal};
      AttentionInputs in(shape, AttentionType::bf16);
      const auto run = [&](const char* version) { return in.fused_output(version, AttentionType::bf16, shape); };
      const std::vector<double> v11 = run("v11");
      for (const char* version : {"v13", "v14", "v15", "v16"}) {
        const std::vector<double> got = run(version);
        std::size_t differing = 0;
        for (std::size_t i = 0; i < got.size(); ++i) differing += std::memcmp(&got[i], &v11[i], sizeof(double)) != 0;
        EXPECT_EQ(differing, 0u) << version << " d" << d << (causal ? " causal" : " full") << ": elements unlike v11's";
      }
    }
}

// Each sm_90a version's split of registers and shared memory gives an SM the blocks it was made for: v7's two at
// d64, one elsewhere; the mma.sync versions report none.
TEST(CudaAttention, Sm90aVersionsHoldTheBlocksAnSmTheyWereMadeFor) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  for (const std::string& version : fused_versions()) {
    if (!fused_version_needs_sm90a(version)) {
      EXPECT_EQ(fused_blocks_per_sm(version, AttentionType::bf16, 64), 0) << version;
      continue;
    }
    if (const std::string why = fused_unavailable_reason(version, 0); !why.empty()) GTEST_SKIP() << why;
    for (int d : {64, 128})
      EXPECT_EQ(fused_blocks_per_sm(version, AttentionType::bf16, d), version == "v7" && d == 64 ? 2 : 1)
          << version << " d" << d;
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

// The kernels above 48 KiB of shared memory opt in at every launch: the opt-in belongs to the context, so it
// is lost by a device reset (as the host does after a sticky error) and must not be remembered per process.
TEST(CudaAttention, KernelsOfLargeSharedMemoryRunAfterADeviceReset) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  int sms = 0;
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const AttentionShape prefill{.batch = 1, .heads = 2, .q_len = 256, .kv_len = 256, .head_dim = 128, .causal = true};
  const AttentionShape decode{.batch = 2, .heads = 4, .q_len = 1, .kv_len = 4096, .head_dim = 64, .causal = true};
  for (const char* when : {"before the reset", "after the reset"}) {
    for (const std::string& version : fused_versions()) {
      if (!unavailable(version).empty()) continue;
      const double error = whole_output_error(prefill, [&](void* q, void* k, void* v, void* o) {
        launch_fused_attention(version, AttentionType::bf16, prefill, q, k, v, o, nullptr);
      });
      EXPECT_LT(error, 1e-2) << "fused " << version << " d128, " << when;
    }
    for (const std::string& version : split_kv_versions()) {
      const SplitKvPlan plan = plan_split_kv(decode, sms, version);
      void* workspace = nullptr;
      ROOFBENCH_CUDA(cudaMalloc(&workspace, plan.workspace_bytes));
      zero_split_kv_workspace(plan, decode, workspace, nullptr);
      const double error = whole_output_error(decode, [&](void* q, void* k, void* v, void* o) {
        launch_split_kv_decode(AttentionType::bf16, decode, plan, q, k, v, o, workspace, nullptr);
      });
      EXPECT_LT(error, 1e-2) << "split_kv " << version << ", " << when;
      ROOFBENCH_CUDA(cudaFree(workspace));
    }
    ROOFBENCH_CUDA(cudaDeviceReset());
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
