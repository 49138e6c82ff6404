#include "cases.hpp"

namespace roofbench::micro {

void describe(Plugin& plugin) {
  plugin.name = "micro";
  plugin.description =
      "GPU micro-benchmarks: cuBLAS matmuls per precision against hand-written ones, "
      "elementwise add and device copy for the bandwidth roof";
  add_matmul_cases(plugin);
  add_elementwise_cases(plugin);
}

}  // namespace roofbench::micro
