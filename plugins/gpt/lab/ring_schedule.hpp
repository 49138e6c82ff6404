// The schedule of a ring of head slots shared by the warp groups of one block (the lab's v49, v50 and v52:
// attention_ring_sm90a.cuh's HeadRing runs it): the block's n-th head is warp group n % kGroups's and lands in slot
// n % kSlots; a group that ends head n loads head n + kSlots into the slot it frees; each slot's loads complete on a
// barrier of the group that reads them ([group][slot]). With kGroups and kSlots coprime that barrier's fills are heads
// n, n + kGroups kSlots, ... (one group's visits to one slot, in order), so head n is its barrier's fill
// n / (kGroups kSlots) and the wait for it has that fill's parity. Host and device code: tests/ring_schedule_test.cpp
// runs the schedule against a model of the barriers with random load and head times.
#pragma once

#include <cstdint>
#include <numeric>

#if defined(__CUDACC__)
#define ROOFBENCH_RING_HD __host__ __device__
#else
#define ROOFBENCH_RING_HD
#endif

namespace roofbench::gpt::cuda::lab {

template <int kGroupCount, int kSlotCount>
struct RingSchedule {
  static_assert(std::gcd(kGroupCount, kSlotCount) == 1, "each barrier's fills are one group's visits to one slot");
  static constexpr int kGroups = kGroupCount, kSlots = kSlotCount;

  ROOFBENCH_RING_HD static constexpr int group(int n) { return n % kGroups; }
  ROOFBENCH_RING_HD static constexpr int slot(int n) { return n % kSlots; }
  // Which of its barrier's fills head n is (0, 1, ...), and the parity of the wait for it.
  ROOFBENCH_RING_HD static constexpr int fill(int n) { return n / (kGroups * kSlots); }
  ROOFBENCH_RING_HD static constexpr std::uint32_t parity(int n) { return static_cast<std::uint32_t>(fill(n)) & 1; }
};

}  // namespace roofbench::gpt::cuda::lab
