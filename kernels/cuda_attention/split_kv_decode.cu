// Flash-decoding: one query per (batch, head) against its KV cache, the cache cut into splits so that even
// batch 1 keeps every SM reading. A block of 16 groups of 8 lanes reads one split: each group takes every
// 16th key, each lane 8 of the 64 dimensions (one 16-byte load of K and one of V per key), and keeps its own
// online softmax; the groups are merged in shared memory, the split's partial goes to the workspace, and
// the last block of the (batch, head) to arrive merges the splits (no second launch).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_common.cuh"
#include "roofbench/cuda_check.hpp"

namespace roofbench::kernels {
namespace {
using namespace attention_detail;

constexpr int kDecodeThreads = 128;
constexpr int kLanesPerKey = 8;  // 8 lanes x 8 elements = head_dim 64
constexpr int kHeadDim = 64;
constexpr int kGroups = kDecodeThreads / kLanesPerKey;
// The lab. v1: 4 keys per group per step (8 outstanding 16-byte loads per lane), splits of up to 2048
// keys. v2: splits of up to 256 keys, so that the blocks left running at the end (a partial last wave of
// 512 KB blocks in v1) are short; a split's partial is 264 bytes against its 64 KB read. v3: v2 with 8 keys
// per group per step (16 loads per lane, fewer blocks per SM for the registers they take). v4: v2 with
// each load asking L2 to fetch the whole 256-byte block around it and not to keep the line in L1 (the cache
// is read once), since Nsight Compute found v2 waiting on its loads (scoreboard stalls, 68% of the cycles).
// On an H200 (2026-12-01, TB/s of KV cache read; the read roof measured 4.53): B64 KV1024 v1 3.53, v2 3.70,
// v3 3.54, v4 3.67; B256 KV4096 v1 4.25, v2 4.32, v3 4.24, v4 4.02; B1 KV1024 (graph) v1 5.72 us, v2 5.82,
// v3 4.93, v4 5.65. v2 is 56 registers, 9 blocks per SM (56% occupancy), latency-bound on its loads.
struct DecodeVersion {
  const char* name;
  int keys_in_flight;
  std::int64_t longest_split;
  bool streaming_loads;
};
constexpr DecodeVersion kDecodeVersions[] = {
    {"v1", 4, 2048, false}, {"v2", 4, 256, false}, {"v3", 8, 256, false}, {"v4", 4, 256, true}};

// A read-once 16-byte load: not allocated in L1, with an L2 prefetch of the enclosing 256 bytes.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}
constexpr int keys_per_step(int keys_in_flight) { return kGroups * keys_in_flight; }
constexpr int kPartialFloats = 2 + kHeadDim;  // max, sum, unnormalised output

struct Partial {
  float max, sum;
};

__device__ __forceinline__ float weight(float from_max, float to_max) {
  return from_max == -INFINITY ? 0.0f : exp2f(from_max - to_max);
}

// The weight of a partial computed against `from_max` in a merge against `to_max`; the broken kernel of
// the tests leaves it unrescaled.
template <AttentionFault kFault>
__device__ __forceinline__ float merge_weight(float from_max, float to_max) {
  if constexpr (kFault == AttentionFault::no_rescale) return from_max == -INFINITY ? 0.0f : 1.0f;
  return weight(from_max, to_max);
}

template <typename T, int kKeysInFlight, bool kStreaming, AttentionFault kFault>
__global__ __launch_bounds__(kDecodeThreads) void split_kv_decode_kernel(const T* q, const T* k, const T* v, T* o,
                                                                       std::int64_t kv_len, std::int64_t split_len,
                                                                       std::int64_t keys_read, float scale_log2,
                                                                       float* partials, unsigned* arrivals) {
  const int splits = gridDim.x, split = blockIdx.x;
  const std::int64_t bh = blockIdx.y;
  const int group = threadIdx.x / kLanesPerKey, lane = threadIdx.x % kLanesPerKey;
  const std::int64_t begin = split * split_len;
  const std::int64_t end = begin + split_len < keys_read ? begin + split_len : keys_read;

  float query[8];
  unpack8<T>(reinterpret_cast<const uint4*>(q + bh * kHeadDim)[lane], query);
#pragma unroll
  for (float& x : query) x *= scale_log2;

  const uint4* keys = reinterpret_cast<const uint4*>(k + bh * kv_len * kHeadDim) + lane;
  const uint4* values = reinterpret_cast<const uint4*>(v + bh * kv_len * kHeadDim) + lane;
  float max_score = -INFINITY, sum = 0, acc[8] = {};
  constexpr int kKeysPerStep = keys_per_step(kKeysInFlight);
  // The same trip count for every lane: the score's shuffles need the whole warp.
  for (std::int64_t step = begin; step < end; step += kKeysPerStep) {
    const std::int64_t first = step + group;
    uint4 k_raw[kKeysInFlight], v_raw[kKeysInFlight];
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      const std::int64_t key = first + u * kGroups;
      if (key < end) {
        if constexpr (kStreaming) {
          k_raw[u] = load_streaming(keys + key * (kHeadDim / 8));
          v_raw[u] = load_streaming(values + key * (kHeadDim / 8));
        } else {
          k_raw[u] = __ldg(keys + key * (kHeadDim / 8));
          v_raw[u] = __ldg(values + key * (kHeadDim / 8));
        }
      } else {
        k_raw[u] = v_raw[u] = make_uint4(0, 0, 0, 0);
      }
    }
    float score[kKeysInFlight];
    float step_max = max_score;
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      float kf[8];
      unpack8<T>(k_raw[u], kf);
      float dot = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) dot += query[i] * kf[i];
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      dot += __shfl_xor_sync(0xffffffffu, dot, 4);
      score[u] = first + u * kGroups < end ? dot : -INFINITY;
      step_max = fmaxf(step_max, score[u]);
    }
    if constexpr (kFault != AttentionFault::no_rescale) {
      const float rescale = weight(max_score, step_max);
      sum *= rescale;
#pragma unroll
      for (float& a : acc) a *= rescale;
    }
    max_score = step_max;
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      const float p = weight(score[u], max_score);
      if (p == 0.0f) continue;  // a key past the end: its V was not loaded
      float vf[8];
      unpack8<T>(v_raw[u], vf);
      sum += p;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += p * vf[i];
    }
  }

  // Merge the groups: every group's (max, sum) and its 64 outputs, lane by lane.
  __shared__ Partial group_stats[kGroups];
  __shared__ float group_acc[kGroups][kHeadDim];
  if (lane == 0) group_stats[group] = {max_score, sum};
