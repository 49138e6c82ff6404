// The roofline: a device's ceilings and where one result sits under them.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "roofbench/plugin.hpp"

namespace roofbench {

inline constexpr std::array<Precision, 6> kAllPrecisions = {Precision::fp64, Precision::fp32, Precision::tf32,
                                                            Precision::bf16, Precision::fp16, Precision::fp8};

// Peak rates of one device: bytes/s of main memory (read + write counted) and FLOP/s per precision
// (0 where the device has no such arithmetic or it was not measured). read_bandwidth is a read-only
// stream's bytes/s, the roof of read-dominated work (higher than a copy's on an H200); 0: not measured.
// cache_bandwidth is bytes/s of data held in cache (a CPU's per-core caches, a GPU's L2): no hot run's
// bytes move faster, whatever fits where; the plausibility check's roof for memory traffic, and the
// memory roof of a run whose data was cache resident.
struct Ceilings {
  double bandwidth = 0;
  double read_bandwidth = 0;
  double cache_bandwidth = 0;
  std::array<double, kAllPrecisions.size()> flops{};
  double& flops_of(Precision p) { return flops[static_cast<std::size_t>(p)]; }
  double flops_of(Precision p) const { return flops[static_cast<std::size_t>(p)]; }
};

// A precision with no roof of its own falls back to the nearest slower one it can run as (tf32 runs as
// fp32 arithmetic on a CPU, for instance); returns 0 when nothing applies.
double compute_roof(const Ceilings& c, Precision p);

enum class Bound { memory, compute };
constexpr const char* to_string(Bound b) { return b == Bound::memory ? "memory" : "compute"; }

// A memory roof and which one it is: "dram copy", "dram read", "dram mixed 67% read" or "cache".
struct MemoryRoof {
  double bytes_per_s = 0;
  std::string name;
};

struct RooflinePoint {
  double flops_per_s = 0;
  double bytes_per_s = 0;
  double intensity = 0;        // FLOPs / minimum bytes
  double attainable = 0;       // min(compute roof, intensity x bandwidth), in FLOP/s
  double roof_fraction = 0;    // achieved / attainable
  Bound bound = Bound::memory;
  MemoryRoof memory_roof;      // the bandwidth the point was placed under
};

// The DRAM roof of traffic that is the fraction `read_fraction` reads (clamped to [0, 1]), the rest
// writes: 1/B(f) = f/R + (1-f)/W, R the read-streaming ceiling and W the write rate the copy ceiling C
// implies at f = 1/2 (1/W = 2/C - 1/R). B(1/2) = C, B(1) = R. Without a read ceiling above the copy
// ceiling the mix has nothing to tell apart, and the copy ceiling stands.
double mixed_bandwidth(const Ceilings& c, double read_fraction);

// The DRAM roof `work` is judged by. With Work::bytes_read said: the mixed roof of bytes_read / bytes
// (named "dram copy" at 1/2, "dram read" at 1). Not said: the read-streaming ceiling when the work is
// read-dominated and that ceiling was measured, else the copy ceiling.
MemoryRoof memory_roof(const Ceilings& c, const Work& work);

// The memory roof a run is placed under: the cache bandwidth when its data was cache resident (hot, the
// minimum bytes fit in the last-level cache) and that ceiling was measured, else memory_roof.
MemoryRoof memory_roof(const Ceilings& c, const Work& work, bool cache_resident);

// Places one run of `work` that took `seconds` under the ceilings, against the memory roof above. A case
// with no FLOPs (a copy) is judged by bandwidth alone: its roof fraction is achieved bytes/s over its
// memory roof.
RooflinePoint place(const Work& work, double seconds, Precision precision, const Ceilings& ceilings,
                    bool cache_resident = false);

struct Datasheet {
  std::string name;
  Ceilings ceilings;
};
// Vendor figures (dense, no sparsity) for the GPUs we know, matched on the device name.
std::optional<Datasheet> datasheet_for(const std::string& device_name);

}  // namespace roofbench
