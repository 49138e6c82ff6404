// Flash-decoding: one query per (batch, head) against its KV cache, the cache cut into splits so that even
// batch 1 keeps every SM reading. A block of 16 groups of 8 lanes reads one split: each group takes every
// 16th key, each lane 8 of the 64 dimensions (one 16-byte load of K and one of V per key), and keeps its own
// online softmax; the groups are merged in shared memory, the split's partial goes to the workspace, and
// the last block of the (batch, head) to arrive merges the splits (no second launch). The balanced
// versions (v5, v6) give each block an equal run of the whole cache instead, which may span (batch, head)s.
#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_common.cuh"
#include "roofbench/cuda.hpp"

namespace roofbench::kernels {
namespace {
using namespace attention_detail;

constexpr int kDecodeThreads = 128;
constexpr int kLanesPerKey = 8;  // 8 lanes x 8 elements = head_dim 64
constexpr int kHeadDim = 64;
constexpr int kGroups = kDecodeThreads / kLanesPerKey;
// The lab's versions (their figures on an H200 are in plugins/transformer/README.md):
//   v1: 4 keys per group per step (8 outstanding 16-byte loads per lane), splits of up to 2048 keys.
//   v2: splits of up to 256 keys, so that the blocks left running at the end (a partial last wave of 512 KB
//     blocks in v1) are short; a split's partial is 264 bytes against its 64 KB read.
//   v3: v2 with 8 keys per group per step (16 loads per lane, fewer blocks per SM for the registers).
//   v4: v2 with each load asking L2 for the whole 256-byte block around it and not keeping the line in L1
//     (the cache is read once), since v2 waits on its loads (scoreboard stalls, 68% of the cycles).
//   v5: the cache cut into equal runs of keys over all (batch, head)s together, as many runs as the GPU
//     holds blocks at once (8 per SM, 4 keys in flight), so one wave reads it all with no tail.
//   v6: v5 with 8 keys in flight and 4 blocks per SM (the same bytes in flight from half the warps).
//   v7: v5 pipelined (the next step's loads issued before this step's arithmetic, so a warp's loads do not
//     go out in bursts), 4 blocks per SM for the registers; v8: the same with 2 keys per step, 8 per SM.
//   v9-v11: v5's balanced runs read by the bulk-copy engine (TMA's 1-D cp.async.bulk) into a ring of
//     shared-memory stages, one thread issuing a stage's K and V rows (2 x chunk x 128 bytes) and an
//     mbarrier saying when they have landed: the bytes in flight per SM are stages x chunk x 256 x blocks
//     per SM whatever the warps are doing, with no load instruction per 16 bytes and no register held for
//     them. Stages never cross a (batch, head). v9: chunks of 64 keys, 4 stages, 3 blocks per SM (up to
//     192 KB in flight per SM); v10: 32-key chunks, 6 stages, 4 blocks per SM; v11: 64-key chunks, 3
//     stages, 4 blocks per SM. Larger stages and fewer blocks do better, as each stage costs a block-wide
//     barrier and a wait.
// The balanced grid wins when each block's run is long and loses when it is short, where v2's many short
// blocks still do better (B64 KV1024, 1490 keys a run: v5 3.65 TB/s against v2's 3.83) unless the bulk
// copies keep the bytes in flight; the transformer plugin picks a version per shape (best_split_kv_version).
struct DecodeVersion {
  const char* name;
  int keys_in_flight;
  std::int64_t longest_split;  // unused when balanced
  bool streaming_loads;
  int balanced_blocks_per_sm;  // 0: a grid of (splits, batch x heads)
  bool pipelined;
  int bulk_stages = 0;  // > 0: staged through shared memory by cp.async.bulk, keys_in_flight x 16 keys a stage
};
constexpr DecodeVersion kDecodeVersions[] = {
    {"v1", 4, 2048, false, 0, false},  {"v2", 4, 256, false, 0, false},  {"v3", 8, 256, false, 0, false},
    {"v4", 4, 256, true, 0, false},    {"v5", 4, 0, false, 8, false},    {"v6", 8, 0, false, 4, false},
    {"v7", 4, 0, false, 4, true},      {"v8", 2, 0, false, 8, true},     {"v9", 4, 0, false, 3, false, 4},
    {"v10", 2, 0, false, 4, false, 6}, {"v11", 4, 0, false, 4, false, 3}};

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

// One group's online softmax over keys [begin, end) of one (batch, head): `keys` and `values` point at the
// head's cache, already offset to the lane's 16 bytes. The same trip count for every lane of the block: the
// score's shuffles need the whole warp.
struct GroupState {
  float max_score = -INFINITY, sum = 0, acc[8] = {};
};

// One step's K and V rows for the group: keys first, first + 16, ... (zeros past `end`).
template <int kKeysInFlight, bool kStreaming, typename Index>
__device__ __forceinline__ void load_step(const uint4* keys, const uint4* values, Index first, Index end,
                                          uint4 (&k_raw)[kKeysInFlight], uint4 (&v_raw)[kKeysInFlight]) {
#pragma unroll
  for (int u = 0; u < kKeysInFlight; ++u) {
    const Index key = first + u * kGroups;
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
}

// The online softmax over one step's keys. Every lane of the warp calls it (the score's shuffles).
template <typename T, int kKeysInFlight, AttentionFault kFault, typename Index>
__device__ __forceinline__ void consume_step(const float (&query)[8], Index first, Index end,
                                             const uint4 (&k_raw)[kKeysInFlight], const uint4 (&v_raw)[kKeysInFlight],
                                             GroupState& st) {
  float score[kKeysInFlight];
  float step_max = st.max_score;
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
    const float rescale = weight(st.max_score, step_max);
    st.sum *= rescale;
#pragma unroll
    for (float& a : st.acc) a *= rescale;
  }
  st.max_score = step_max;
#pragma unroll
  for (int u = 0; u < kKeysInFlight; ++u) {
    const float p = weight(score[u], st.max_score);
    if (p == 0.0f) continue;  // a key past the end: its V was not loaded
    float vf[8];
    unpack8<T>(v_raw[u], vf);
    st.sum += p;
#pragma unroll
    for (int i = 0; i < 8; ++i) st.acc[i] += p * vf[i];
  }
}

// One group's online softmax over keys [begin, end) of one (batch, head): `keys` and `values` point at the
// head's cache, already offset to the lane's 16 bytes. The same trip count for every lane of the block.
// Pipelined: the next step's loads are issued before this step's arithmetic, so a warp always has loads
// in flight (without it, a warp's loads go out in bursts, and warps that start together stay in step).
// Index: the key index type, std::int64_t in the gridded versions (v1..v4 as first measured), int in the
// balanced ones (the 64-bit arithmetic of a run that spans heads cost v5 spills at 64 registers).
template <typename T, int kKeysInFlight, bool kStreaming, bool kPipelined, AttentionFault kFault, typename Index>
__device__ __forceinline__ void accumulate_keys(const uint4* keys, const uint4* values, const float (&query)[8],
                                                Index begin, Index end, int group, GroupState& st) {
  constexpr int kKeysPerStep = keys_per_step(kKeysInFlight);
  if constexpr (kPipelined) {
    uint4 k_next[kKeysInFlight], v_next[kKeysInFlight];
    if (begin < end) load_step<kKeysInFlight, kStreaming>(keys, values, begin + group, end, k_next, v_next);
    for (Index step = begin; step < end; step += kKeysPerStep) {
      uint4 k_raw[kKeysInFlight], v_raw[kKeysInFlight];
#pragma unroll
      for (int u = 0; u < kKeysInFlight; ++u) k_raw[u] = k_next[u], v_raw[u] = v_next[u];
      if (step + kKeysPerStep < end)
        load_step<kKeysInFlight, kStreaming>(keys, values, step + kKeysPerStep + group, end, k_next, v_next);
      consume_step<T, kKeysInFlight, kFault>(query, step + group, end, k_raw, v_raw, st);
    }
  } else {
    for (Index step = begin; step < end; step += kKeysPerStep) {
      uint4 k_raw[kKeysInFlight], v_raw[kKeysInFlight];
      load_step<kKeysInFlight, kStreaming>(keys, values, step + group, end, k_raw, v_raw);
      consume_step<T, kKeysInFlight, kFault>(query, step + group, end, k_raw, v_raw, st);
    }
  }
}

// The block's partial for output dimension threadIdx.x (< kHeadDim): unnormalised output, max and sum.
struct BlockPartial {
  float max, sum, out;
};

// Merges the groups: every group's (max, sum) and its 64 outputs, through shared memory. Every thread of the
// block calls it; the result is meaningful for threads below kHeadDim. The caller syncs before the next use.
template <AttentionFault kFault>
__device__ __forceinline__ BlockPartial merge_groups(const GroupState& st, int group, int lane) {
  __shared__ Partial group_stats[kGroups];
  __shared__ float group_acc[kGroups][kHeadDim];
  if (lane == 0) group_stats[group] = {st.max_score, st.sum};
#pragma unroll
  for (int i = 0; i < 8; ++i) group_acc[group][lane * 8 + i] = st.acc[i];
  __syncthreads();
  BlockPartial b{-INFINITY, 0, 0};
  if (threadIdx.x >= kHeadDim) return b;
  // One thread per output dimension; each finds the block's max and sum itself (broadcast reads).
  for (int g = 0; g < kGroups; ++g) b.max = fmaxf(b.max, group_stats[g].max);
  for (int g = 0; g < kGroups; ++g) {
    const float w = merge_weight<kFault>(group_stats[g].max, b.max);
    b.sum += group_stats[g].sum * w;
    b.out += group_acc[g][threadIdx.x] * w;
  }
  return b;
}

// Threads below kHeadDim only. Publishes the block's partial at `partial`; the last of `count` blocks to
// arrive at `arrival` (threadFenceReduction: publish, then count) merges the `count` partials that start at
// `first_partial` into the output row `out`, and leaves the counter at zero for the next launch (graph
// replays included). The barriers are the first two warps' own (named barrier 1, 64 threads).
template <typename T, AttentionFault kFault>
__device__ __forceinline__ void publish_and_combine(const BlockPartial& b, float* partial, unsigned* arrival,
                                                    unsigned count, const float* first_partial, T* out) {
  partial[2 + threadIdx.x] = b.out;
  if (threadIdx.x == 0) partial[0] = b.max, partial[1] = b.sum;
  __threadfence();
  asm volatile("bar.sync 1, 64;\n" ::);  // every thread's part of the partial is published before the count
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(arrival, 1u) == count - 1;
  asm volatile("bar.sync 1, 64;\n" ::);
  if (!last) return;
  __threadfence();
  float m = -INFINITY, total = 0, sum_out = 0;
  for (unsigned sp = 0; sp < count; ++sp) m = fmaxf(m, __ldcg(first_partial + sp * kPartialFloats));
  for (unsigned sp = 0; sp < count; ++sp) {
    const float w = merge_weight<kFault>(__ldcg(first_partial + sp * kPartialFloats), m);
    total += __ldcg(first_partial + sp * kPartialFloats + 1) * w;
    sum_out += __ldcg(first_partial + sp * kPartialFloats + 2 + threadIdx.x) * w;
  }
  out[threadIdx.x] = from_float<T>(sum_out / total);
  if (threadIdx.x == 0) *arrival = 0;
}

template <typename T>
__device__ __forceinline__ void load_query(const T* q, std::int64_t bh, int lane, float scale_log2, float (&query)[8]) {
  unpack8<T>(reinterpret_cast<const uint4*>(q + bh * kHeadDim)[lane], query);
#pragma unroll
  for (float& x : query) x *= scale_log2;
}

// v1..v4: a grid of (splits, batch x heads); a block reads one split of one (batch, head).
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
  load_query(q, bh, lane, scale_log2, query);
  const uint4* keys = reinterpret_cast<const uint4*>(k + bh * kv_len * kHeadDim) + lane;
  const uint4* values = reinterpret_cast<const uint4*>(v + bh * kv_len * kHeadDim) + lane;
  GroupState st;
  accumulate_keys<T, kKeysInFlight, kStreaming, false, kFault>(keys, values, query, begin, end, group, st);
  const BlockPartial b = merge_groups<kFault>(st, group, lane);
  if (threadIdx.x >= kHeadDim) return;
  if (splits == 1) {
    o[bh * kHeadDim + threadIdx.x] = from_float<T>(b.out / b.sum);
    return;
  }
  publish_and_combine<T, kFault>(b, partials + (bh * splits + split) * kPartialFloats, arrivals + bh, unsigned(splits),
                                 partials + bh * splits * kPartialFloats, o + bh * kHeadDim);
}

// Balanced versions, every thread of the block: merges the groups' part of (batch, head) `bh` that `block`'s
// run holds, and writes the output row if the run holds all of the head, else publishes the block's partial
// and, if it is the last of the head's blocks to arrive, combines them. The caller syncs before the groups'
// shared memory is used again.
template <typename T, AttentionFault kFault>
__device__ __forceinline__ void finish_head_of_run(const GroupState& st, int group, int lane, std::int64_t block,
                                                   std::int64_t bh, std::int64_t kv_len, std::int64_t keys_per_block,
                                                   float* partials, unsigned* arrivals, T* o) {
  const BlockPartial b = merge_groups<kFault>(st, group, lane);
  if (threadIdx.x >= kHeadDim) return;
  const std::int64_t head_begin = bh * kv_len;
  const std::int64_t first_block = head_begin / keys_per_block;
  const std::int64_t last_block = (head_begin + kv_len - 1) / keys_per_block;
  if (first_block == last_block) {
    o[bh * kHeadDim + threadIdx.x] = from_float<T>(b.out / b.sum);
    return;
  }
  publish_and_combine<T, kFault>(b, partials + (block + bh) * kPartialFloats, arrivals + bh,
                                 unsigned(last_block - first_block + 1), partials + (first_block + bh) * kPartialFloats,
                                 o + bh * kHeadDim);
}

// v5: the whole cache, (batch, head) after (batch, head), cut into equal runs of keys, one per block, and
// as many blocks as the GPU holds at once (stream-K's balance, applied to decode): one wave, every block the
// same bytes, no tail of a last partial wave and no block started twice per SM. A block's run may cross
// from one (batch, head) into the next; it writes one partial per (batch, head) it touches, at index
// block + bh (unique: a later block can only touch a later or the same head), so the blocks of one head
// have consecutive partials.
template <typename T, int kKeysInFlight, int kBlocksPerSm, bool kPipelined, AttentionFault kFault>
__global__ __launch_bounds__(kDecodeThreads, kBlocksPerSm) void balanced_split_kv_kernel(
    const T* q, const T* k, const T* v, T* o, std::int64_t kv_len, std::int64_t keys_per_block, std::int64_t total_keys,
    std::int64_t keys_read, float scale_log2, float* partials, unsigned* arrivals) {
  const std::int64_t block = blockIdx.x;
  const int group = threadIdx.x / kLanesPerKey, lane = threadIdx.x % kLanesPerKey;
  const std::int64_t run_begin = block * keys_per_block;
  const std::int64_t run_end = run_begin + keys_per_block < total_keys ? run_begin + keys_per_block : total_keys;
  for (std::int64_t bh = run_begin / kv_len; bh * kv_len < run_end; ++bh) {
    const std::int64_t head_begin = bh * kv_len;
    const int begin = int((run_begin > head_begin ? run_begin : head_begin) - head_begin);
    const int end = int((run_end < head_begin + kv_len ? run_end : head_begin + kv_len) - head_begin);
    float query[8];
    load_query(q, bh, lane, scale_log2, query);
    const uint4* keys = reinterpret_cast<const uint4*>(k + head_begin * kHeadDim) + lane;
    const uint4* values = reinterpret_cast<const uint4*>(v + head_begin * kHeadDim) + lane;
    GroupState st;
    accumulate_keys<T, kKeysInFlight, false, kPipelined, kFault>(keys, values, query, begin,
                                                                 end < keys_read ? end : int(keys_read), group, st);
    finish_head_of_run<T, kFault>(st, group, lane, block, bh, kv_len, keys_per_block, partials, arrivals, o);
    __syncthreads();  // the groups' shared memory is read before the next head writes it
  }
}

// ---- v9..v11: balanced runs staged through shared memory by the bulk-copy engine ----
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(std::uint64_t* barrier) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(barrier)) : "memory");
}