#pragma unroll
  for (int i = 0; i < 8; ++i) group_acc[group][lane * 8 + i] = acc[i];
  __syncthreads();
  float* partial = partials + (bh * splits + split) * kPartialFloats;
  if (threadIdx.x >= kHeadDim) return;
  // One thread per output dimension; each finds the block's max and sum itself (broadcast reads).
  float block_max = -INFINITY, block_sum = 0, merged = 0;
  for (int g = 0; g < kGroups; ++g) block_max = fmaxf(block_max, group_stats[g].max);
  for (int g = 0; g < kGroups; ++g) {
    const float w = merge_weight<kFault>(group_stats[g].max, block_max);
    block_sum += group_stats[g].sum * w;
    merged += group_acc[g][threadIdx.x] * w;
  }
  if (splits == 1) {
    o[bh * kHeadDim + threadIdx.x] = from_float<T>(merged / block_sum);
    return;
  }
  partial[2 + threadIdx.x] = merged;
  if (threadIdx.x == 0) partial[0] = block_max, partial[1] = block_sum;

  // The last block to arrive merges every split (threadFenceReduction: publish, then count). Only the
  // first two warps are left: the barriers below are theirs (named barrier 1, 64 threads).
  __threadfence();
  asm volatile("bar.sync 1, 64;\n" ::);  // every thread's part of the partial is published before the count
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(arrivals + bh, 1u) == unsigned(splits - 1);
  asm volatile("bar.sync 1, 64;\n" ::);
  if (!last) return;
  __threadfence();
  const float* all = partials + bh * splits * kPartialFloats;
  float m = -INFINITY, total = 0, out = 0;
  for (int sp = 0; sp < splits; ++sp) m = fmaxf(m, __ldcg(all + sp * kPartialFloats));
  for (int sp = 0; sp < splits; ++sp) {
    const float w = merge_weight<kFault>(__ldcg(all + sp * kPartialFloats), m);
    total += __ldcg(all + sp * kPartialFloats + 1) * w;
    out += __ldcg(all + sp * kPartialFloats + 2 + threadIdx.x) * w;
  }
  o[bh * kHeadDim + threadIdx.x] = from_float<T>(out / total);
  if (threadIdx.x == 0) arrivals[bh] = 0;  // ready for the next launch (graph replays included)
}

std::int64_t heads_total(const AttentionShape& shape) { return shape.batch * shape.heads; }

