// Fused causal attention with RoPE, versions 49's and 52's backwards (bf16, the kernel lab's lab_attention_bf16 rows
// v49 and v52, on the keeper's forward, v29's, and v51, on v50's): v44's steps on each head
// (attention_backward_query_first_sm90a.cuh's backward_head_query_first: the query phase, delta from the scores, then
// the key phase with the masked exponents dropped by a select; v52's with v46's branch on whether a chunk is masked),
// walked by two warp groups of one block an SM that share a ring of three head slots (q, k, v and dout, 64 KB, and
// the head's lse and delta) instead of two blocks an SM of one warp group and one head's tiles each.
//   - The ring (attention_ring_sm90a.cuh's HeadRing): the block's n-th head is warp group n % 2's and lands in slot
//     n % 3; a group that ends head n loads head n + 3, the other group's, into the slot it frees, and the other
//     group starts it once its own head n + 1 has ended. A load so has the time between the two groups' ends of
//     their heads (the groups' offset, or a head's time less it); once the groups run at least a load's time apart,
//     which a group's wait itself brings about, a group that ends a head finds its next one landed, where v44's
//     block waits at every head's start for boxes it loaded at the end of the head before.
//   - A head's lse and delta live in its slot; each group has its own dq stage (a query half's 64 rows: each warp
//     stages the same 16 rows in both halves) and, with qkv's bias sums, its own column sums. The key phase meets on
//     its group's barrier found anew (KeyPhase::group_anew): held through it, the group's number spills.
// Why: in v44's backward 12.4% of the warp samples wait at a head's start for its q, k and v (Nsight Compute, H100,
// batch 512), and each block reads its next head's 64 KB only once its own head has ended, so an SM's bytes in flight
// come in bursts; with a third slot shared by the SM's two heads, a head's loads fly while the other group computes.
// v52: v46's branch saved 1.3% of v44's backward but spilled 12 bytes with qkv's sums (qkv-bias v12); on the ring
// neither form spills.
// The arithmetic and its order are v44's: dqkv and the column sums equal v44's (qkv-bias v10's) bit for bit.
// Budget: shared memory three slots of 65 KB, each group's dq stage 8 KB, six barriers: 212 KB with the alignment's
// spare (224 KB with qkv's bias sums, 6 KB a group), one block an SM, 256 threads; 255 registers, no spills (v49 with
// the sums 4 bytes spilled), the same 8 warps an SM as v44's. Compiled for sm_90a alone, in the lab's sm_90a library;
// attention_v10_absent.cpp stands in without sm_90a code.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "attention_backward_query_first_sm90a.cuh"
#include "attention_ring_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

using BackwardRing = HeadRing<2, 3>;
static_assert(BackwardRing::kGroupThreads == kV14Threads);

// One head's rows as TMA brings them (q, k, v and dout), and its rows' lse and delta.
struct RingSlot {
  HeadTiles head;
  unsigned char dout[kHeadTileBytes];
  float lse[kMaxT], delta[kMaxT];  // lse in log2 units
};

struct V49Smem {
  RingSlot slot[BackwardRing::kSlots];
  unsigned char dq_stage[BackwardRing::kGroups][kHeadTileBytes / 2];  // a query half's rows (its kStageRows)
  std::uint64_t landed[BackwardRing::kGroups][BackwardRing::kSlots];  // the slot's four boxes, for the group reading
};

// With qkv_bias_sums (qkv-bias v15): v49's, and each group's column sums as V43QkvBiasSmem's.
struct V49QkvBiasSmem : V49Smem {
  alignas(16) float column_sums[BackwardRing::kGroups][3][kRowBlocks][kHeadDim];  // BlockColumnSums: 16 bytes a lane
};

// HeadColumnSums of the calling thread's warp group, the group found anew at each block (a register fewer through the
// key phase).
struct RingColumnSums {
  float (*groups)[3][kRowBlocks][kHeadDim];
  __device__ BlockColumnSums block(int part, int row0) const {
    return {groups[BackwardRing::thread_group()][part][row0 / kRows]};
  }
};

// The block's n-th head into its slot on its group's barrier of that slot. One thread.
__device__ inline void load_backward_ring_head(V49Smem& sm, const V14Maps& maps, int n, const HeadRows& at) {
  RingSlot& slot = sm.slot[BackwardRing::slot(n)];
  std::uint64_t* bar = &sm.landed[BackwardRing::group(n)][BackwardRing::slot(n)];
  load_head(slot.head, maps.qkv, bar, at, kHeadTileBytes);
  hw::tma_load_2d(slot.dout, maps.dout, bar, at.b * at.T, at.h * kHeadDim);
}

template <bool kSums, typename Smem>
__device__ __forceinline__ auto ring_column_sums(Smem& sm) {
  if constexpr (kSums)
    return RingColumnSums{sm.column_sums};
  else
    return NoHeadColumnSums{};
}

