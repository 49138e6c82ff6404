// Google Benchmark's own reading of its flags, after benchmark::Initialize. The filter has an API
// (GetBenchmarkFilter); these do not, in 1.7 or 1.8, so they are read from the library's flag
// variables, which both versions define and export under these names.
#pragma once

#include <string>

namespace roofbench {

bool google_benchmark_lists_tests();  // --benchmark_list_tests
int google_benchmark_repetitions();   // --benchmark_repetitions
std::string google_benchmark_format();  // --benchmark_format: console, json or csv
bool google_benchmark_interleaves();     // --benchmark_enable_random_interleaving
double google_benchmark_min_warmup_time();  // --benchmark_min_warmup_time (seconds; 0: none)

}  // namespace roofbench

#include <string>

namespace roofbench {

// What Google Benchmark itself writes in its JSON context, for the results file to copy.
struct GoogleBenchmarkContext {
  int num_cpus = 0;
  double mhz_per_cpu = 0;
  std::string library_build_type;  // "debug" or "release": how the library was built
};
GoogleBenchmarkContext google_benchmark_context();

}  // namespace roofbench
