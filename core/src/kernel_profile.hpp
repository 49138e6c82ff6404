// CUPTI's kernel activity records over passes of a case's launches: where one run spends its GPU time,
// kernel by kernel (--profile), and the kernels' own time per run (--kernel-time, kernel_time.hpp). A
// traced pass runs after the case's timing and is torn down completely (flush, disable, CUPTI detached:
// cupti_attachment.hpp) before the next case is timed, because CUPTI's instrumentation otherwise keeps taxing
// every launch; --counters' pass may follow it or precede it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace roofbench {

// One kernel's execution as CUPTI recorded it, or a memcpy's or memset's (a copy case's GPU work is a
// cudaMemcpyAsync, which CUPTI does not record as a kernel): nanoseconds on CUPTI's clock.
struct KernelRecord {
  int name = 0;  // index into KernelTrace::names
  int pass = 0;  // which call of run_and_wait launched it
  std::uint64_t start = 0, end = 0;
  bool kernel = true;  // false: a memcpy or memset
};

struct KernelTrace {
  std::vector<std::string> names;  // as CUPTI gives them (mangled)
  std::vector<KernelRecord> records;
  int passes = 0;
  std::string error;  // why there are no records (no CUPTI, a driver that refuses, the runs failed)
};

// Ranks in other processes that run the traced passes with this one (a collective under a launcher) must run
// as many passes, or one waits in a collective the others never reach. Called with this rank's trouble ("":
// none) once CUPTI is enabled and after each pass, on every rank alike; returns the trouble that ends the
// passes on every rank ("": none): this rank's own, or another's, named. Empty: this process decides alone.
using PassAgreement = std::function<std::string(const std::string& own_trouble)>;

// Runs `run_and_wait` (which must synchronise) `passes` times under CUPTI's concurrent-kernel, memcpy and
// memset activity (kernels replayed from a graph are recorded too), each pass's records flushed before the
// next starts so every record knows its pass.
KernelTrace trace_kernels(const std::function<void()>& run_and_wait, int passes, const PassAgreement& agree = {});

struct KernelTime {
  std::string name;
  double seconds_per_run = 0;  // summed over its launches in one run
  double launches_per_run = 0;
};

struct KernelProfile {
  std::vector<KernelTime> kernels;  // most time first
  double kernel_seconds_per_run = 0;
  // From a pass's first record's start to its last record's end, and the part of that span in which no kernel,
  // memcpy or memset ran: the device waiting between launches (launch latency, a host in the loop, a graph's
  // dependencies). Concurrent records count once.
  double span_seconds_per_run = 0;
  double idle_seconds_per_run = 0;
  std::string error;  // why there is no profile (no CUPTI, not a GPU case, ...)
};

// The trace's kernels (not its memcpys and memsets) by name (demangled), each one's time and launches per
// call of run_and_wait; the span and idle time of each call over all its records.
KernelProfile profile_of(const KernelTrace& trace);

// Runs `run_and_wait` `runs` times under CUPTI and returns the breakdown per call.
KernelProfile profile_kernels(const std::function<void()>& run_and_wait, int runs, const PassAgreement& agree = {});

// Multiplies every per-run figure by `factor` (when one call of run_and_wait held several runs).
inline void scale_per_run(KernelProfile& profile, double factor) {
  for (auto& k : profile.kernels) k.seconds_per_run *= factor, k.launches_per_run *= factor;
  profile.kernel_seconds_per_run *= factor;
  profile.span_seconds_per_run *= factor;
  profile.idle_seconds_per_run *= factor;
}

}  // namespace roofbench
