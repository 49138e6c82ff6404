// An entry point from a future (or ancient) plugin API: the host must refuse it before calling anything.
#include <roofbench/plugin.hpp>

namespace {

void describe(roofbench::Plugin& plugin) { plugin.name = "wrong_abi_version"; }

}  // namespace

extern "C" __attribute__((visibility("default"))) const roofbench_plugin_entry* roofbench_plugin() {
  static const roofbench_plugin_entry entry{999, "wrong_abi_version", &describe, nullptr};
  return &entry;
}
