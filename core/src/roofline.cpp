#include "roofline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace roofbench {

double compute_roof(const Ceilings& c, Precision p) {
  // Order in which a missing roof falls back: the arithmetic a device would use instead.
  switch (p) {
    case Precision::fp8:
      if (c.flops_of(Precision::fp8) > 0) return c.flops_of(Precision::fp8);
      [[fallthrough]];
    case Precision::bf16:
    case Precision::fp16:
      if (c.flops_of(p) > 0) return c.flops_of(p);
      // The other 16-bit format runs on the same tensor cores at the same rate.
      if (c.flops_of(Precision::bf16) > 0) return c.flops_of(Precision::bf16);
      if (c.flops_of(Precision::fp16) > 0) return c.flops_of(Precision::fp16);
      [[fallthrough]];
    case Precision::tf32:
      if (c.flops_of(Precision::tf32) > 0) return c.flops_of(Precision::tf32);
      [[fallthrough]];
    case Precision::fp32:
      if (c.flops_of(Precision::fp32) > 0) return c.flops_of(Precision::fp32);
      [[fallthrough]];
    case Precision::fp64:
      return c.flops_of(Precision::fp64);
  }
  return 0;
}

double mixed_bandwidth(const Ceilings& c, double read_fraction) {
  const double f = std::clamp(read_fraction, 0.0, 1.0);
  const double C = c.bandwidth, R = c.read_bandwidth;
  if (!(C > 0) || !(R > C)) return C;
  const double inverse_write = 2 / C - 1 / R;  // > 0: R > C > C/2
  return 1 / (f / R + (1 - f) * inverse_write);
}

namespace {

// "dram mixed 67% read", or the ceiling's own name where the fraction lands on one.
std::string mixed_roof_name(const Ceilings& c, double f) {
  if (!(c.read_bandwidth > c.bandwidth) || f == 0.5) return "dram copy";
  if (f >= 1) return "dram read";
  // 1% to 99%: a mix rounded to a whole ceiling's share would read as that ceiling.
  const long percent = std::clamp(std::lround(100 * f), 1L, 99L);
  return "dram mixed " + std::to_string(percent) + "% read";
}

}  // namespace

MemoryRoof memory_roof(const Ceilings& c, const Work& work) {
  if (work.bytes_read > 0 && work.bytes > 0) {
    const double f = std::min(work.bytes_read / work.bytes, 1.0);
    return {mixed_bandwidth(c, f), mixed_roof_name(c, f)};
  }
  if (work.read_dominated && c.read_bandwidth > 0) return {c.read_bandwidth, "dram read"};
  return {c.bandwidth, "dram copy"};
}

MemoryRoof memory_roof(const Ceilings& c, const Work& work, bool cache_resident) {
  if (cache_resident && c.cache_bandwidth > 0) return {c.cache_bandwidth, "cache"};
  return memory_roof(c, work);
}

RooflinePoint place(const Work& work, double seconds, Precision precision, const Ceilings& ceilings,
                    bool cache_resident) {
  RooflinePoint r;
  if (!(seconds > 0)) return r;
  r.flops_per_s = work.flops / seconds;
  r.bytes_per_s = work.bytes / seconds;
  r.intensity = work.bytes > 0 ? work.flops / work.bytes : std::numeric_limits<double>::infinity();
  const double roof = compute_roof(ceilings, precision);
  r.memory_roof = memory_roof(ceilings, work, cache_resident);
  const double bandwidth = r.memory_roof.bytes_per_s;
  if (work.flops <= 0) {
    r.bound = Bound::memory;
    r.roof_fraction = bandwidth > 0 ? r.bytes_per_s / bandwidth : 0;
    return r;
  }
  const double memory_limit = work.bytes > 0 ? r.intensity * bandwidth : std::numeric_limits<double>::infinity();
  r.bound = memory_limit < roof ? Bound::memory : Bound::compute;
  r.attainable = std::min(roof, memory_limit);
  r.roof_fraction = r.attainable > 0 ? r.flops_per_s / r.attainable : 0;
  return r;
}

std::optional<Datasheet> datasheet_for(const std::string& device_name) {
  // Dense rates from NVIDIA's datasheets (no sparsity); fp32 is the non-tensor rate, fp64 the tensor one.
  struct Figures {
    const char* name;
    double bandwidth, fp64, fp32, tf32, bf16, fp8;
  };
  auto sheet = [](const Figures& f) {
    Datasheet d{f.name, {}};
    d.ceilings.bandwidth = f.bandwidth;
    d.ceilings.flops_of(Precision::fp64) = f.fp64;
    d.ceilings.flops_of(Precision::fp32) = f.fp32;
    d.ceilings.flops_of(Precision::tf32) = f.tf32;
    d.ceilings.flops_of(Precision::bf16) = f.bf16;
    d.ceilings.flops_of(Precision::fp16) = f.bf16;
    d.ceilings.flops_of(Precision::fp8) = f.fp8;
    return d;
  };
  // H200 SXM has H100 SXM's arithmetic with more, faster memory.
  if (device_name.find("H200") != std::string::npos)
    return sheet({"NVIDIA H200 SXM (datasheet)", 4.8e12, 67e12, 67e12, 494.7e12, 989.4e12, 1978.9e12});
  if (device_name.find("H100") != std::string::npos && device_name.find("PCIe") != std::string::npos)
    return sheet({"NVIDIA H100 PCIe (datasheet)", 2.0e12, 51e12, 51e12, 378e12, 756e12, 1513e12});
  if (device_name.find("H100") != std::string::npos)
    return sheet({"NVIDIA H100 SXM (datasheet)", 3.35e12, 67e12, 67e12, 494.7e12, 989.4e12, 1978.9e12});
  return std::nullopt;
}

}  // namespace roofbench
