// Fused prefill attention v4 to v16 in FlashAttention-3's form, on Hopper's own instructions (sm_90a;
// compiled for that target alone, kernels/hopper/README.md). A block per (128 queries, batch x head) of three
// warp groups (v8 at d 64: 192 queries, four; v9: one block an SM walking many such work items, below):
//   - the producer (warp group 0, its registers given up by setmaxnreg) has one thread load Q (v9: once a
//     work item) and the K and V tiles of kBlockN keys by TMA into a ring of kStages shared-memory stages,
//     each tile completing on its stage's full barrier (transaction bytes) and released by its empty barrier
//     (every consumer thread's arrival); K and V have barriers of their own, so S can start before V has
//     landed;
//   - two consumer warp groups (setmaxnreg_inc; v8 at d 64, three) of 64 query rows each: S = Q K^T by wgmma
//     with both operands in shared memory (K-major, 128-byte swizzle as TMA writes it), the online softmax in
//     registers (log2 units, ex2.approx), then O += P V by wgmma with P from registers (S's accumulator is,
//     element for element, P's A fragment) and V read MN-major in place (the transpose bit; no transposed
//     copy).
// Where the registers allow it (Config::kOverlap) each consumer overlaps the tensor cores with its softmax:
// tile i's S is issued, then tile i - 1's P V, and the softmax of tile i runs while P V is in flight (FA3's
// intra-warpgroup overlap); elsewhere each tile's steps run in turn. How many registers a consumer has is
// Config::kWideConsumers' matter (below): v6's have the 232 of setmaxnreg, and so overlap at d 128 with
// 128-key tiles, which v4's cannot. Causal blocks walk their tiles from the diagonal down, so only the first
// tiles are masked, and the heaviest blocks are issued first. The versions' tiles, stages and shared memory
// are listed above with_config.
//
// Persistent (Config::kPersistent, v9 to v16): one block an SM takes work items (query block, batch x head)
// in a fixed order, heaviest first, so that each block's start (barriers, register split, its first tiles'
// load) is paid once, and the next item's K and Q load while the consumers finish the last tile and store O. The K
// and V ring runs on across items; Q has an empty barrier of its own, released by the consumers after an
// item's last scores. At B8 H12 T1024 causal an item walks 4.5 tiles on average (1 to 8), so a start's latency
// is a large share of one block's work.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "attention_common.cuh"
#include "fused_attention_sm90a.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/hopper.cuh"
#include "roofbench/hopper_host.hpp"
#include "roofbench/kernels/persistent_schedule.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::kernels::sm90a {
namespace {

namespace hw = roofbench::hopper;
using attention_detail::pack2;

constexpr int kBoxCols = 64;            // 16-bit elements in a 128-byte swizzled row
constexpr std::uint32_t kAtomBytes = 1024;  // the swizzle's repeat: boxes start 1024-byte aligned

// A version's shape at one head dim: kConsumerGroups warp groups of 64 query rows (kBlockM queries a block,
// behind the producer's warp group), kBlockN keys per K or V tile, a ring of kStages stages. Each tile is
// kD / 64 boxes of its rows x 64 columns (128-byte rows), a box apart.
//
// kBlocksPerSm: the blocks an SM holds at once, which the registers decide: 65,536 shared by kThreads x
// kBlocksPerSm threads at entry (kEntryRegisters), then moved by setmaxnreg from the producer (which keeps
// kProducerRegisters) to the consumers (kConsumerRegisters). One block of two consumer groups: 2 x 128 x 232
// + 128 x 40 = 64,512. Two blocks (v7 at d 64): 80 each at entry, 104 for the consumers and 24 for the
// producer, so that one block's tensor cores run while the other's softmax does. Three consumer groups (v8
// at d 64): 128 at entry, 160 for the consumers, 24 for the producer.
//
// kWideConsumers: whether ptxas may allocate the consumers the kConsumerRegisters that setmaxnreg gives them.
// ptxas (CUDA 13.0) does so only when the consumer branch holds no inline trap: wait_or_trap's time-out trap,
// inline (v4, v5), keeps the whole kernel within the 168 registers that 384 threads leave each at entry
// (d 128 overlapped with 128-key tiles: C7512, wgmma serialized, and 216 bytes of spills at any setmaxnreg);
// called out of line (hw::mbarrier_wait_timed_out, v6) it lets the consumers have their 232 (the same form compiles spill-free
// at setmaxnreg 200 and spills 56 bytes at 184). v4 and v5 keep the inline trap, so their code stays as timed.
template <int kD_, int kBlockN_, int kStages_, Form kForm = Form{}>
struct Config {
  static constexpr int kD = kD_, kBlockN = kBlockN_, kStages = kStages_, kBoxes = kD / kBoxCols;
  // kHeadMajor: persistent items ordered head by head (item_walk). kRescaleUnderScores: O rescaled while the
  // next tile's scores are in flight (overlapped_tile). kRawMaxima: a row's maximum taken over the raw scores,
  // then scaled once (Consumer::softmax). kSkipUnitRescale: a warp whose rows' factors are all exactly 1 leaves
  // O as it is (rescale_before_pv). kStoreUnderScores: a work item's O stored while the next item's first
  // scores are in flight (consume_items_storing_under_scores). Which versions set which: kForms.
  static constexpr bool kWideConsumers = kForm.wide_consumers, kPersistent = kForm.persistent,
                        kPingPong = kForm.ping_pong, kHeadMajor = kForm.head_major,
                        kRescaleUnderScores = kForm.rescale_under_scores, kRawMaxima = kForm.raw_maxima,
                        kSkipUnitRescale = kForm.skip_unit_rescale, kStoreUnderScores = kForm.store_under_scores;
  static constexpr int kBlocksPerSm = kForm.blocks_per_sm, kConsumerGroups = kForm.consumer_groups;
  static constexpr int kBlockM = 64 * kConsumerGroups;             // queries per block
  static constexpr int kConsumerThreads = 128 * kConsumerGroups;   // the empty barriers' arrivals
  static constexpr int kThreads = 128 + kConsumerThreads;          // the producer warp group, then the consumers
  static constexpr bool kClassic = kBlocksPerSm == 1 && kConsumerGroups == 2;  // v4-v6's and v9-v16's split
  static constexpr int kEntryRegisters = 65536 / (kThreads * kBlocksPerSm) / 8 * 8;
  static constexpr int kProducerRegisters = kClassic ? 40 : 24;
  static constexpr int kConsumerRegisters =
      kClassic ? 232 : (kEntryRegisters * kThreads - kProducerRegisters * 128) / kConsumerThreads / 8 * 8;
  static constexpr std::uint32_t kQBoxBytes = kBlockM * 128, kKvBoxBytes = kBlockN * 128;
  // A sequence (a multiple of 128) need not be a multiple of kBlockM: the last block's rows past it are
  // computed from the next head's queries and keys, or TMA's zeros past the tensor, never stored, and their
  // keys past the sequence are masked for the rows that are (causal), or never walked (full).
  static constexpr bool kPartialBlocks = 128 % kBlockM != 0;
  // Whether a consumer can hold tile i's scores beside tile i - 1's P and O: those arrays, kD / 2 + kBlockN /
  // 2 + kBlockN / 4 registers, must leave 40 for the rest within what the consumer is allocated
  // (kEntryRegisters or kConsumerRegisters, above): 128 at d 64 with 128 keys; 160 at d 128 with 128 keys,
  // which overlaps only with wide consumers (v6) and runs the serial form otherwise (v4).
  static constexpr bool kOverlap =
      kD / 2 + kBlockN * 3 / 4 <= (kWideConsumers ? kConsumerRegisters : kEntryRegisters) - 40;
  static_assert(kBlockM % kBlockN == 0 && kBlockN % 16 == 0);
  static_assert(!kPingPong || (kOverlap && kConsumerGroups == 2), "ping-pong: turns between two overlapped groups");
  static_assert(!kHeadMajor || kPersistent, "an order of items is a persistent version's");
  static_assert(!kRescaleUnderScores || (kOverlap && !kPingPong), "a rescale under the scores: overlapped, no turns");
  static_assert(!kSkipUnitRescale || kRescaleUnderScores, "the skipped rescale is the one under the scores");
  static_assert(!kStoreUnderScores || (kPersistent && kRescaleUnderScores), "a store under the next item's scores");
  static_assert(kProducerRegisters * 128 + kConsumerRegisters * kConsumerThreads <= kEntryRegisters * kThreads);
};

template <typename Cfg>
struct Smem {
  unsigned char q[Cfg::kBoxes][Cfg::kQBoxBytes];
  unsigned char k[Cfg::kStages][Cfg::kBoxes][Cfg::kKvBoxBytes];
  unsigned char v[Cfg::kStages][Cfg::kBoxes][Cfg::kKvBoxBytes];
  std::uint64_t q_full, k_full[Cfg::kStages], k_empty[Cfg::kStages], v_full[Cfg::kStages], v_empty[Cfg::kStages];
  std::uint64_t q_empty;  // persistent versions: Q's buffer free for the next work item
  std::uint64_t turn[2];  // ping-pong: consumer group g's turn to issue products (the other group's arrivals)
};
template <typename Cfg>
constexpr std::size_t kSmemBytes = sizeof(Smem<Cfg>) + kAtomBytes;  // room to align the start

// What every thread knows of the launch; the fault flags make the gate's deliberately broken kernels.
struct Args {
  void* o;
  int seq_len;
  float scale_log2;  // log2(e) / sqrt(d)
  bool causal;
  bool mask;        // mask the diagonal tile (causal, unless the fault drops it)
  bool no_rescale;  // fault: the accumulated output is not rescaled when a row's maximum rises
  int skip_tiles;   // fault: tiles left out at the end of each block's walk (1) or none (0)
  int m_blocks;     // query blocks per batch x head
  int work_items;   // m_blocks x batch x heads (persistent versions)
};

// A work item: the query block x of a batch x head's (heaviest first under the causal mask), its first tile of
// kBlockN keys and how many it walks: tiles first, first - 1, ..., first - count + 1. Under the causal mask the
// first kBlockM / kBlockN tiles are the diagonal ones, masked.
template <typename Cfg>
struct Walk {
  int m_block, head, first, count;
  __device__ Walk(const Args& a, int x, int head_) : head(head_) {
    m_block = a.causal ? a.m_blocks - 1 - x : x;
    first = a.causal ? (m_block + 1) * (Cfg::kBlockM / Cfg::kBlockN) - 1 : a.seq_len / Cfg::kBlockN - 1;
    count = max(first + 1 - a.skip_tiles, 1);
  }
};

// A block's one work item (the non-persistent versions): query block blockIdx.x of batch x head blockIdx.y.
template <typename Cfg>
__device__ __forceinline__ Walk<Cfg> block_walk(const Args& a) {
  return Walk<Cfg>(a, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y));
}

