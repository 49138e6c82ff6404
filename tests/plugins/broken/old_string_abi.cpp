// Built with -D_GLIBCXX_USE_CXX11_ABI=0 (tests/CMakeLists.txt): its std::string is not the host's, so
// the host must refuse it from the fingerprint alone, before describe() could hand one over.
#include <roofbench/plugin.hpp>

namespace {
void describe(roofbench::Plugin& plugin) { plugin.description = "built against the old std::string ABI"; }
}  // namespace

ROOFBENCH_PLUGIN("old_string_abi", describe)
