#include "cpu_cases.hpp"

namespace {

void describe(roofbench::Plugin& plugin) {
  plugin.name = "cpu";
  plugin.description = "CPU memory bandwidth (STREAM copy and triad, elementwise add) and fp32 matmul from a "
                       "naive loop through cache blocking to the system BLAS";
  roofbench::plugins::cpu::add_cases(plugin);
}

}  // namespace

ROOFBENCH_PLUGIN("cpu", describe)