// A persistent block's n-th work item, or -1 past the last. Items are ordered (item_walk, below) and dealt in a
// snake (persistent_schedule.hpp:
// on 132 SMs at B8 H12 T1024 causal the longest block walks 3% over the mean; in rounds taken in the same
// order, 15%).
__device__ __forceinline__ int work_item(const Args& a, int n) {
  return snake_work_item(n, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x), a.work_items);
}

// Item `item`'s walk. Query block by query block (v9, v10): every head's heaviest first, so the blocks running
// at once work on as many heads. Head by head (Config::kHeadMajor, v11 to v16): each head's query blocks, heaviest
// first, before the next head's, so the blocks running at once share a few heads' K and V in the L2 (about
// 5 heads at B4 H16 T4096 on 132 SMs, against 64), as a grid of one head's query blocks after another does;
// the snake still balances the walks (the longest block 3% over the mean there).
template <typename Cfg>
__device__ __forceinline__ Walk<Cfg> item_walk(const Args& a, int item) {
  if constexpr (Cfg::kHeadMajor) return Walk<Cfg>(a, item % a.m_blocks, item / a.m_blocks);
  const int heads = a.work_items / a.m_blocks;
  return Walk<Cfg>(a, item / heads, item % heads);
}

template <typename Smem>
__device__ inline Smem& aligned_smem(unsigned char* raw) {
  const std::uint32_t base = hw::shared_address(raw);
  return *reinterpret_cast<Smem*>(raw + (kAtomBytes - base % kAtomBytes) % kAtomBytes);
}

