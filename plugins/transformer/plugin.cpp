// The plugin's entry point only; the cases live in roofbench_transformer_cases, which the tests link too.
#include "cases.hpp"

ROOFBENCH_PLUGIN("transformer", roofbench::transformer::describe)
