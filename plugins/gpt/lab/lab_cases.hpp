// The kernel lab's benchmarks (lab_cases.cpp): every numbered version of a piece of the step that the lab
// keeps, timed on its own at the training shape, its version in its name. The gpt plugin registers them.
#pragma once

#include <vector>

#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda {

std::vector<CaseSpec> lab_cases();

}  // namespace roofbench::gpt::cuda