// Every wait of a Cfg's kernel: the trap out of line where its consumers raise their registers with setmaxnreg
// (Cfg::kWideConsumers).
template <typename Cfg>
__device__ __forceinline__ void wait_or_trap(std::uint64_t* bar, std::uint32_t parity) {
  hw::mbarrier_wait_or_trap<Cfg::kWideConsumers>(bar, parity);
}

// One tile (its kBoxes boxes of kBytes) of the map's rows from `row` into `boxes`, completing on `bar`.
template <int kBoxes, std::uint32_t kBytes>
__device__ __forceinline__ void load_tile(unsigned char (&boxes)[kBoxes][kBytes], const CUtensorMap* map,
                                          std::uint64_t* bar, int row) {
  hw::mbarrier_arrive_expect_tx(bar, kBoxes * kBytes);
#pragma unroll
  for (int b = 0; b < kBoxes; ++b) hw::tma_load_2d(boxes[b], map, bar, row, b * kBoxCols);
}

// The producer's one thread for one work item: Q, then K and V of each tile of the walk once their stage is
// free. `ring`: the K and V tiles loaded before this item (the ring's position). A persistent block's n-th
// item loads its Q after its first K, once the consumers have released the previous item's Q (item 0 at
// once): the K stage is free first, since the consumers release Q after the last scores and V's stage after
// the P V before them.
template <typename Cfg>
__device__ __forceinline__ void produce_walk(Smem<Cfg>& sm, const CUtensorMap* q_map, const CUtensorMap* k_map,
                                             const CUtensorMap* v_map, const Args& a, const Walk<Cfg>& walk, int ring,
                                             int n) {
  const int head_row = walk.head * a.seq_len, q_row = head_row + walk.m_block * Cfg::kBlockM;
  if constexpr (!Cfg::kPersistent) load_tile(sm.q, q_map, &sm.q_full, q_row);
  for (int i = 0; i < walk.count; ++i) {
    const int slot = ring + i, stage = slot % Cfg::kStages, row = head_row + (walk.first - i) * Cfg::kBlockN;
    const std::uint32_t free_parity = ((slot / Cfg::kStages) & 1) ^ 1;  // a fresh barrier passes parity 1
    wait_or_trap<Cfg>(&sm.k_empty[stage], free_parity);
    load_tile(sm.k[stage], k_map, &sm.k_full[stage], row);
    if constexpr (Cfg::kPersistent)
      if (i == 0) {
        wait_or_trap<Cfg>(&sm.q_empty, (n & 1) ^ 1);
        load_tile(sm.q, q_map, &sm.q_full, q_row);
      }
    wait_or_trap<Cfg>(&sm.v_empty[stage], free_parity);
    load_tile(sm.v[stage], v_map, &sm.v_full[stage], row);
  }
}