// Thread 0 only: `bytes` from `k_rows` and from `v_rows` into the stage's halves; the stage's barrier
// completes its phase when both have landed.
__device__ __forceinline__ void issue_stage(std::uint64_t* barrier, void* k_stage, void* v_stage, const void* k_rows,
                                            const void* v_rows, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned bar = shared_address(barrier);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(2 * bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(k_stage)),
               "l"(k_rows), "r"(bytes), "r"(bar)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(v_stage)),
               "l"(v_rows), "r"(bytes), "r"(bar)
               : "memory");
#else
  (void)barrier, (void)k_stage, (void)v_stage, (void)k_rows, (void)v_rows, (void)bytes;
  __trap();  // the bulk-copy versions need sm_90 (cp.async.bulk)
#endif
}

__device__ __forceinline__ void barrier_wait(std::uint64_t* barrier, unsigned parity) {
  const unsigned bar = shared_address(barrier);
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred ready;\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        " selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// The chunks of a run, in order: at most kChunkKeys keys each, never across a (batch, head).
struct ChunkCursor {
  std::int64_t at, run_end, kv_len;
  int chunk_keys;
  __device__ std::int64_t chunk_end() const {
    const std::int64_t head_end = (at / kv_len + 1) * kv_len;
    std::int64_t e = at + chunk_keys;
    if (e > head_end) e = head_end;
    return e < run_end ? e : run_end;
  }
  __device__ bool more() const { return at < run_end; }
  __device__ void advance() { at = chunk_end(); }
};

template <typename T, int kKeysInFlight, int kStages, int kBlocksPerSm, AttentionFault kFault>
__global__ __launch_bounds__(kDecodeThreads, kBlocksPerSm) void bulk_split_kv_kernel(
    const T* q, const T* k, const T* v, T* o, std::int64_t kv_len, std::int64_t keys_per_block, std::int64_t total_keys,
    std::int64_t keys_read, float scale_log2, float* partials, unsigned* arrivals) {
  constexpr int kChunkKeys = keys_per_step(kKeysInFlight);
  constexpr int kRowBytes = kHeadDim * int(sizeof(T));
  extern __shared__ __align__(128) unsigned char stage_memory[];
  // [stage][K rows, then V rows]
  auto k_stage = [&](int s) { return stage_memory + std::size_t(s) * 2 * kChunkKeys * kRowBytes; };
  auto v_stage = [&](int s) { return k_stage(s) + kChunkKeys * kRowBytes; };
  __shared__ __align__(8) std::uint64_t full[kStages];

  const std::int64_t block = blockIdx.x;
  const int group = threadIdx.x / kLanesPerKey, lane = threadIdx.x % kLanesPerKey;
  const std::int64_t run_begin = block * keys_per_block;
  const std::int64_t run_end = run_begin + keys_per_block < total_keys ? run_begin + keys_per_block : total_keys;

  ChunkCursor producer{run_begin, run_end, kv_len, kChunkKeys};
  auto issue_next = [&](int s) {
    const std::int64_t first = producer.at, end = producer.chunk_end();
    issue_stage(&full[s], k_stage(s), v_stage(s), k + first * kHeadDim, v + first * kHeadDim,
                unsigned(end - first) * kRowBytes);
    producer.advance();
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) barrier_init(&full[s]);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int s = 0; s < kStages && producer.more(); ++s) issue_next(s);
  }
  __syncthreads();

  ChunkCursor consumer{run_begin, run_end, kv_len, kChunkKeys};
  std::int64_t bh = run_begin / kv_len;
  float query[8];
  load_query(q, bh, lane, scale_log2, query);
  GroupState st;
  for (int chunk = 0; consumer.more(); ++chunk) {
    const int s = chunk % kStages;
    barrier_wait(&full[s], unsigned(chunk / kStages) & 1u);
    const std::int64_t first = consumer.at, end = consumer.chunk_end();
    const std::int64_t head_begin = bh * kv_len;
    // Keys of the chunk the kernel reads (the fault leaves out the head's last ones).
    const std::int64_t read_end = end < head_begin + keys_read ? end : head_begin + keys_read;
    const int valid = read_end > first ? int(read_end - first) : 0;
    uint4 k_raw[kKeysInFlight], v_raw[kKeysInFlight];
    const auto* ks = reinterpret_cast<const uint4*>(k_stage(s)) + lane;
    const auto* vs = reinterpret_cast<const uint4*>(v_stage(s)) + lane;
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      const int key = group + u * kGroups;
      k_raw[u] = ks[key * (kHeadDim / 8)];
      v_raw[u] = vs[key * (kHeadDim / 8)];
    }
    consume_step<T, kKeysInFlight, kFault>(query, group, valid, k_raw, v_raw, st);
    consumer.advance();
    const bool head_done = end == head_begin + kv_len || end == run_end;
    if (head_done) {
      finish_head_of_run<T, kFault>(st, group, lane, block, bh, kv_len, keys_per_block, partials, arrivals, o);
      st = GroupState{};
      if (consumer.more()) {
        ++bh;
        load_query(q, bh, lane, scale_log2, query);
      }
    }
    // Every thread has read stage s (and the groups' shared memory) before it is refilled.
    __syncthreads();
    if (threadIdx.x == 0 && producer.more()) {
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      issue_next(s);
    }
  }
}

