// The shapes of the kernels that measure a GPU's memory roofs. A roof is an upper bound only if no kernel
// streams memory faster than the one that measured it, and the fastest pattern differs by device and by
// what a kernel does: a grid-stride loop over the whole buffer, or (as attention decode does) many blocks
// each streaming one contiguous chunk; few loads in flight from many warps, or many from few; plain loads
// or read-once loads that skip L1 and prefetch into L2. So `read_bandwidth` and `bandwidth` are each the
// best of a table of such shapes, all run by one templated kernel (cuda_device.cu), and the `how` text
// names the shape that won.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace roofbench {

enum class MemoryLayout {
  memcpy,       // cudaMemcpyAsync device to device (copy only): the copy engine's or the driver's kernel
  grid_stride,  // thread i reads i, i + S, i + 2S, ... over the whole buffer (S: every thread launched)
  chunks,       // block b reads its own contiguous chunk, its threads side by side (coalesced)
  one_step,     // copy only: a grid so large that each thread takes one step of a grid-stride loop (its loads a
                // grid apart, once), in as many waves as that takes: micro's copy_kernel in its own form
};

struct MemoryVariant {
  MemoryLayout layout = MemoryLayout::grid_stride;
  int threads = 512;      // per block
  int blocks_per_sm = 4;  // blocks launched per SM (grid_stride, and chunks cut one per block), lowered
                          // to what fits on an SM at once so that all of them stream together
  int loads_in_flight = 4;  // 16-byte loads each thread issues before it uses any: 4, 8 or 16
  bool streaming = false;   // read-once loads (L1::no_allocate, L2::256B prefetch); stores evict-first
  std::size_t chunk_bytes = 0;  // chunks: 0 cuts the buffer into one chunk per block launched (one wave);
                                // else chunks of this size, one block each, the grid as large as it takes
};

// The 16-byte loads in flight a variant may ask for: the kernel is instantiated for these.
inline constexpr int kLoadsInFlight[] = {4, 8, 16};

// The read-streaming variants, the first of them the cache roof's kernel too (grid-stride, 4 blocks of
// 512 per SM, 4 loads in flight).
const std::vector<MemoryVariant>& read_variants();
// The copy variants: cudaMemcpyAsync first, then copy kernels.
const std::vector<MemoryVariant>& copy_variants();

// Why `v` cannot run (threads not a whole number of warps or over 1024, loads in flight not in
// kLoadsInFlight, ...); empty when it can.
std::string variant_problem(const MemoryVariant& v);

// "contiguous 64.0 KiB chunks, one per block of 128, 4 x 16-byte loads in flight per thread": for the how text.
std::string describe(const MemoryVariant& v);

// One variant's figure: bytes/s (0 where it could not run).
struct MemoryRun {
  MemoryVariant variant;  // as it ran: blocks_per_sm lowered to what fits on an SM
  double rate = 0;
};

// The bytes each memory roof streams with `free_bytes` of device memory free: 4 GiB, as large as the largest
// shipped copy (micro/copy at 4 GiB, whose fixed cost per launch is then as small a share as the roof's),
// halved until its two buffers fit in three quarters of what is free, at least 256 MiB.
std::size_t memory_roof_bytes(double free_bytes);

// The index of the fastest run (the first of equals); throws std::invalid_argument when none ran.
std::size_t best_run(const std::vector<MemoryRun>& runs);

// The how line of a roof: "read_bandwidth: the best of 14 kernels reading 2 GiB (3.9 to 4.71 TB/s, each the
// best of 10): <the winner> (bytes read)". `what`: "kernels reading", `counted`: "bytes read".
std::string roof_how(const std::string& figure, const std::vector<MemoryRun>& runs, const std::string& what,
                     std::size_t bytes, int repetitions, const std::string& counted);

// CUDA builds: every variant of `table` streaming `bytes` of `from` (copying them into `to` when `copy`; a
// read writes at most 4 bytes of `to`) on `stream` of the current device, each the best of `repetitions`
// after 3 warm-ups: bytes/s read, or read + written for a copy; 0 for a variant no block of which fits on
// an SM. Throws roofbench::Error for a variant with a variant_problem or a failed CUDA call.
std::vector<MemoryRun> measure_memory_variants(const std::vector<MemoryVariant>& table, bool copy, void* stream,
                                              const void* from, void* to, std::size_t bytes, int repetitions);

}  // namespace roofbench
