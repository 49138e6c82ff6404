// A ring of head slots shared by the warp groups of one block an SM (the lab's v49's and v52's backwards,
// attention_v49.cu, and v50's forward, attention_v50.cu), where the walks of one warp group a block give each block one
// head's tiles: ring_schedule.hpp's schedule (a head's group, slot, barrier and wait's parity), run on the device.
//   - A group that ends head n loads head n + kSlots, another group's, into the slot it frees, so a head's boxes load
//     while the heads before it run, and not only once its own group's head before has ended; no wait can mistake an
//     earlier fill's phase for its own, however far the groups drift apart (tests/ring_schedule_test.cpp).
//   - The groups meet on named barriers of their own (warp_group_sync, barrier 1 + group), never on the block's: a
//     ring runs only steps that meet so (not attend_query_half's kStageInV, backward_query_halves_together's
//     kStageInDsT, backward_key_halves_overlapped or store_head_column_sums, which assume a block of one group).
// A thread's group and row, and the block's index, are read anew where used: held through a head they cost the
// registers that its products need.
// Included by sm_90a translation units alone, after attention_backward_sm90a.cuh.
#pragma once

#include <cstdint>

#include "ring_schedule.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

// The block's n-th head, blockIdx.x + n gridDim.x, the block's index read anew.
__device__ inline int block_head(int n) {
  unsigned block;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(block));
  return static_cast<int>(block + n * gridDim.x);
}

template <int kGroupCount, int kSlotCount>
struct HeadRing : lab::RingSchedule<kGroupCount, kSlotCount> {
  using lab::RingSchedule<kGroupCount, kSlotCount>::kGroups;
  using lab::RingSchedule<kGroupCount, kSlotCount>::kSlots;
  static_assert(kGroupCount <= 15, "named barriers 1 .. 15");
  static constexpr int kGroupThreads = 128, kThreads = kGroups * kGroupThreads;

  __device__ static int thread_group() { return thread_index_anew() / kGroupThreads; }
  __device__ static int thread_row() { return thread_index_anew() % kGroupThreads; }
  __device__ static void sync() { warp_group_sync(thread_group()); }

  // Thread 0 sets up the barriers `landed` and loads the block's first kSlots heads (load(n): the block's n-th); then
  // the block meets.
  template <typename Load>
  __device__ static void start(std::uint64_t (&landed)[kGroups][kSlots], int heads, Load load) {
    if (threadIdx.x == 0) {
      for (auto& bars : landed)
        for (auto& bar : bars) hw::mbarrier_init(&bar, 1);
      hw::mbarrier_init_fence();
      for (int n = 0; n < kSlots && block_head(n) < heads; ++n) load(n);
    }
    __syncthreads();
  }
};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