// v49's walk: each warp group runs v44's steps on its heads (the block's n-th for n = group, group + 2, ...) from the
// ring. Smem V49QkvBiasSmem: dqkv's column sums as stored, written to args.column_partials after each head.
template <KeyPhase kKeyPhase, typename Smem>
__device__ __forceinline__ void walk_backward_heads_on_ring(Smem& sm, const V14Maps& maps, bf16* dqkv,
                                                            const float* lse, const float* bias,
                                                            const FusedArgs& args) {
  constexpr bool kSums = std::is_same_v<Smem, V49QkvBiasSmem>;
  static_assert(kV14Threads == kMaxT, "a thread holds one row's lse across the waits");
  const int heads = args.s.batch * args.s.heads, T = args.s.T;
  // maps and the shape captured by copy: by reference, ptxas spills 4 bytes of this kernel
  BackwardRing::start(sm.landed, heads, [&sm, maps, s = args.s](int n) {
    load_backward_ring_head(sm, maps, n, v10_head_rows(block_head(n), s));
  });
  for (int n = BackwardRing::thread_group(); block_head(n) < heads; n += BackwardRing::kGroups) {
    const int row = BackwardRing::thread_row();
    const HeadRows at = v10_head_rows(block_head(n), args.s);
    if (row == 0 && block_head(n + BackwardRing::kGroups) < heads)
      prefetch_lse(lse, v10_head_rows(block_head(n + BackwardRing::kGroups), args.s), args.s.heads);
    HeadPreparationSm90a<kV14Threads> prep;
    prep.load<true>(bias, args.rope, at);
    float held_lse = row < T ? lse[at.stats_at(row, args.s.heads)] : 0.0f;  // natural units
    hw::mbarrier_wait_or_trap(&sm.landed[BackwardRing::thread_group()][BackwardRing::slot(n)],
                              BackwardRing::parity(n));
    asm volatile("" : "+f"(held_lse));  // the scaling stays after the wait
    RingSlot& slot = sm.slot[BackwardRing::slot(n)];
    slot.lse[row] = kLog2e * held_lse;
    if (T <= 64 && row >= 64) slot.delta[row] = 0.0f;  // query half 1 does not run; the key phase reads them
    const BackwardHead h{slot.head, slot.dout, nullptr, slot.lse, slot.delta};
    prepare_backward_head<kV14Threads, false>(h, nullptr, prep, T);
    BackwardRing::sync();  // every chunk prepared, every lse stored
    const int group = BackwardRing::thread_group();
    backward_head_query_first<kKeyPhase, kMaxT / 2>(h, sm.dq_stage[group], dqkv, at, args, group,
                                                    ring_column_sums<kSums>(sm), [] { BackwardRing::sync(); },
                                                    [] { __syncwarp(); });  // the stage's rows are the warp's again
    hw::fence_proxy_async_shared();  // this head's ordinary stores to the slot, before TMA writes it again
    BackwardRing::sync();            // the slot is free
    if (BackwardRing::thread_row() == 0 && block_head(n + BackwardRing::kSlots) < heads)
      load_backward_ring_head(sm, maps, n + BackwardRing::kSlots,
                              v10_head_rows(block_head(n + BackwardRing::kSlots), args.s));
    // The group's next head writes its slots only after its preparation's barrier.
    if constexpr (kSums)
      store_column_sums(sm.column_sums[BackwardRing::thread_group()], args.column_partials, at,
                        BackwardRing::thread_row());
  }
}

// A walk's key phase (V44KeyPhase, V46KeyPhase) on the ring: its warp group's barrier found anew
// (KeyPhase::group_anew).
template <typename Keys>
struct OnRing {
  static constexpr KeyPhase kValue = [] {
    KeyPhase phase = Keys::kValue;
    phase.group_anew = true;
    return phase;
  }();
};

template <typename Keys, typename Smem>
__global__ void __launch_bounds__(BackwardRing::kThreads, 1)
    ring_backward_kernel(const __grid_constant__ CUtensorMap qkv_map, const __grid_constant__ CUtensorMap dout_map,
                         const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse, const float* bias,
                         FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads_on_ring<Keys::kValue>(aligned_smem<Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                            lse, bias, args);
}

// The host side of the ring's kernel with Keys' key phase on Smem (out's map is made and never read).
template <typename Keys, typename Smem>
BackwardWalk ring_walk(const char* version, const char* configure_name) {
  constexpr std::size_t kSmemBytes = sizeof(Smem) + kAtomBytes;  // room to align the start
  static_assert(kSmemBytes <= 227 * 1024, "one block an SM");
  return BackwardWalk{.version = version,
                      .configure_name = configure_name,
                      .kernel = ring_backward_kernel<Keys, Smem>,
                      .smem_bytes = kSmemBytes,
                      .column_partials = std::is_same_v<Smem, V49QkvBiasSmem>,
                      .lane_ordered_rope = true,
                      .threads = BackwardRing::kThreads};
}

// Each with and without qkv's bias sums (lab_attention_qkv_bias_bf16's v15 and v16); a version's configure sets up
// both.
BackwardWalk g_v49_walk = ring_walk<OnRing<V44KeyPhase>, V49Smem>("v49's backward", "walk_configure<49>");
BackwardWalk g_v49_qkv_bias_walk =
    ring_walk<OnRing<V44KeyPhase>, V49QkvBiasSmem>("v49's backward with qkv's bias sums", "walk_configure<49>");
BackwardWalk g_v52_walk = ring_walk<OnRing<V46KeyPhase>, V49Smem>("v52's backward", "walk_configure<52>");
BackwardWalk g_v52_qkv_bias_walk =
    ring_walk<OnRing<V46KeyPhase>, V49QkvBiasSmem>("v52's backward with qkv's bias sums", "walk_configure<52>");

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v49_walks() {
  static constexpr VersionWalk kWalks[] = {
      version_walk<&attention::g_v49_walk, &attention::g_v49_qkv_bias_walk>(49),
      version_walk<&attention::g_v52_walk, &attention::g_v52_qkv_bias_walk>(52),
  };
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