// The dynamic shared memory of bulk_split_kv_kernel<T, kKeysInFlight, kStages, ...>: each stage a chunk's K
// rows, then its V rows, of kHeadDim elements of T (the kernel's kRowBytes).
template <typename T, int kKeysInFlight, int kStages>
constexpr std::size_t bulk_stage_bytes() {
  return std::size_t(kStages) * 2 * keys_per_step(kKeysInFlight) * kHeadDim * sizeof(T);
}

std::int64_t heads_total(const AttentionShape& shape) { return shape.batch * shape.heads; }

void check_decode_shape(const AttentionShape& shape) {
  if (shape.head_dim != kHeadDim) throw std::invalid_argument("split_kv decode takes head_dim 64 only");
  if (shape.q_len != 1) throw std::invalid_argument("split_kv decode takes one query per sequence");
  if (shape.kv_len < 1) throw std::invalid_argument("split_kv decode needs a KV cache");
  // The balanced versions index a head's keys in an int and form key * (head_dim / 8) and first + u * 16
  // in it: keep both, with a step's worth of keys past the end, below INT_MAX.
  if (shape.kv_len > INT_MAX / (kHeadDim / 8) - 64)
    throw std::invalid_argument("split_kv decode indexes a head's keys in an int: at most " +
                                std::to_string(INT_MAX / (kHeadDim / 8) - 64) + " keys");
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
  SplitKvPlan plan;
  plan.keys_in_flight = chosen->keys_in_flight;
  plan.streaming_loads = chosen->streaming_loads;
  plan.pipelined = chosen->pipelined;
  plan.bulk_stages = chosen->bulk_stages;
  if (chosen->balanced_blocks_per_sm > 0) {
    // One run per block the GPU holds at once, but no run shorter than one step of the block. Staged runs
    // are whole stages (so their stages start on a stage boundary of the cache).
    const std::int64_t total = heads_total(shape) * shape.kv_len;
    plan.balanced_blocks_per_sm = chosen->balanced_blocks_per_sm;
    const std::int64_t wanted_blocks = std::int64_t(sm_count) * plan.balanced_blocks_per_sm;
    plan.split_len = std::max((total + wanted_blocks - 1) / wanted_blocks, step);
    if (plan.bulk_stages > 0) plan.split_len = (plan.split_len + step - 1) / step * step;
    plan.blocks = (total + plan.split_len - 1) / plan.split_len;
    plan.splits = 0;
    plan.workspace_bytes = std::size_t(plan.blocks + heads_total(shape)) * kPartialFloats * sizeof(float) +
                           std::size_t(heads_total(shape)) * sizeof(unsigned);
    return plan;
  }
  // Enough blocks for 8 per SM (batch 1 still spreads over the GPU), and splits of at most the version's
  // longest so that the last blocks to finish are short; but no split shorter than one step of the block.
  const std::int64_t kLongestSplit = std::max(chosen->longest_split, step);
  const std::int64_t wanted_blocks = std::int64_t(sm_count) * 8;
  const std::int64_t most_splits = (shape.kv_len + step - 1) / step;
  const std::int64_t splits = std::clamp<std::int64_t>(
      std::max((wanted_blocks + heads_total(shape) - 1) / heads_total(shape),
               (shape.kv_len + kLongestSplit - 1) / kLongestSplit),
      1, most_splits);
  plan.split_len = (most_splits + splits - 1) / splits * step;
  plan.splits = int((shape.kv_len + plan.split_len - 1) / plan.split_len);
  plan.blocks = plan.splits * heads_total(shape);
  plan.workspace_bytes = std::size_t(heads_total(shape)) * (plan.splits * kPartialFloats * sizeof(float) + sizeof(unsigned));
  return plan;
}

