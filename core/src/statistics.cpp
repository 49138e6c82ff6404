#include "statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace roofbench {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const auto above = std::min(below + 1, values.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

SampleSummary summarize(const std::vector<double>& samples) {
  SampleSummary s;
  s.count = samples.size();
  if (samples.empty()) return s;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.count);
  double squares = 0;
  for (double x : samples) squares += (x - s.mean) * (x - s.mean);
  s.stdev = s.count > 1 ? std::sqrt(squares / static_cast<double>(s.count - 1)) : 0;
  s.noise = s.mean > 0 ? s.stdev / s.mean : 0;
  s.median = quantile(samples, 0.5);
  s.q1 = quantile(samples, 0.25);
  s.q3 = quantile(samples, 0.75);
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  s.min = *lo;
  s.max = *hi;
  return s;
}

bool warmup_settled(const std::vector<double>& times, std::size_t window, double tolerance) {
  if (window == 0 || times.size() < 2 * window) return false;
  const auto end = times.end();
  const double recent = quantile(std::vector<double>(end - window, end), 0.5);
  const double before = quantile(std::vector<double>(end - 2 * window, end - window), 0.5);
  return before > 0 && std::abs(recent - before) <= tolerance * before;
}

double noise_at_fixed_clock(const std::vector<double>& times, const std::vector<double>& clocks_mhz) {
  const std::size_t n = std::min(times.size(), clocks_mhz.size());
  if (n < 3) return std::numeric_limits<double>::quiet_NaN();
  double mean_t = 0, mean_p = 0;  // p: the period of the clock, 1 / f
  for (std::size_t i = 0; i < n; ++i) {
    if (!(clocks_mhz[i] > 0)) return std::numeric_limits<double>::quiet_NaN();
    mean_t += times[i];
    mean_p += 1.0 / clocks_mhz[i];
  }
  mean_t /= static_cast<double>(n);
  mean_p /= static_cast<double>(n);
  double spp = 0, spt = 0, stt = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double dp = 1.0 / clocks_mhz[i] - mean_p, dt = times[i] - mean_t;
    spp += dp * dp;
    spt += dp * dt;
    stt += dt * dt;
  }
  // A clock that did not move (to rounding) explains nothing: the fit would divide by ~0.
  const bool clock_moved = spp > 1e-12 * mean_p * mean_p * static_cast<double>(n);
  const double residual = clock_moved ? std::max(0.0, stt - spt * spt / spp) : stt;
  const double dof = static_cast<double>(n) - (clock_moved ? 2.0 : 1.0);
  return mean_t > 0 ? std::sqrt(residual / dof) / mean_t : 0;
}

ThrottleSplit drop_throttled(const std::vector<double>& times, const std::vector<double>& clocks_mhz,
                             double floor_fraction) {
  ThrottleSplit split;
  const bool clocked = clocks_mhz.size() == times.size();
  const double highest = clocked && !clocks_mhz.empty() ? *std::max_element(clocks_mhz.begin(), clocks_mhz.end()) : 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    const double clock = clocked ? clocks_mhz[i] : 0;
    if (clock > 0 && clock < floor_fraction * highest) {
      ++split.dropped;
      continue;
    }
    split.times.push_back(times[i]);
    if (clocked) split.clocks_mhz.push_back(clock);
  }
  return split;
}

std::vector<double> thin(const std::vector<double>& values, std::size_t limit) {
  if (values.size() <= limit || limit < 2) return values;
  std::vector<double> out;
  out.reserve(limit);
  for (std::size_t i = 0; i < limit; ++i)
    out.push_back(values[i * (values.size() - 1) / (limit - 1)]);
  return out;
}

}  // namespace roofbench
