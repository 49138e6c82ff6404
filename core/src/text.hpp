// Text from outside (suite files, plugin names and messages) made safe to echo on one line.
#pragma once

#include <cstddef>
#include <string>

namespace roofbench {

// `text` with every control byte (escape sequences, newlines, tabs, DEL) shown as \xNN, so that what a
// plugin says cannot move the cursor, recolour a terminal or break a row; `keep_line_breaks` keeps '\n'
// (a message's lines, which the console cuts to the first).
std::string printable(const std::string& text, bool keep_line_breaks = false);

// printable(text), cut to `width` characters with "... (N characters)" after it when longer: how a bad
// input is echoed in a one-line error.
std::string excerpt(const std::string& text, std::size_t width = 80);

// A kernel's mangled name as C++ reads it ("void copy<float>(float const*, ...)"); the name itself where it
// does not demangle (a C kernel, a driver-made name).
std::string demangled(const char* mangled);

}  // namespace roofbench
