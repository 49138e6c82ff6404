// The plugin's entry point only; the cases live in roofbench_micro_cases, which the tests link too.
#include "cases.hpp"

ROOFBENCH_PLUGIN("micro", roofbench::micro::describe)