// The producer's one thread: the block's work item, or a persistent block's items in turn.
template <typename Cfg>
__device__ __forceinline__ void produce(Smem<Cfg>& sm, const CUtensorMap* q_map, const CUtensorMap* k_map,
                                        const CUtensorMap* v_map, const Args& a) {
  if constexpr (Cfg::kPersistent) {
    int ring = 0;
    for (int n = 0, item = work_item(a, 0); item >= 0; item = work_item(a, ++n)) {
      const Walk<Cfg> walk = item_walk<Cfg>(a, item);
      produce_walk(sm, q_map, k_map, v_map, a, walk, ring, n);
      ring += walk.count;
    }
  } else {
    produce_walk(sm, q_map, k_map, v_map, a, block_walk<Cfg>(a), 0, 0);
  }
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A consumer warp group's state: its 64 rows' output accumulator (m64nD), the scores of the current tile
// (m64nkBlockN) and their probabilities as the A fragments of P V's kBlockN / 16 k16 steps. Thread (warp w, lane 4 g +
// t) holds rows 16 w + g (h = 0) and 16 w + g + 8 (h = 1); row_max in log2 units, row_sum this thread's
// part of the row's sum (its columns; the quad's four parts are added at the end).
template <typename T, typename Cfg>
struct Consumer {
  static constexpr int kD = Cfg::kD, kBlockN = Cfg::kBlockN;
  using Tile = unsigned char[Cfg::kBoxes][Cfg::kKvBoxBytes];
  float o[kD / 2];
  float s[kBlockN / 2];
  std::uint32_t p[kBlockN / 16][4];
  float row_max[2], row_sum[2];
  float pending_rescale[2];  // Cfg::kRescaleUnderScores: the last softmax's factors, not yet applied to O
  int group;  // 0 to kConsumerGroups - 1: rows 64 group .. of the block
  int ring = 0;   // the K and V tiles consumed before this work item: tile i's stage is (ring + i) % kStages
  int count = 0;  // the tiles this work item walks
  int turns = 0;  // ping-pong: the turns this group has taken (its turn barrier's phase parity)

  __device__ __forceinline__ int stage(int i) const { return (ring + i) % Cfg::kStages; }
  __device__ __forceinline__ std::uint32_t full_parity(int i) const { return ((ring + i) / Cfg::kStages) & 1; }

  // A work item's start: O, the maxima and the sums cleared.
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
    row_max[0] = row_max[1] = -INFINITY;
    row_sum[0] = row_sum[1] = 0.0f;
  }

  // S = Q K^T for the K tile in `k` (issued and committed, not waited for).
  __device__ __forceinline__ void issue_scores(const Smem<Cfg>& sm, const Tile& k) {
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      const std::uint64_t qa = hw::descriptor_k_major_sw128(sm.q[ks / 4] + group * 64 * 128, ks % 4);
      hw::wgmma_ss<T>(s, qa, hw::descriptor_k_major_sw128(k[ks / 4], ks % 4), ks > 0 ? 1u : 0u);
    }
    hw::wgmma_commit_group();
  }

  // O (+)= P V for the V tile in `v`: the first tile's product overwrites O.
  __device__ __forceinline__ void issue_pv(const Tile& v, bool accumulate) {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks)
      hw::wgmma_rs<T, 1>(o, p[ks], hw::descriptor_mn_major_sw128(v[0], ks, Cfg::kKvBoxBytes), accumulate || ks > 0 ? 1u : 0u);
    hw::wgmma_commit_group();
  }

  // A diagonal tile whose first key is key0 keys after the block's first query: key key0 + c (column c)
  // is masked for the row r of the block when key0 + c > r.
  __device__ __forceinline__ void mask_diagonal(int key0) {
    const int lane = threadIdx.x % 32, row0 = 64 * group + 16 * ((threadIdx.x / 32) % 4) + lane / 4;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key0 + 8 * j + 2 * (lane % 4) + (e & 1) > row0 + 8 * (e >> 1)) s[4 * j + e] = -INFINITY;
  }

  // The online softmax of the scores in s: exponentials in place, row_max and row_sum updated; returns in
  // `rescale` what O must be multiplied by for the new maxima (0 before the first tile, whose O is unset).
  __device__ __forceinline__ void softmax(float scale_log2, bool no_rescale, float (&rescale)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = row_max[h];
      if constexpr (Cfg::kRawMaxima) {  // the scale is positive: the maximum of the scaled is the scaled maximum
        float raw = -INFINITY;
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) raw = fmaxf(raw, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
        mx = fmaxf(mx, raw * scale_log2);
      } else {
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
          mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]) * scale_log2);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.0f : mx;  // a row with every key masked so far
      rescale[h] = fast_exp2(row_max[h] - base);
      row_max[h] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[4 * j + e] = fast_exp2(fmaf(s[4 * j + e], scale_log2, -base));
          sum += s[4 * j + e];
        }
      if (no_rescale) rescale[h] = 1.0f;
      row_sum[h] = row_sum[h] * rescale[h] + sum;
    }
  }

  __device__ __forceinline__ void rescale_output(const float (&rescale)[2]) {
#pragma unroll
    for (int j = 0; j < kD / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[4 * j + e] *= rescale[e >> 1];
  }

  // P's A fragment of k16 step ks is the scores of columns 16 ks .. 16 ks + 15: n8 tiles 2 ks and 2 ks + 1.
  __device__ __forceinline__ void pack_probabilities() {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks)
#pragma unroll
      for (int r = 0; r < 4; ++r) p[ks][r] = pack2<T>(s[8 * ks + 2 * r], s[8 * ks + 2 * r + 1]);
  }

  // Keeps P's registers live (and unchanged) until this point: the P V in flight still reads them.
  __device__ __forceinline__ void hold_probabilities() {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks)
#pragma unroll
      for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(p[ks][r])::"memory");
  }

  // O / the row's sum, to global memory as pairs of T; rows past the sequence (Cfg::kPartialBlocks) are not.
  __device__ __forceinline__ void store(const Args& a, const Walk<Cfg>& walk) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, m_block = walk.m_block;
    const long long row0 = static_cast<long long>(walk.head) * a.seq_len + m_block * Cfg::kBlockM + 64 * group +
                           16 * warp + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float total = row_sum[h];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
      if constexpr (Cfg::kPartialBlocks)
        if (m_block * Cfg::kBlockM + 64 * group + 16 * warp + lane / 4 + 8 * h >= a.seq_len) continue;
      T* row = static_cast<T*>(a.o) + (row0 + 8 * h) * kD + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < kD / 8; ++j)
        *reinterpret_cast<std::uint32_t*>(row + 8 * j) = pack2<T>(o[4 * j + 2 * h] * inverse, o[4 * j + 2 * h + 1] * inverse);
    }
  }
};

