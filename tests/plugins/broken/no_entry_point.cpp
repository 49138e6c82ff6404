// A shared library that exports nothing, in particular no roofbench_plugin entry point.
namespace {

[[maybe_unused]] int answer() { return 42; }

}  // namespace
