#include "ceilings_cache.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

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

// One "name value" pair per line; "how" lines keep their text. Format 2 added read_bandwidth: a format-1
// file has none, so it is measured again rather than read as a device without a read roof.
std::string serialize_ceilings(const CachedCeilings& c) {
  std::ostringstream out;
  out.precision(17);
  out << "format 2\n";
  out << "measured_at " << c.measured_at << "\n";
  out << "bandwidth " << c.ceilings.bandwidth << "\n";
  out << "read_bandwidth " << c.ceilings.read_bandwidth << "\n";
  for (Precision p : kAllPrecisions) out << to_string(p) << " " << c.ceilings.flops_of(p) << "\n";
  for (const auto& h : c.how) out << "how " << h << "\n";
  return out.str();
}

std::optional<CachedCeilings> parse_ceilings(const std::string& text) {
  CachedCeilings c;
  std::istringstream in(text);
  bool format_ok = false, has_bandwidth = false, has_read_bandwidth = false;
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space), value = line.substr(space + 1);
    try {
      if (key == "format") format_ok = value == "2";
      else if (key == "measured_at") c.measured_at = value;
      else if (key == "how") c.how.push_back(value);
      else if (key == "bandwidth") c.ceilings.bandwidth = std::stod(value), has_bandwidth = true;
      else if (key == "read_bandwidth") c.ceilings.read_bandwidth = std::stod(value), has_read_bandwidth = true;
      else
        for (Precision p : kAllPrecisions)
          if (key == to_string(p)) c.ceilings.flops_of(p) = std::stod(value);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (!format_ok || !has_bandwidth || !(c.ceilings.bandwidth > 0)) return std::nullopt;
  if (!has_read_bandwidth || !(c.ceilings.read_bandwidth > 0)) return std::nullopt;
  return c;
}

std::optional<CachedCeilings> read_ceilings(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_ceilings(text.str());
}

void write_ceilings(const std::string& path, const CachedCeilings& c) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::trunc);
  out << serialize_ceilings(c);
}

}  // namespace roofbench