// Tile i's S = Q K^T issued once its K tile has landed.
template <typename T, typename Cfg>
__device__ __forceinline__ void start_scores(Consumer<T, Cfg>& c, Smem<Cfg>& sm, int i) {
  wait_or_trap<Cfg>(&sm.k_full[c.stage(i)], c.full_parity(i));
  hw::wgmma_fence();
  c.issue_scores(sm, sm.k[c.stage(i)]);
}

// After the wait for tile i's scores: they are read from here on, its K stage is free (and, after a persistent
// work item's last scores, Q's buffer), and a diagonal tile (the walk's first kBlockM / kBlockN under the
// causal mask) is masked.
template <typename T, typename Cfg>
__device__ __forceinline__ void scores_landed(Consumer<T, Cfg>& c, Smem<Cfg>& sm, const Args& a, int i) {
  hw::fence_accumulators(c.s);
  hw::mbarrier_arrive(&sm.k_empty[c.stage(i)]);
  if constexpr (Cfg::kPersistent)
    if (i == c.count - 1) hw::mbarrier_arrive(&sm.q_empty);
  constexpr int kDiagonalTiles = Cfg::kBlockM / Cfg::kBlockN;
  if (a.mask && i < kDiagonalTiles) c.mask_diagonal((kDiagonalTiles - 1 - i) * Cfg::kBlockN);
}

// Tile i's scores in c.s, waited for, its K stage released, masked if diagonal.
template <typename T, typename Cfg>
__device__ __forceinline__ void scores(Consumer<T, Cfg>& c, Smem<Cfg>& sm, const Args& a, int i) {
  start_scores(c, sm, i);
  hw::wgmma_wait_group<0>();
  scores_landed(c, sm, a, i);
}

// Waits for the P V in flight (the last wgmma group), then releases tile i's V stage.
template <typename T, typename Cfg>
__device__ __forceinline__ void finish_pv(Consumer<T, Cfg>& c, Smem<Cfg>& sm, int i) {
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(c.o);
  c.hold_probabilities();
  hw::mbarrier_arrive(&sm.v_empty[c.stage(i)]);
}

// Tile i's P V issued (its V waited for): the first tile's overwrites O.
template <typename T, typename Cfg>
__device__ __forceinline__ void start_pv(Consumer<T, Cfg>& c, Smem<Cfg>& sm, int i) {
  wait_or_trap<Cfg>(&sm.v_full[c.stage(i)], c.full_parity(i));
  c.issue_pv(sm.v[c.stage(i)], i > 0);
}

// Ping-pong (Config::kPingPong, v10 and v12; FlashAttention-3's warp scheduler barriers, here on mbarriers so that a
// wait has wait_or_trap's time-out): the two consumer groups take turns to issue an overlapped tile's products,
// so that one group's products run on the tensor cores while the other's softmax runs. Group g's n-th turn is
// phase n of sm.turn[g], completed by the other group's 128 arrivals once that group has issued its own (group
// 1 completes group 0's first at the start). Both groups walk the same items, so they take equally many
// turns, strictly in turn; the last turn given is never taken.
template <typename T, typename Cfg>
__device__ __forceinline__ void wait_for_turn(Consumer<T, Cfg>& c, Smem<Cfg>& sm) {
  wait_or_trap<Cfg>(&sm.turn[c.group], c.turns & 1);
  ++c.turns;
}
template <typename T, typename Cfg>
__device__ __forceinline__ void give_turn(const Consumer<T, Cfg>& c, Smem<Cfg>& sm) {
  hw::mbarrier_arrive(&sm.turn[1 - c.group]);
}

// Rescale under the scores (Cfg::kRescaleUnderScores): O is multiplied by tile i - 1's factors after tile i's
// scores are issued and before tile i - 1's P V is (FlashAttention-3's order), so the multiplies run beside the
// scores' product instead of after the P V wait with no product in flight. The same multiplies of the same
// values: the output is the other order's, bit for bit.
// Skip unit rescale (Cfg::kSkipUnitRescale): where no row of the warp has a new maximum, every factor is exactly 1
// and the multiplies would leave O as it is, so the warp skips them (a vote, uniform across the warp). Late in a
// long walk many warps' maxima stand (with random scores a warp's 16 rows all keep theirs at tile n of the walk
// with probability (n / (n + 1))^16: 0.38 at n = 16; an estimate, the skips are not counted).
template <typename T, typename Cfg>
__device__ __forceinline__ void rescale_before_pv(Consumer<T, Cfg>& c) {
  const bool unit = c.pending_rescale[0] == 1.0f && c.pending_rescale[1] == 1.0f;
  if (!Cfg::kSkipUnitRescale || !__all_sync(0xffffffffu, unit)) c.rescale_output(c.pending_rescale);
  hw::wgmma_fence();  // O's registers written since the last wgmma: ordered before the P V that accumulates them
}

