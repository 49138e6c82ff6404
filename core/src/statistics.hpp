// Statistics over per-sample times: what every result reports (median, quartiles, relative noise) and
// the rule that ends warm-up.
#pragma once

#include <cstddef>
#include <vector>

namespace roofbench {

struct SampleSummary {
  std::size_t count = 0;
  double mean = 0, stdev = 0, median = 0, q1 = 0, q3 = 0, min = 0, max = 0;
  double noise = 0;  // stdev / mean: relative noise
};

// Quantile by linear interpolation between order statistics (the "type 7" rule numpy uses).
double quantile(std::vector<double> values, double q);
SampleSummary summarize(const std::vector<double>& samples);

// Warm-up has settled when the median of the last `window` times is within `tolerance` (relative) of
// the median of the window before it.
bool warmup_settled(const std::vector<double>& times, std::size_t window = 5, double tolerance = 0.02);

// The relative noise left once the SM clock is accounted for: the residual stdev / mean of a least-squares
// fit time = a + b / clock over the samples. A GPU under its power limit moves its clock by a few percent
// over hundreds of milliseconds, which no sample length averages away; when the clock explains the spread,
// this is small and the spread is the device's, not the measurement's. NaN with fewer than 3 clocked
// samples; the plain relative noise when the clock did not move.
double noise_at_fixed_clock(const std::vector<double>& times, const std::vector<double>& clocks_mhz);

// Samples taken while the GPU throttled: those whose clock is under `floor_fraction` of the highest clock
// that any sample of the same benchmark ran at. Relative to the benchmark's own highest clock, not the
// device's maximum: an H200 runs a large GEMM at 73-80% of its 1980 MHz maximum for as long as it runs
// (its power limit), and dropping those samples would keep only the lucky ones. A sudden throttle (heat,
// another tenant) still falls far under the rest and is dropped. Samples without a clock (0) are kept.
struct ThrottleSplit {
  std::vector<double> times, clocks_mhz;  // the kept samples, in order
  int dropped = 0;
};
ThrottleSplit drop_throttled(const std::vector<double>& times, const std::vector<double>& clocks_mhz,
                             double floor_fraction);

// At most `limit` values, evenly spaced over the whole run (keeps the first and last).
std::vector<double> thin(const std::vector<double>& values, std::size_t limit);

}  // namespace roofbench
