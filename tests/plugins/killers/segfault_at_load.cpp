// Kills whatever process loads it from a static constructor, before any roofbench code is called.
#include <roofbench/plugin.hpp>

#include <cstdio>

namespace {
struct CrashesWhenConstructed {
  CrashesWhenConstructed() {
    std::fprintf(stderr, "segfault_at_load: about to crash in a static constructor\n");
    *static_cast<volatile int*>(nullptr) = 1;
  }
} crashes;
void describe(roofbench::Plugin&) {}
}  // namespace

ROOFBENCH_PLUGIN("segfault_at_load", describe)
