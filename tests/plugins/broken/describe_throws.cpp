// A plugin whose describe() throws: the host must report it and carry on with the others.
#include <roofbench/plugin.hpp>

namespace {

void describe(roofbench::Plugin&) { throw roofbench::Error("describe_throws cannot describe itself"); }

}  // namespace

ROOFBENCH_PLUGIN("describe_throws", describe)