// Tile i > 0 with the tensor cores overlapping the softmax: its scores issued, then tile i - 1's P V; the
// softmax of tile i while P V runs; O rescaled once P V has finished (or, Cfg::kRescaleUnderScores, before the
// next P V), then tile i's probabilities packed. Ping-pong: both tiles waited for before the turn, which is
// held only while the products are issued.
template <typename T, typename Cfg>
__device__ __forceinline__ void overlapped_tile(Consumer<T, Cfg>& c, Smem<Cfg>& sm, const Args& a, int i) {
  if constexpr (Cfg::kPingPong) {
    wait_or_trap<Cfg>(&sm.k_full[c.stage(i)], c.full_parity(i));
    wait_or_trap<Cfg>(&sm.v_full[c.stage(i - 1)], c.full_parity(i - 1));
    wait_for_turn(c, sm);
  }
  start_scores(c, sm, i);
  if constexpr (Cfg::kRescaleUnderScores) rescale_before_pv(c);
  start_pv(c, sm, i - 1);
  if constexpr (Cfg::kPingPong) give_turn(c, sm);
  hw::wgmma_wait_group<1>();  // the scores are in
  scores_landed(c, sm, a, i);
  float rescale[2];
  c.softmax(a.scale_log2, a.no_rescale, rescale);
  finish_pv(c, sm, i - 1);
  if constexpr (Cfg::kRescaleUnderScores) {
    c.pending_rescale[0] = rescale[0];
    c.pending_rescale[1] = rescale[1];
  } else {
    c.rescale_output(rescale);
  }
  c.pack_probabilities();
}

// Tile i, one step after the other: scores, softmax, O rescaled, P V.
template <typename T, typename Cfg>
__device__ __forceinline__ void serial_tile(Consumer<T, Cfg>& c, Smem<Cfg>& sm, const Args& a, int i) {
  scores(c, sm, a, i);
  float rescale[2];
  c.softmax(a.scale_log2, a.no_rescale, rescale);
  if (i > 0) c.rescale_output(rescale);
  c.pack_probabilities();
  hw::wgmma_fence();
  start_pv(c, sm, i);
  finish_pv(c, sm, i);
}

// The overlapped walk of a work item whose first scores have been issued (start_scores(c, sm, 0)): the first
// tile's scores waited for and its softmax, every later tile overlapped with its predecessor's P V, the last P V.
template <typename T, typename Cfg>
__device__ __forceinline__ void overlapped_walk_from_first_scores(Consumer<T, Cfg>& c, Smem<Cfg>& sm, const Args& a) {
  hw::wgmma_wait_group<0>();
  scores_landed(c, sm, a, 0);
  float unused[2];
  c.softmax(a.scale_log2, false, unused);
  c.pack_probabilities();
  if constexpr (Cfg::kRescaleUnderScores)
    c.pending_rescale[0] = c.pending_rescale[1] = 1.0f;  // O is unset until the first P V overwrites it
  for (int i = 1; i < c.count; ++i) overlapped_tile(c, sm, a, i);
  if constexpr (Cfg::kRescaleUnderScores) c.rescale_output(c.pending_rescale);
  hw::wgmma_fence();
  start_pv(c, sm, c.count - 1);
  finish_pv(c, sm, c.count - 1);
}

// A consumer warp group's work item (its Q waited for with `q_parity`): the walk's tiles, then O to global
// memory. Overlapped (Cfg::kOverlap): the first tile's scores and softmax, every later tile overlapped with its
// predecessor's P V, the last P V; else each tile in turn, the tensor cores then overlapping one warp group's
// softmax with the other's products only.
template <typename T, typename Cfg>
__device__ __forceinline__ void consume_walk(Consumer<T, Cfg>& c, Smem<Cfg>& sm, const Args& a,
                                             const Walk<Cfg>& walk, std::uint32_t q_parity) {
  c.count = walk.count;
  c.clear();
  wait_or_trap<Cfg>(&sm.q_full, q_parity);
  if constexpr (Cfg::kOverlap) {
    start_scores(c, sm, 0);
    overlapped_walk_from_first_scores(c, sm, a);
  } else {
    for (int i = 0; i < walk.count; ++i) serial_tile(c, sm, a, i);
  }
  c.store(a, walk);
}

// Store under the next scores (Cfg::kStoreUnderScores, v16): a persistent block's items in turn, each item's
// first scores issued (its Q waited for) before the item before stores its O, so that the store's multiplies
// and global writes run beside that product instead of leaving the tensor cores to the other consumer group
// alone; O and the row sums are cleared only after the store. The same arithmetic as each item walked apart.
template <typename T, typename Cfg>
__device__ __forceinline__ void consume_items_storing_under_scores(Consumer<T, Cfg>& c, Smem<Cfg>& sm,
                                                                   const Args& a) {
  int n = 0, item = work_item(a, 0);
  if (item < 0) return;
  Walk<Cfg> walk = item_walk<Cfg>(a, item);
  c.count = walk.count;
  wait_or_trap<Cfg>(&sm.q_full, 0);
  start_scores(c, sm, 0);
  for (;;) {
    c.clear();
    overlapped_walk_from_first_scores(c, sm, a);
    c.ring += walk.count;
    item = work_item(a, ++n);
    if (item < 0) break;
    const Walk<Cfg> next = item_walk<Cfg>(a, item);
    c.count = next.count;
    wait_or_trap<Cfg>(&sm.q_full, n & 1);
    start_scores(c, sm, 0);
    c.store(a, walk);
    walk = next;
  }
  c.store(a, walk);
}

