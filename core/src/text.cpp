#include "text.hpp"

#include <cstdio>

namespace roofbench {

std::string printable(const std::string& text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u != 0x7f) || (keep_line_breaks && c == '\n')) {
      out += c;
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", u);
    out += escaped;
  }
  return out;
}

std::string excerpt(const std::string& text, std::size_t width) {
  if (text.size() <= width) return printable(text);
  return printable(text.substr(0, width)) + "... (" + std::to_string(text.size()) + " characters)";
}

}  // namespace roofbench
