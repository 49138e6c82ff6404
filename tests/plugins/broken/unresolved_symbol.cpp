// A plugin that calls a function no library defines. Linked without -Wl,--no-undefined so the link
// succeeds and the failure surfaces when the host loads it (RTLD_NOW).
#include <roofbench/plugin.hpp>

extern "C" const char* roofbench_test_function_defined_nowhere();

namespace {

void describe(roofbench::Plugin& plugin) {
  plugin.name = "unresolved_symbol";
  plugin.description = roofbench_test_function_defined_nowhere();
}

}  // namespace

ROOFBENCH_PLUGIN("unresolved_symbol", describe)
