#include "text.hpp"

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>

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

std::string demangled(const char* mangled) {
  int status = 0;
  char* readable = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && readable ? readable : mangled;
  std::free(readable);
  return name;
}

}  // namespace roofbench
