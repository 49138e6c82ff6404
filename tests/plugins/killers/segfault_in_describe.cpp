// Kills whatever process loads it, in describe(): the host must report it by path and go on.
#include <roofbench/plugin.hpp>

namespace {
void describe(roofbench::Plugin&) { *static_cast<volatile int*>(nullptr) = 1; }
}  // namespace

ROOFBENCH_PLUGIN("segfault_in_describe", describe)
