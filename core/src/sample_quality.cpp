#include "sample_quality.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "statistics.hpp"

namespace roofbench {
namespace {

std::string format_seconds(double seconds) {
  static constexpr struct {
    double scale;
    const char* unit;
  } kUnits[] = {{1, "s"}, {1e-3, "ms"}, {1e-6, "us"}, {1e-9, "ns"}};
  for (const auto& u : kUnits)
    if (seconds >= u.scale || u.scale == 1e-9) {
      char text[32];
      std::snprintf(text, sizeof text, "%.3g %s", seconds / u.scale, u.unit);
      return text;
    }
  return {};
}

std::string format_percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g%%", 100 * fraction);
  return text;
}

// Spread of one cluster in log time: its 10th to 90th percentile, so one stray sample inside a
// cluster does not hide the gap between two.
double log_spread(const std::vector<double>& sorted_logs, std::size_t begin, std::size_t end) {
  const std::vector<double> cluster(sorted_logs.begin() + static_cast<std::ptrdiff_t>(begin),
                                    sorted_logs.begin() + static_cast<std::ptrdiff_t>(end));
  return quantile(cluster, 0.9) - quantile(cluster, 0.1);
}

// The widest gap between neighbours in log time that leaves both sides big enough; the two clusters
// when that gap is wide against both clusters' spreads.
bool find_two_clusters(const std::vector<double>& samples, const SampleQualityRules& rules, SampleQuality& out) {
  std::vector<double> logs;
  for (double s : samples)
    if (s > 0 && std::isfinite(s)) logs.push_back(std::log(s));
  if (logs.size() < rules.min_samples) return false;
  std::sort(logs.begin(), logs.end());
  const std::size_t n = logs.size();
  const auto min_side = std::max<std::size_t>(
      2, static_cast<std::size_t>(std::ceil(rules.min_cluster_fraction * static_cast<double>(n))));
  if (2 * min_side > n) return false;
  std::size_t split = 0;
  double widest = 0;
  for (std::size_t i = min_side; i + min_side <= n; ++i) {
    const double gap = logs[i] - logs[i - 1];
    if (gap > widest) widest = gap, split = i;
  }
  if (split == 0 || widest < std::log(rules.min_gap_ratio)) return false;
  const double spread = std::max(log_spread(logs, 0, split), log_spread(logs, split, n));
  if (widest < rules.min_gap_over_spread * spread) return false;
  const std::vector<double> fast(logs.begin(), logs.begin() + static_cast<std::ptrdiff_t>(split));
  const std::vector<double> slow(logs.begin() + static_cast<std::ptrdiff_t>(split), logs.end());
  out.fast_samples = split;
  out.slow_samples = n - split;
  out.reason = "bimodal: " + std::to_string(out.slow_samples) + " of " + std::to_string(n) + " samples near " +
               format_seconds(std::exp(quantile(slow, 0.5))) + ", the rest near " +
               format_seconds(std::exp(quantile(fast, 0.5)));
  return true;
}

}  // namespace

SampleQuality assess_samples(const std::vector<double>& samples_s, double noise_bound, double noise,
                             const SampleQualityRules& rules) {
  SampleQuality quality;
  if (find_two_clusters(samples_s, rules, quality)) {
    quality.noisy = true;
    return quality;
  }
  const bool spread_explained = noise >= 0;
  if (!spread_explained) noise = summarize(samples_s).noise;
  if (noise_bound > 0 && std::isfinite(noise) && noise > rules.noise_factor * noise_bound) {
    quality.noisy = true;
    char factor[16];
    std::snprintf(factor, sizeof factor, "%g", rules.noise_factor);
    quality.reason = "noise " + format_percent(noise) + " is over " + factor + "x the --noise bound (" +
                     format_percent(noise_bound) + ")";
    return quality;
  }
  if (!spread_explained && samples_s.size() >= rules.min_samples) {
    const double median = quantile(samples_s, 0.5), fast = quantile(samples_s, 0.05);
    if (median > 0 && fast < rules.min_fast_edge * median) {
      quality.noisy = true;
      quality.reason = "unsettled: the fastest 5% of samples are " + format_percent(1 - fast / median) +
                       " under the median";
    }
  }
  return quality;
}

}  // namespace roofbench