namespace {
// The counters follow the partials: per (batch, head) splits of them, or blocks + heads in all (balanced).
unsigned* arrivals_of(const SplitKvPlan& plan, const AttentionShape& shape, void* workspace) {
  const std::int64_t partial_count =
      plan.balanced_blocks_per_sm > 0 ? plan.blocks + heads_total(shape) : heads_total(shape) * plan.splits;
  return reinterpret_cast<unsigned*>(static_cast<float*>(workspace) + partial_count * kPartialFloats);
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
  float* partials = static_cast<float*>(workspace);
  unsigned* arrivals = arrivals_of(plan, shape, workspace);
  dispatch_type(type, [&]<typename T>() {
    const auto* qt = static_cast<const T*>(q);
    const auto* kt = static_cast<const T*>(k);
    const auto* vt = static_cast<const T*>(v);
    auto* ot = static_cast<T*>(o);
    auto balanced = [&]<int kKeysInFlight, int kBlocksPerSm, bool kPipelined, AttentionFault kFault>() {
      balanced_split_kv_kernel<T, kKeysInFlight, kBlocksPerSm, kPipelined, kFault>
          <<<unsigned(plan.blocks), kDecodeThreads, 0, stream>>>(qt, kt, vt, ot, shape.kv_len, plan.split_len,
                                                                 heads_total(shape) * shape.kv_len, keys_read,
                                                                 scale_log2, partials, arrivals);
    };
    auto bulk = [&]<int kKeysInFlight, int kStages, int kBlocksPerSm, AttentionFault kFault>() {
      auto kernel = bulk_split_kv_kernel<T, kKeysInFlight, kStages, kBlocksPerSm, kFault>;
      constexpr std::size_t kBytes = bulk_stage_bytes<T, kKeysInFlight, kStages>();
      // The stages exceed the default 48 KB, and kBlocksPerSm blocks of them need the largest shared-memory
      // carveout; both belong to the context, so both are set at every launch.
      roofbench::cuda::allow_dynamic_shared_memory(kernel, kBytes);
      ROOFBENCH_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
      kernel<<<unsigned(plan.blocks), kDecodeThreads, kBytes, stream>>>(qt, kt, vt, ot, shape.kv_len, plan.split_len,
                                                                      heads_total(shape) * shape.kv_len, keys_read,
                                                                      scale_log2, partials, arrivals);
    };
    auto gridded = [&]<int kKeysInFlight, AttentionFault kFault>() {
      auto kernel = plan.streaming_loads ? split_kv_decode_kernel<T, kKeysInFlight, true, kFault>
                                         : split_kv_decode_kernel<T, kKeysInFlight, false, kFault>;
      const dim3 grid(unsigned(plan.splits), unsigned(heads_total(shape)));
      kernel<<<grid, kDecodeThreads, 0, stream>>>(
          qt, kt, vt, ot, shape.kv_len, plan.split_len, keys_read, scale_log2, partials, arrivals);
    };
    auto go = [&]<AttentionFault kFault>() {
      const int keys = plan.keys_in_flight, blocks = plan.balanced_blocks_per_sm, stages = plan.bulk_stages;
      if (stages > 0) {
        if (keys == 4 && stages == 4 && blocks == 3) bulk.template operator()<4, 4, 3, kFault>();
        else if (keys == 2 && stages == 6 && blocks == 4) bulk.template operator()<2, 6, 4, kFault>();
        else if (keys == 4 && stages == 3 && blocks == 4) bulk.template operator()<4, 3, 4, kFault>();
        else throw std::invalid_argument("split_kv decode: no kernel for this plan");
      } else if (blocks == 0 && keys == 4 && !plan.pipelined) gridded.template operator()<4, kFault>();
      else if (blocks == 0 && keys == 8 && !plan.pipelined) gridded.template operator()<8, kFault>();
      else if (keys == 4 && blocks == 8 && !plan.pipelined) balanced.template operator()<4, 8, false, kFault>();
      else if (keys == 8 && blocks == 4 && !plan.pipelined) balanced.template operator()<8, 4, false, kFault>();
      else if (keys == 4 && blocks == 4 && plan.pipelined) balanced.template operator()<4, 4, true, kFault>();
      else if (keys == 2 && blocks == 8 && plan.pipelined) balanced.template operator()<2, 8, true, kFault>();
      else throw std::invalid_argument("split_kv decode: no kernel for this plan");
    };
    if (fault == AttentionFault::no_rescale) go.template operator()<AttentionFault::no_rescale>();
    else go.template operator()<AttentionFault::none>();
  });
  ROOFBENCH_CUDA(cudaGetLastError());
}

}  // namespace roofbench::kernels
