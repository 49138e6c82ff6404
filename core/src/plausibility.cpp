#include "plausibility.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace roofbench {
namespace {

// The highest rate of `precision` the device has a figure for: its own roof (the other 16-bit format's
// when it has none), measured or from the datasheet; 0 when neither has one.
double own_compute_roof(const Ceilings& c, Precision p) {
  double roof = c.flops_of(p);
  if (roof <= 0 && (p == Precision::bf16 || p == Precision::fp16))
    roof = c.flops_of(p == Precision::bf16 ? Precision::fp16 : Precision::bf16);
  return roof;
}

std::string likely_cause(const Result& r) {
  if (r.device.rfind("cuda", 0) == 0)
    return "likely cause: work not on the stream the host gives (ctx.stream()), so the timing missed it, "
           "or work() counts that do not match the work";
  return "likely cause: work() counts that do not match what run() does";
}

std::string over_text(const char* what, double achieved, double roof, const char* roof_name, double factor) {
  char line[256];
  std::snprintf(line, sizeof line, "%s %.3g is %.3gx the %s %.3g (at most %.2fx is possible with this result's noise)",
                what, achieved, achieved / roof, roof_name, roof, factor);
  return line;
}

}  // namespace

// A multi-GPU result's work is its ranks' together ("cuda:0,1": two), against one device's ceilings.
double rank_count(const Result& r) { return 1.0 + static_cast<double>(std::count(r.device.begin(), r.device.end(), ',')); }

double plausible_factor(const Result& r) {
  const double measured_noise = r.figure(fig::noise);
  const double noise = std::isfinite(measured_noise) ? std::clamp(measured_noise, 0.0, kNoiseCounted) : kNoiseCounted;
  return 1 + kCeilingHeadroom + kNoiseWidth * noise;
}

std::optional<std::string> implausibility(const Result& r, const Ceilings& measured, const std::optional<Datasheet>& sheet) {
  const double median = r.figure(fig::time_median);
  if (!r.passed() || !(median > 0)) return std::nullopt;
  const double factor = plausible_factor(r) * rank_count(r);
  const double flops_per_s = r.work.flops / median;
  const double compute_roof = std::max(own_compute_roof(measured, r.precision),
                                       sheet ? own_compute_roof(sheet->ceilings, r.precision) : 0.0);
  if (compute_roof > 0 && flops_per_s > compute_roof * factor)
    return over_text("FLOP/s", flops_per_s, compute_roof, (std::string(to_string(r.precision)) + " roof").c_str(), factor) +
           "; " + likely_cause(r);
  const double bytes_per_s = r.work.bytes / median;
  const double memory_roof_now = r.cold ? memory_roof(measured, r.work).bytes_per_s : measured.cache_bandwidth;
  if (memory_roof_now > 0 && bytes_per_s > memory_roof_now * factor)
    return over_text("B/s", bytes_per_s, memory_roof_now, r.cold ? "main-memory roof" : "cache bandwidth", factor) +
           "; " + likely_cause(r);
  return std::nullopt;
}

}  // namespace roofbench