// A consumer warp group: the block's work item, or a persistent block's items in turn.
template <typename T, typename Cfg>
__device__ __forceinline__ void consume(Smem<Cfg>& sm, const Args& a) {
  Consumer<T, Cfg> c;
  c.group = static_cast<int>(threadIdx.x) / 128 - 1;
  if constexpr (Cfg::kPingPong)
    if (c.group == 1) give_turn(c, sm);  // group 0's first turn
  if constexpr (Cfg::kStoreUnderScores) {
    consume_items_storing_under_scores(c, sm, a);
  } else if constexpr (Cfg::kPersistent) {
    for (int n = 0, item = work_item(a, 0); item >= 0; item = work_item(a, ++n)) {
      const Walk<Cfg> walk = item_walk<Cfg>(a, item);
      consume_walk(c, sm, a, walk, n & 1);
      c.ring += walk.count;
    }
  } else {
    consume_walk(c, sm, a, block_walk<Cfg>(a), 0);
  }
}

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kBlocksPerSm)
    fused_sm90a_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                       const __grid_constant__ CUtensorMap v_map, Args args) {
  extern __shared__ unsigned char raw[];
  Smem<Cfg>& sm = aligned_smem<Smem<Cfg>>(raw);
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.q_full, 1);
    for (int stage = 0; stage < Cfg::kStages; ++stage) {
      hw::mbarrier_init(&sm.k_full[stage], 1);
      hw::mbarrier_init(&sm.v_full[stage], 1);
      hw::mbarrier_init(&sm.k_empty[stage], Cfg::kConsumerThreads);
      hw::mbarrier_init(&sm.v_empty[stage], Cfg::kConsumerThreads);
    }
    if constexpr (Cfg::kPersistent) hw::mbarrier_init(&sm.q_empty, Cfg::kConsumerThreads);
    if constexpr (Cfg::kPingPong)
      for (std::uint64_t& turn : sm.turn) hw::mbarrier_init(&turn, 128);
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    hw::setmaxnreg_dec<Cfg::kProducerRegisters>();
    if (threadIdx.x == 0) produce<Cfg>(sm, &q_map, &k_map, &v_map, args);
  } else {
    hw::setmaxnreg_inc<Cfg::kConsumerRegisters>();
    consume<T, Cfg>(sm, args);
  }
}

// Q, K or V ([batch x heads x t, d], row-major) as TMA reads it: boxes of box_rows rows x 64 columns,
// 128-byte swizzle.
CUtensorMap tile_map(const void* data, AttentionType type, const AttentionShape& s, std::uint32_t box_rows) {
  const hopper::Matrix2d rows{data,
                              type == AttentionType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                              static_cast<std::uint64_t>(s.batch * s.heads * s.q_len),
                              static_cast<std::uint64_t>(s.head_dim), static_cast<std::uint64_t>(s.head_dim) * 2};
  return hopper::make_tensor_map_2d(rows, box_rows, kBoxCols, hopper::TileSwizzle::bytes128);
}

// setmaxnreg moves registers within the block's pool, which ptxas sized: a kernel compiled to fewer registers
// than Cfg::kEntryRegisters would leave the consumers' setmaxnreg.inc waiting forever, so it is refused.
template <typename Cfg, typename Kernel>
void check_register_pool(Kernel* kernel) {
  static const int registers = [kernel] {
    cudaFuncAttributes attributes{};
    ROOFBENCH_CUDA(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)));
    return attributes.numRegs;
  }();
  if (registers != Cfg::kEntryRegisters)
    throw Error("fused attention: its kernel has " + std::to_string(registers) + " registers a thread where its " +
                "setmaxnreg split needs " + std::to_string(Cfg::kEntryRegisters));
}

// The kernel of T and Cfg, its registers checked and its shared memory allowed.
template <typename T, typename Cfg>
auto prepared_kernel() {
  const auto kernel = fused_sm90a_kernel<T, Cfg>;
  check_register_pool<Cfg>(kernel);
  roofbench::cuda::allow_dynamic_shared_memory(kernel, kSmemBytes<Cfg>);
  constexpr auto kCarveout = cudaFuncAttributePreferredSharedMemoryCarveout;
  if constexpr (Cfg::kBlocksPerSm > 1)  // the driver's choice of carveout need only fit one block
    ROOFBENCH_CUDA(
        cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), kCarveout, cudaSharedmemCarveoutMaxShared));
  return kernel;
}

// The grid: a block per work item, or a persistent version's one block an SM (fewer for fewer items).
template <typename Cfg>
dim3 grid_of(const Args& args) {
  if constexpr (Cfg::kPersistent) {
    int device = 0, sms = 0;
    ROOFBENCH_CUDA(cudaGetDevice(&device));
    ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return dim3(unsigned(std::min(args.work_items, sms * Cfg::kBlocksPerSm)));
  } else {
    return dim3(unsigned(args.m_blocks), unsigned(args.work_items / args.m_blocks));
  }
}

template <typename T, typename Cfg>
void launch(const AttentionShape& shape, const void* q, const void* k, const void* v, void* o, cudaStream_t stream,
            AttentionFault fault) {
  const auto kernel = prepared_kernel<T, Cfg>();
  const AttentionType type = std::is_same_v<T, __half> ? AttentionType::fp16 : AttentionType::bf16;
  const int m_blocks = static_cast<int>((shape.q_len + Cfg::kBlockM - 1) / Cfg::kBlockM);
  Args args{o,
            static_cast<int>(shape.q_len),
            attention_detail::kLog2e / std::sqrt(float(Cfg::kD)),
            shape.causal || fault == AttentionFault::drop_causal_mask,  // the causal walk, without its mask
            shape.causal && fault != AttentionFault::drop_causal_mask,
            fault == AttentionFault::no_rescale,
            fault == AttentionFault::skip_last_kv_block ? 1 : 0,
            m_blocks,
            m_blocks * static_cast<int>(shape.batch * shape.heads)};
  kernel<<<grid_of<Cfg>(args), Cfg::kThreads, kSmemBytes<Cfg>, stream>>>(tile_map(q, type, shape, Cfg::kBlockM),
                                                      tile_map(k, type, shape, Cfg::kBlockN),
                                                      tile_map(v, type, shape, Cfg::kBlockN), args);
  ROOFBENCH_CUDA_LAUNCH();
}

