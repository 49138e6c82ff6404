#include "memory_roofs.hpp"

#include <algorithm>
#include <stdexcept>

#include "console.hpp"

namespace roofbench {

namespace {

constexpr std::size_t KiB = 1024;

MemoryVariant wave(int threads, int blocks_per_sm, int loads, bool streaming = false) {
  return {MemoryLayout::chunks, threads, blocks_per_sm, loads, streaming, 0};
}
MemoryVariant fixed_chunks(std::size_t bytes, int threads, int loads, bool streaming = false) {
  return {MemoryLayout::chunks, threads, 0, loads, streaming, bytes};
}
MemoryVariant grid_stride(int threads, int blocks_per_sm, int loads, bool streaming = false) {
  return {MemoryLayout::grid_stride, threads, blocks_per_sm, loads, streaming, 0};
}
MemoryVariant one_step(int threads, int loads) { return {MemoryLayout::one_step, threads, 0, loads, false, 0}; }

}  // namespace

// The split-KV decode (kernels/cuda_attention) reads in blocks of 128 threads, a warp's load 512
// contiguous bytes: v5-v8 one wave of equal runs at 4 or 8 blocks per SM with 4 or 8 loads in flight, v2
// and v4 64 KiB splits (256 keys of K and of V), v1 512 KiB ones, v4 with read-once loads. cuDNN's decode
// is closed; its figures (above the grid-stride kernel's) fit many blocks each streaming a contiguous
// chunk with several 16-byte loads in flight. The grid-stride shapes are the classic streaming kernels.
// The copy table's one_step(256, 4) runs a kernel of micro's copy_kernel's form (kernels/cuda_elementwise:
// the same loads, loop and registers), so that the copy roof bounds it.
const std::vector<MemoryVariant>& read_variants() {
  static const std::vector<MemoryVariant> table = {
      grid_stride(512, 4, 4),          grid_stride(256, 8, 8),         grid_stride(512, 4, 4, true),
      wave(128, 8, 4),                 wave(128, 4, 8),                wave(128, 16, 4),
      wave(256, 8, 4),                 wave(512, 4, 4),                wave(128, 8, 4, true),
      wave(256, 2, 16),                fixed_chunks(64 * KiB, 128, 4), fixed_chunks(64 * KiB, 128, 4, true),
      fixed_chunks(64 * KiB, 256, 16), fixed_chunks(256 * KiB, 256, 8), fixed_chunks(512 * KiB, 128, 8),
      fixed_chunks(1024 * KiB, 512, 4),
  };
  return table;
}

const std::vector<MemoryVariant>& copy_variants() {
  static const std::vector<MemoryVariant> table = {
      {MemoryLayout::memcpy, 0, 0, 0, false, 0},
      grid_stride(512, 4, 4),
      grid_stride(256, 8, 8),
      wave(128, 8, 4),
      wave(256, 8, 8),
      wave(128, 8, 4, true),
      fixed_chunks(64 * KiB, 128, 4),
      fixed_chunks(256 * KiB, 256, 8),
      fixed_chunks(256 * KiB, 256, 8, true),
      one_step(256, 4),
  };
  return table;
}

std::string variant_problem(const MemoryVariant& v) {
  if (v.layout == MemoryLayout::memcpy) return {};
  if (v.threads <= 0 || v.threads > 1024 || v.threads % 32 != 0)
    return "blocks of " + std::to_string(v.threads) + " threads are not 1 to 32 whole warps";
  if (std::find(std::begin(kLoadsInFlight), std::end(kLoadsInFlight), v.loads_in_flight) == std::end(kLoadsInFlight))
    return std::to_string(v.loads_in_flight) + " loads in flight: the kernel is built for 4, 8 or 16";
  if (v.layout == MemoryLayout::one_step) return v.streaming ? "one_step has no streaming form" : "";
  const bool one_wave = v.layout == MemoryLayout::grid_stride || v.chunk_bytes == 0;
  if (one_wave && v.blocks_per_sm <= 0) return "no blocks per SM";
  const std::size_t step_bytes = std::size_t(16) * v.threads * v.loads_in_flight;
  if (v.chunk_bytes % step_bytes != 0)
    return "chunks of " + std::to_string(v.chunk_bytes) + " bytes are not whole steps of " + std::to_string(step_bytes);
  return {};
}

std::string describe(const MemoryVariant& v) {
  if (v.layout == MemoryLayout::memcpy) return "cudaMemcpyAsync device to device";
  const std::string per_sm = std::to_string(v.blocks_per_sm) + " blocks of " + std::to_string(v.threads) + " per SM";
  std::string s;
  if (v.layout == MemoryLayout::one_step)
    return "one step a thread, blocks of " + std::to_string(v.threads) + " in as many waves as it takes, " +
           std::to_string(v.loads_in_flight) + " x 16-byte read-only loads in flight per thread, a grid apart";
  if (v.layout == MemoryLayout::grid_stride) s = "grid-stride loop, " + per_sm;
  else if (v.chunk_bytes == 0) s = "one contiguous chunk per block, " + per_sm;
  else s = "contiguous " + format_bytes(double(v.chunk_bytes)) + " chunks, one per block of " + std::to_string(v.threads);
  s += ", " + std::to_string(v.loads_in_flight) + " x 16-byte loads in flight per thread";
  if (v.streaming) s += ", streaming hints (loads bypass L1 and prefetch 256 bytes into L2, stores evict first)";
  return s;
}

std::size_t best_run(const std::vector<MemoryRun>& runs) {
  std::size_t best = runs.size();
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].rate > 0 && (best == runs.size() || runs[i].rate > runs[best].rate)) best = i;
  if (best == runs.size()) throw std::invalid_argument("no memory roof variant ran");
  return best;
}

std::size_t memory_roof_bytes(double free_bytes) {
  constexpr std::size_t largest = std::size_t{4} << 30, smallest = std::size_t{256} << 20;
  std::size_t bytes = largest;
  while (bytes > smallest && 2.0 * double(bytes) > 0.75 * free_bytes) bytes /= 2;
  return bytes;
}

std::string roof_how(const std::string& figure, const std::vector<MemoryRun>& runs, const std::string& what,
                     std::size_t bytes, int repetitions, const std::string& counted) {
  const std::size_t best = best_run(runs);
  double slowest = runs[best].rate;
  for (const MemoryRun& r : runs)
    if (r.rate > 0) slowest = std::min(slowest, r.rate);
  return figure + ": the best of " + std::to_string(runs.size()) + " " + what + " " + format_bytes(double(bytes)) +
         " (" + format_rate(slowest, "B/s") + " to " + format_rate(runs[best].rate, "B/s") + ", each the best of " +
         std::to_string(repetitions) + "): " + describe(runs[best].variant) + " (" + counted + ")";
}

}  // namespace roofbench
