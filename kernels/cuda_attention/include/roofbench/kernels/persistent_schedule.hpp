// How a persistent kernel of `blocks` blocks deals `items` work items that come heaviest first: block c takes
// items c, 2 blocks - 1 - c, 2 blocks + c, ... (a snake), so that a block given one of a round's heaviest is
// given one of the next round's lightest. The fused prefill's persistent versions (v9, v10) deal their query
// blocks so; host and device code share it (constexpr), and a CPU test checks that every item is dealt once.
#pragma once

namespace roofbench::kernels {

// Block `block`'s n-th item, or -1 past the last.
constexpr int snake_work_item(int n, int blocks, int block, int items) {
  const int item = n * blocks + (n % 2 == 0 ? block : blocks - 1 - block);
  return item < items ? item : -1;
}

}  // namespace roofbench::kernels
