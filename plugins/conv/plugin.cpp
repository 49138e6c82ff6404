// The plugin's entry point only; the cases live in roofbench_conv_cases, which the tests link too.
#include "cases.hpp"

ROOFBENCH_PLUGIN("conv", roofbench::conv::describe)