// The versions' shapes. Shared memory (16-bit elements): Q kBlockM x d, and per stage K and V kBlockN x d.
//   v4 d 64: 16 KB + 2 x 32 KB = 80 KB; d 128: 32 KB + 2 x 64 KB = 160 KB (a third stage, 224 KB and the
//      alignment slack, would fill the 227 KB a block may have); d 128 runs serially (Config::kOverlap).
//   v5 d 64: 16 KB + 3 x 32 KB = 112 KB; d 128 on 64-key tiles, so that it overlaps: 32 KB + 4 x 32 KB = 160 KB.
//   v6 d 64: v4's kernel; d 128: v4's shape with wide consumers (Config::kWideConsumers), overlapped.
//   v7 d 64: two blocks an SM on 64-key tiles in 4 stages, 16 KB + 4 x 16 KB = 80 KB a block (81 with the
//      alignment slack), each tile's
//      steps in turn (104 registers cannot overlap them); d 128: v6's kernel.
//   v8 d 64: FlashAttention-3's shape for head dim 64, three consumer groups (192 queries) at 160 registers
//      on 64-key tiles in 4 stages, overlapped: 24 KB + 4 x 16 KB = 88 KB; d 128: v6's kernel.
//   v9: persistent (Config::kPersistent), one block an SM: d 64 v4's shape with wide consumers, overlapped
//      (80 KB); d 128 v6's (160 KB).
//   v10: v9 with its consumer groups taking turns on the tensor cores (Config::kPingPong).
//   v11: v9 with its items head by head (Config::kHeadMajor).
//   v12: v11 with v10's turns (Config::kHeadMajor and Config::kPingPong).
//   v13: v11 with O rescaled under the next tile's scores (Config::kRescaleUnderScores).
//   v14: v13 with the rows' maxima taken over the raw scores (Config::kRawMaxima).
//   v15: v14 with the rescale skipped by a warp whose factors are all 1 (Config::kSkipUnitRescale).
//   v16: v14 with each item's O stored under the next item's first scores (Config::kStoreUnderScores).
// Calls `use.template operator()<Cfg>()` with the Config of `version` at `head_dim`.
template <typename Use>
void with_config(const std::string& version, int head_dim, Use&& use) {
  const bool d64 = head_dim == 64;
  // The versions of 128-key tiles in two stages at both head dims, each with its form.
  const auto two_stages = [&]<Form kForm>() {
    d64 ? use.template operator()<Config<64, 128, 2, kForm>>() : use.template operator()<Config<128, 128, 2, kForm>>();
  };
  if (version == "v9")
    two_stages.template operator()<form_of("v9")>();
  else if (version == "v10")
    two_stages.template operator()<form_of("v10")>();
  else if (version == "v11")
    two_stages.template operator()<form_of("v11")>();
  else if (version == "v12")
    two_stages.template operator()<form_of("v12")>();
  else if (version == "v13")
    two_stages.template operator()<form_of("v13")>();
  else if (version == "v14")
    two_stages.template operator()<form_of("v14")>();
  else if (version == "v15")
    two_stages.template operator()<form_of("v15")>();
  else if (version == "v16")
    two_stages.template operator()<form_of("v16")>();
  else if (version == "v7" && d64)
    use.template operator()<Config<64, 64, 4, Form{.wide_consumers = true, .blocks_per_sm = 2}>>();
  else if (version == "v8" && d64)
    use.template operator()<Config<64, 64, 4, Form{.wide_consumers = true, .consumer_groups = 3}>>();
  else if ((version == "v6" || version == "v7" || version == "v8") && !d64)
    use.template operator()<Config<128, 128, 2, kWideForm>>();
  else if (version == "v4" || version == "v6")
    two_stages.template operator()<form_of("v4")>();
  else
    d64 ? use.template operator()<Config<64, 128, 3>>() : use.template operator()<Config<128, 64, 4>>();
}

}  // namespace

std::string fused_sm90a_unavailable(const std::string& version, int device) {
  if (hopper::hopper_path_available(device)) return "";
  return "fused attention " + version + " needs sm_90a (wgmma, TMA): a compute capability 9.0 GPU (H100, H200)";
}

namespace {
// Throws unless `version` is an sm_90a version that runs on the current device.
void check_runs_here(const std::string& version) {
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  if (!hopper::hopper_path_available(device)) throw Error(fused_sm90a_unavailable(version, device));
  if (!is_sm90a_version(version)) throw Error("fused attention: '" + version + "' is not an sm_90a version");
}
}  // namespace

void launch_fused_sm90a(const std::string& version, AttentionType type, const AttentionShape& shape, const void* q,
                        const void* k, const void* v, void* o, cudaStream_t stream, AttentionFault fault) {
  check_runs_here(version);
  attention_detail::dispatch_type(type, [&]<typename T>() {
    with_config(version, shape.head_dim, [&]<typename Cfg>() { launch<T, Cfg>(shape, q, k, v, o, stream, fault); });
  });
}

int fused_sm90a_blocks_per_sm(const std::string& version, AttentionType type, int head_dim) {
  check_runs_here(version);
  int blocks = 0;
  attention_detail::dispatch_type(type, [&]<typename T>() {
    with_config(version, head_dim, [&]<typename Cfg>() {
      ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, prepared_kernel<T, Cfg>(), Cfg::kThreads,
                                                                   kSmemBytes<Cfg>));
    });
  });
  return blocks;
}

}  // namespace roofbench::kernels::sm90a