void check_decode_shape(const AttentionShape& shape) {
  if (shape.head_dim != kHeadDim) throw std::invalid_argument("split_kv decode takes head_dim 64 only");
  if (shape.q_len != 1) throw std::invalid_argument("split_kv decode takes one query per sequence");
  if (shape.kv_len < 1) throw std::invalid_argument("split_kv decode needs a KV cache");
}

}  // namespace

const std::vector<std::string>& split_kv_versions() { return attention_detail::version_names<kDecodeVersions>(); }

SplitKvPlan plan_split_kv(const AttentionShape& shape, int sm_count, const std::string& version) {
  check_decode_shape(shape);
  const DecodeVersion* chosen = nullptr;
  for (const DecodeVersion& v : kDecodeVersions)
    if (version == v.name) chosen = &v;
  if (!chosen) throw std::invalid_argument("split_kv decode: no version '" + version + "'");
  const std::int64_t step = keys_per_step(chosen->keys_in_flight);
  // Enough blocks for 8 per SM (batch 1 still spreads over the GPU), and splits of at most the version's
  // longest so that the last blocks to finish are short; but no split shorter than one step of the block.
  const std::int64_t kLongestSplit = std::max(chosen->longest_split, step);
  const std::int64_t wanted_blocks = std::int64_t(sm_count) * 8;
  const std::int64_t most_splits = (shape.kv_len + step - 1) / step;
  const std::int64_t splits = std::clamp<std::int64_t>(
      std::max((wanted_blocks + heads_total(shape) - 1) / heads_total(shape),
               (shape.kv_len + kLongestSplit - 1) / kLongestSplit),
      1, most_splits);
  SplitKvPlan plan;
  plan.keys_in_flight = chosen->keys_in_flight;
  plan.streaming_loads = chosen->streaming_loads;
  plan.split_len = (most_splits + splits - 1) / splits * step;
  plan.splits = int((shape.kv_len + plan.split_len - 1) / plan.split_len);
  plan.workspace_bytes = std::size_t(heads_total(shape)) * (plan.splits * kPartialFloats * sizeof(float) + sizeof(unsigned));
  return plan;
}

namespace {
unsigned* arrivals_of(const SplitKvPlan& plan, const AttentionShape& shape, void* workspace) {
  return reinterpret_cast<unsigned*>(static_cast<float*>(workspace) +
                                     heads_total(shape) * plan.splits * kPartialFloats);
}
}  // namespace

void zero_split_kv_workspace(const SplitKvPlan& plan, const AttentionShape& shape, void* workspace,
                             cudaStream_t stream) {
  ROOFBENCH_CUDA(
      cudaMemsetAsync(arrivals_of(plan, shape, workspace), 0, std::size_t(heads_total(shape)) * sizeof(unsigned), stream));
}

void launch_split_kv_decode(AttentionType type, const AttentionShape& shape, const SplitKvPlan& plan, const void* q,
                            const void* k, const void* v, void* o, void* workspace, cudaStream_t stream,
                            AttentionFault fault) {
  check_decode_shape(shape);
  const float scale_log2 = kLog2e / std::sqrt(float(kHeadDim));
  // The fault skips the last 64 keys.
  const std::int64_t keys_read =
      fault == AttentionFault::skip_last_kv_block ? std::max<std::int64_t>(shape.kv_len - 64, 0) : shape.kv_len;
  const dim3 grid(unsigned(plan.splits), unsigned(heads_total(shape)));
  float* partials = static_cast<float*>(workspace);
  unsigned* arrivals = arrivals_of(plan, shape, workspace);
  dispatch_type(type, [&]<typename T>() {
    const auto* qt = static_cast<const T*>(q);
    const auto* kt = static_cast<const T*>(k);
    const auto* vt = static_cast<const T*>(v);
    auto* ot = static_cast<T*>(o);
    auto go = [&]<int kKeysInFlight, AttentionFault kFault>() {
      auto kernel = plan.streaming_loads ? split_kv_decode_kernel<T, kKeysInFlight, true, kFault>
                                         : split_kv_decode_kernel<T, kKeysInFlight, false, kFault>;
      kernel<<<grid, kDecodeThreads, 0, stream>>>(
          qt, kt, vt, ot, shape.kv_len, plan.split_len, keys_read, scale_log2, partials, arrivals);
    };
    const bool broken = fault == AttentionFault::no_rescale;
    if (plan.keys_in_flight == 4)
      broken ? go.template operator()<4, AttentionFault::no_rescale>() : go.template operator()<4, AttentionFault::none>();
    else
      broken ? go.template operator()<8, AttentionFault::no_rescale>() : go.template operator()<8, AttentionFault::none>();
  });
  ROOFBENCH_CUDA(cudaGetLastError());
}

}  // namespace roofbench::kernels
