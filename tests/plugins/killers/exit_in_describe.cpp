// Ends whatever process loads it with exit code 0, in describe().
#include <roofbench/plugin.hpp>

#include <cstdlib>

namespace {
void describe(roofbench::Plugin&) { std::exit(0); }
}  // namespace

ROOFBENCH_PLUGIN("exit_in_describe", describe)
