// The nccl plugin's entry point; the cases live in allreduce.cpp.
#include "allreduce.hpp"

ROOFBENCH_PLUGIN("nccl", roofbench::nccl::describe_plugin)
