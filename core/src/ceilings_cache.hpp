// Ceilings are measured once per device and kept in a small text file per device key:
// $ROOFBENCH_CACHE_DIR, else $XDG_CACHE_HOME/roofbench, else ~/.cache/roofbench.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "roofline.hpp"

namespace roofbench {

struct CachedCeilings {
  Ceilings ceilings;
  std::string measured_at;
  std::vector<std::string> how;
};

std::string ceilings_cache_path(const std::string& device_key);
std::optional<CachedCeilings> read_ceilings(const std::string& path);
void write_ceilings(const std::string& path, const CachedCeilings& c);

std::string serialize_ceilings(const CachedCeilings& c);
std::optional<CachedCeilings> parse_ceilings(const std::string& text);

}  // namespace roofbench
