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
// bytes move faster, whatever fits where; the plausibility check's roof for memory traffic.
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

struct RooflinePoint {
  double flops_per_s = 0;
  double bytes_per_s = 0;
  double intensity = 0;        // FLOPs / minimum bytes
  double attainable = 0;       // min(compute roof, intensity x bandwidth), in FLOP/s
  double roof_fraction = 0;    // achieved / attainable
  Bound bound = Bound::memory;
};

// The memory roof `work` is judged by: the read-streaming ceiling when its traffic is read-dominated and
// that ceiling was measured, else the copy ceiling.
double memory_roof(const Ceilings& c, const Work& work);

// Places one run of `work` that took `seconds` under the ceilings. A case with no FLOPs (a copy) is
// judged by bandwidth alone: its roof fraction is achieved bytes/s over its memory roof.
RooflinePoint place(const Work& work, double seconds, Precision precision, const Ceilings& ceilings);

struct Datasheet {
  std::string name;
  Ceilings ceilings;
};
// Vendor figures (dense, no sparsity) for the GPUs we know, matched on the device name.
std::optional<Datasheet> datasheet_for(const std::string& device_name);

}  // namespace roofbench
