#include "google_benchmark_flags.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <sstream>

namespace benchmark {
extern bool FLAGS_benchmark_list_tests;
extern std::int32_t FLAGS_benchmark_repetitions;
extern std::string FLAGS_benchmark_format;
extern bool FLAGS_benchmark_enable_random_interleaving;
extern double FLAGS_benchmark_min_warmup_time;
}  // namespace benchmark

namespace roofbench {

bool google_benchmark_lists_tests() { return benchmark::FLAGS_benchmark_list_tests; }
int google_benchmark_repetitions() { return benchmark::FLAGS_benchmark_repetitions; }
std::string google_benchmark_format() { return benchmark::FLAGS_benchmark_format; }
bool google_benchmark_interleaves() { return benchmark::FLAGS_benchmark_enable_random_interleaving; }
double google_benchmark_min_warmup_time() { return benchmark::FLAGS_benchmark_min_warmup_time; }

}  // namespace roofbench

namespace roofbench {

GoogleBenchmarkContext google_benchmark_context() {
  GoogleBenchmarkContext c;
  const benchmark::CPUInfo& cpu = benchmark::CPUInfo::Get();
  c.num_cpus = cpu.num_cpus;
  c.mhz_per_cpu = cpu.cycles_per_second / 1e6;
  // The build type is only known inside the library: its own JSON context says it.
  std::ostringstream text, errors;
  benchmark::JSONReporter reporter;
  reporter.SetOutputStream(&text);
  reporter.SetErrorStream(&errors);
  reporter.ReportContext(benchmark::BenchmarkReporter::Context());
  const std::string json = text.str(), key = "\"library_build_type\": \"";
  if (const auto at = json.find(key); at != std::string::npos) {
    const auto start = at + key.size();
    c.library_build_type = json.substr(start, json.find('"', start) - start);
  }
  return c;
}

}  // namespace roofbench
