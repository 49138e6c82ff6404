#include "roofline.hpp"

#include <algorithm>
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
      if (c.flops_of(Precision::bf16) > 0) return c.flops_of(Precision::bf16);
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

RooflinePoint place(const Work& work, double seconds, Precision precision, const Ceilings& ceilings) {
  RooflinePoint r;
  if (!(seconds > 0)) return r;
  r.flops_per_s = work.flops / seconds;
  r.bytes_per_s = work.bytes / seconds;
  r.intensity = work.bytes > 0 ? work.flops / work.bytes : std::numeric_limits<double>::infinity();
  const double roof = compute_roof(ceilings, precision);
  if (work.flops <= 0) {
    r.bound = Bound::memory;
    r.roof_fraction = ceilings.bandwidth > 0 ? r.bytes_per_s / ceilings.bandwidth : 0;
    return r;
  }
  const double memory_limit = work.bytes > 0 ? r.intensity * ceilings.bandwidth : std::numeric_limits<double>::infinity();
  r.bound = memory_limit < roof ? Bound::memory : Bound::compute;
  r.attainable = std::min(roof, memory_limit);
  r.roof_fraction = r.attainable > 0 ? r.flops_per_s / r.attainable : 0;
  return r;
}

std::optional<Datasheet> datasheet_for(const std::string& device_name) {
  // Dense tensor-core rates of the SXM parts (NVIDIA datasheets); H200 shares H100's arithmetic.
  auto hopper_sxm = [](std::string name, double bandwidth) {
    Datasheet d{std::move(name), {}};
    d.ceilings.bandwidth = bandwidth;
    d.ceilings.flops_of(Precision::fp64) = 67e12;
    d.ceilings.flops_of(Precision::fp32) = 67e12;
    d.ceilings.flops_of(Precision::tf32) = 494.7e12;
    d.ceilings.flops_of(Precision::bf16) = 989.4e12;
    d.ceilings.flops_of(Precision::fp16) = 989.4e12;
    d.ceilings.flops_of(Precision::fp8) = 1978.9e12;
    return d;
  };
  if (device_name.find("H200") != std::string::npos) return hopper_sxm("NVIDIA H200 SXM (datasheet)", 4.8e12);
  if (device_name.find("H100") != std::string::npos) {
    if (device_name.find("PCIe") != std::string::npos) {
      Datasheet d{"NVIDIA H100 PCIe (datasheet)", {}};
      d.ceilings.bandwidth = 2.0e12;
      d.ceilings.flops_of(Precision::fp64) = 51e12;
      d.ceilings.flops_of(Precision::fp32) = 51e12;
      d.ceilings.flops_of(Precision::tf32) = 378e12;
      d.ceilings.flops_of(Precision::bf16) = 756e12;
      d.ceilings.flops_of(Precision::fp16) = 756e12;
      d.ceilings.flops_of(Precision::fp8) = 1513e12;
      return d;
    }
    return hopper_sxm("NVIDIA H100 SXM (datasheet)", 3.35e12);
  }
  return std::nullopt;
}

}  // namespace roofbench
