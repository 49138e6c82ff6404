// --counters: a pass after a GPU case's timing that reads the hardware's counters per kernel (CUPTI's
// Range Profiler): DRAM bytes read and written, L2 bytes and the floating-point work
// executed, summed per run. Set beside the plugin's modelled bytes and FLOPs they say why a case is as fast
// as it is: whether it moves the minimum bytes or a multiple of them. The pass is torn down, CUPTI detached,
// before the next case is timed (cupti_attachment.hpp), and --profile's and --kernel-time's traces may
// follow it or precede it. Here: what is counted and the bookkeeping (pure C++); the CUPTI part is
// cupti_counters.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace roofbench {

// One kernel's counters per run (or a whole run's, summed over its kernels).
struct KernelCounters {
  std::string name;
  double launches_per_run = 0;
  double dram_read = 0, dram_write = 0;  // bytes
  double l2_bytes = 0;                   // bytes the L2 served (lts__t_bytes)
  double flops_fp64 = 0, flops_fp32 = 0, flops_fp16 = 0;  // the SMs' FP pipes, an FMA counted as 2
  double flops_tensor = 0;                                // the tensor pipe, every precision
  double dram_bytes() const { return dram_read + dram_write; }
  double flops() const { return flops_fp64 + flops_fp32 + flops_fp16 + flops_tensor; }
};

struct CounterProfile {
  std::vector<KernelCounters> kernels;  // most DRAM bytes first
  KernelCounters total;                 // the sum of the kernels, per run
  double seconds = 0;                   // what the pass cost (its replays included)
  std::string error;                    // why there are no counters (no CUPTI, no permission, MIG, ...)
  std::string replay;                   // how they were counted: "kernel" or "run" replay
  int replay_runs = 0;                  // times the run was launched for them (run replay: once per pass)
  std::string run_replay_failure;       // why kernel replay counted them under --counters=auto
  bool collected() const { return error.empty() && !kernels.empty(); }
};

// How the pass reads every counter of a run, when the hardware reads only a few at a time (a pass each).
enum class CounterReplay {
  automatic,  // run replay; each kernel replayed where run replay fails or counts no kernel
  run,        // the whole run repeated once per pass, each after the pass's clean: nothing restored, for runs
              // that repeat alike
  kernel,     // each kernel launched again until every counter is read, its memory restored in between: the
              // restores leave the L2 holding the kernel's data and dirty lines, so DRAM bytes can read low or high
};
// "auto", "kernel", "run"; CounterReplay from those words (std::nullopt for any other).
const char* to_string(CounterReplay replay);
std::optional<CounterReplay> counter_replay_from(const std::string& word);

// What a counter adds to: one field of KernelCounters, times a weight (2 for an FMA instruction).
enum class CounterField { dram_read, dram_write, l2_bytes, flops_fp64, flops_fp32, flops_fp16, flops_tensor };
struct CounterMetric {
  const char* name;  // the metric, as CUPTI and Nsight Compute (ncu --metrics) name it
  CounterField field;
  double weight;
};
// Every metric the pass collects, in the order values are handed to add_range.
const std::vector<CounterMetric>& counter_metrics();

// Adds one range's metric values (one per counter_metrics(), same order) to `k`.
void add_range(KernelCounters& k, const std::vector<double>& values);

// The name of range `i` of the `ranges` of one run, counted over `passes` calls of the work, from the kernel
// launches the launch callbacks saw (mangled names, in launch order): the kernel's, demangled, when they
// match the ranges one for one in every pass (run replay sees each launch once per pass). Any other count
// means some ranges are launches the callbacks did not see (the callbacks could not subscribe, or a graph's
// kernels, which the pass refuses), and names would shift onto the wrong ranges; the ranges are then named by
// their place in the run ("kernel 2": its second launch).
std::string range_name(const std::vector<std::string>& launches_seen, std::size_t i, std::size_t ranges, int passes);

// One profiled range: a kernel launch, its name and its metric values.
struct CounterRange {
  std::string name;
  std::vector<double> values;
};
// The profile of one run's `ranges`: a row per kernel name (its launches summed), most DRAM bytes first, and
// their total.
CounterProfile sum_ranges(const std::vector<CounterRange>& ranges);

// measured / modelled; 0 when either is missing (nothing modelled, nothing counted).
double counter_ratio(double measured, double modelled);

// The console's one line on what the counters say against the model (modelled bytes and FLOPs per run);
// empty where they agree (within 20%) or there is nothing to compare.
std::string counters_verdict(const KernelCounters& measured, double modelled_bytes, double modelled_flops);

// Where a case the model places above the ridge (compute_roof / memory_roof, FLOP/s over B/s) is counted below
// it: the clause saying that by its counted bytes DRAM bounds it; empty otherwise.
std::string counted_ridge_clause(const KernelCounters& measured, double compute_roof, double memory_roof);

// Runs `run_and_wait` (one run of the case, which must synchronise) under the Range Profiler, every kernel
// launch a range, and returns its counters. Kernel replay calls it once; run replay once per pass.
// `device`: the GPU whose context is profiled (the one the kernels run on), current for the pass and restored
// after; -1: the calling thread's current device. `clean`, where given, enqueues the kernel (one launch) that
// leaves the caches clean, and waits: it runs at the start of each pass, after the profiler's own start, and
// its range is dropped. A run that launches a CUDA graph is refused: the profiler does not count a graph's
// kernels.
CounterProfile collect_counters(const std::function<void()>& run_and_wait, int device = -1,
                                CounterReplay replay = CounterReplay::automatic, const std::function<void()>& clean = {});

// The metrics of counter_metrics() that the profiler's host side does not know for `chip` (e.g. "GH100"),
// each with the reason; empty when all are known. Needs no GPU.
std::vector<std::string> unknown_counter_metrics(const std::string& chip);

}  // namespace roofbench
