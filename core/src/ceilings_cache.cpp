#include "ceilings_cache.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text.hpp"

namespace roofbench {

namespace fs = std::filesystem;

std::string ceilings_cache_path(const std::string& device_key) {
  fs::path dir;
  if (const char* d = std::getenv("ROOFBENCH_CACHE_DIR")) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME")) dir = fs::path(x) / "roofbench";
  else if (const char* h = std::getenv("HOME")) dir = fs::path(h) / ".cache" / "roofbench";
  else dir = fs::temp_directory_path() / "roofbench";
  std::string file;
  for (char c : device_key) file += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  return (dir / (file + ".ceilings")).string();
}

// One "name value" pair per line; "how" lines keep their text; a "stale" line (appended) says why the
// next run measures again. The format's number (kCeilingsFormat) changes with what is written or how it is
// measured, and a file of another number is measured again.
std::string serialize_ceilings(const CachedCeilings& c) {
  std::ostringstream out;
  out.precision(17);
  out << "format " << kCeilingsFormat << "\n";
  out << "measured_at " << c.measured_at << "\n";
  out << "bandwidth " << c.ceilings.bandwidth << "\n";
  out << "read_bandwidth " << c.ceilings.read_bandwidth << "\n";
  out << "cache_bandwidth " << c.ceilings.cache_bandwidth << "\n";
  for (Precision p : kAllPrecisions) out << to_string(p) << " " << c.ceilings.flops_of(p) << "\n";
  for (const auto& h : c.how) out << "how " << h << "\n";
  if (!c.stale.empty()) out << "stale " << c.stale << "\n";
  return out.str();
}

namespace {

// A figure's physical bounds for one device kind.
struct Bounds {
  double least, most;
};

struct KindBounds {
  Bounds memory, cache, flops;
};

KindBounds bounds_of(DeviceKind kind) {
  if (kind == DeviceKind::cpu) return {{1e8, 3e12}, {1e8, 3e13}, {1e7, 1e14}};
  return {{1e10, 1e14}, {1e10, 1e15}, {1e10, 1e17}};
}

std::string rate_text(double v, const char* unit) {
  std::ostringstream out;
  out.precision(3);
  out << v << " " << unit;
  return out.str();
}

// Why `value` cannot be the figure `name`; empty when it can (0 is "not measured" where `required` is false).
std::string figure_problem(const std::string& name, double value, Bounds b, bool required, const char* unit) {
  if (!std::isfinite(value)) return name + " is not a finite number";
  if (value == 0 && !required) return {};
  if (value <= 0) return name + (value == 0 ? " is missing" : " is negative");
  if (value < b.least || value > b.most)
    return name + " " + rate_text(value, unit) + " is outside " + rate_text(b.least, unit) + " to " +
           rate_text(b.most, unit);
  return {};
}

// A number with nothing after it ("14e9xyz" is not one).
double strict_number(const std::string& text) {
  std::size_t used = 0;
  const double v = std::stod(text, &used);
  if (used != text.size()) throw std::invalid_argument(text);
  return v;
}

}  // namespace

std::string ceilings_problem(const Ceilings& c, DeviceKind kind) {
  const KindBounds b = bounds_of(kind);
  std::vector<std::string> problems = {
      figure_problem("bandwidth", c.bandwidth, b.memory, true, "B/s"),
      figure_problem("read_bandwidth", c.read_bandwidth, b.memory, true, "B/s"),
      figure_problem("cache_bandwidth", c.cache_bandwidth, b.cache, true, "B/s"),
  };
  for (Precision p : kAllPrecisions)
    problems.push_back(figure_problem(to_string(p), c.flops_of(p), b.flops, p == Precision::fp32, "FLOP/s"));
  for (const auto& problem : problems)
    if (!problem.empty()) return problem + " (for a " + (kind == DeviceKind::cpu ? "CPU" : "GPU") + ")";
  return {};
}

std::optional<CachedCeilings> parse_ceilings(const std::string& text, DeviceKind kind, std::string* why_not) {
  auto refuse = [&](const std::string& why) -> std::optional<CachedCeilings> {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  CachedCeilings c;
  std::istringstream in(text);
  std::string format;
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space), value = line.substr(space + 1);
    try {
      if (key == "format") format = value;
      else if (key == "measured_at") c.measured_at = value;
      else if (key == "how") c.how.push_back(value);
      else if (key == "stale") c.stale = value;
      else if (key == "bandwidth") c.ceilings.bandwidth = strict_number(value);
      else if (key == "read_bandwidth") c.ceilings.read_bandwidth = strict_number(value);
      else if (key == "cache_bandwidth") c.ceilings.cache_bandwidth = strict_number(value);
      else
        for (Precision p : kAllPrecisions)
          if (key == to_string(p)) c.ceilings.flops_of(p) = strict_number(value);
    } catch (const std::exception&) {
      return refuse(key + " '" + excerpt(value, 40) + "' is not a number");
    }
  }
  const std::string current = std::to_string(kCeilingsFormat);
  if (format != current)
    return refuse(format.empty() ? "no format line" : "format " + excerpt(format, 20) + ", this host writes " + current);
  if (const std::string problem = ceilings_problem(c.ceilings, kind); !problem.empty()) return refuse(problem);
  if (!c.stale.empty()) return refuse("marked stale: " + c.stale);
  return c;
}

std::optional<CachedCeilings> read_ceilings(const std::string& path, DeviceKind kind, std::string* why_not) {
  if (why_not) why_not->clear();
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_ceilings(text.str(), kind, why_not);
}

void write_ceilings(const std::string& path, const CachedCeilings& c) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create " + fs::path(path).parent_path().string() + ": " + ec.message());
  std::ofstream out(path, std::ios::trunc);
  out << serialize_ceilings(c);
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

void mark_ceilings_stale(const std::string& path, const std::string& reason) {
  std::ofstream out(path, std::ios::app);
  out << "stale " << printable(reason) << "\n";
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

std::optional<Ceilings> settled_ceilings(const std::vector<Ceilings>& rounds, double tolerance, std::string* unsettled) {
  if (rounds.size() < 2) {
    if (unsettled) *unsettled = "one round measured";
    return std::nullopt;
  }
  Ceilings best;
  auto settle = [&](const std::string& name, auto figure, const char* unit) {
    std::vector<double> values;
    for (const Ceilings& round : rounds) values.push_back(figure(round));
    std::sort(values.begin(), values.end(), std::greater<>());
    figure(best) = values[0];
    // Load on the machine only slows a round: the best is the device, if another round comes close to it.
    if (values[0] > 0 && values[1] < values[0] * (1 - tolerance)) {
      if (unsettled && unsettled->empty())
        *unsettled = name + ": " + rate_text(values.back(), unit) + " to " + rate_text(values[0], unit);
      return false;
    }
    return true;
  };
  if (unsettled) unsettled->clear();
  bool settled = settle("bandwidth", [](auto& c) -> auto& { return c.bandwidth; }, "B/s");
  settled &= settle("read_bandwidth", [](auto& c) -> auto& { return c.read_bandwidth; }, "B/s");
  settled &= settle("cache_bandwidth", [](auto& c) -> auto& { return c.cache_bandwidth; }, "B/s");
  for (Precision p : kAllPrecisions)
    settled &= settle(to_string(p), [p](auto& c) -> auto& { return c.flops[static_cast<std::size_t>(p)]; }, "FLOP/s");
  if (!settled) return std::nullopt;
  return best;
}

}  // namespace roofbench
