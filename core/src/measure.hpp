// The measurement engine: runs one benchmark from setup to teardown (gate, warm-up, samples) into a typed
// Measurement of its own, and returns a self-describing Result: identity, status, figures (Summary) and
// samples. Printers (Google Benchmark's console, the results JSON) only read Results; nothing here prints.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <limits>
#include <string>
#include <vector>

#include "benchmark_set.hpp"
#include "device.hpp"
#include "kernel_counters.hpp"
#include "kernel_profile.hpp"
#include "kernel_time.hpp"
#include "roofline.hpp"
#include "statistics.hpp"
#include "summary.hpp"

namespace roofbench {

enum class GraphMode { automatic, on, off };

struct MeasureOptions {
  bool gate = true;
  bool cold = false;
  GraphMode graph = GraphMode::automatic;
  double noise_bound = 0.01;   // stop sampling once stdev/mean is under this...
  double min_time = 0.05;      // ...after at least this much sampling time
  double max_time = 5.0;       // and never sample for longer than this (seconds)
  double warmup_max = 2.0;     // seconds of warm-up at most
  double clock_floor = 0.75;   // samples with the SM clock under this fraction of the highest a sample reached are dropped
  int runs_per_sample = 0;     // > 0: this many runs per sample instead of the host's choice
  std::uint64_t seed = 0x5EED;
  int profile_runs = 0;        // > 0: after timing, a CUPTI pass over this many runs (GPU cases)
  int kernel_time_samples = 0; // > 0: after timing, kernel_time from a CUPTI trace of this many samples
  double energy_seconds = 0;   // > 0 (--energy): sample at least this long, with the energy counter polled beside
  bool counters = false;       // --counters: after timing, a pass that reads the hardware's counters (GPU cases)
  CounterReplay counter_replay = CounterReplay::automatic;  // --counters=MODE: how that pass replays
};

// The longest a benchmark samples: --max-time, or --energy's seconds where they are more (and the device has
// a counter); what timeouts must allow for.
inline double longest_sampling_seconds(const MeasureOptions& m) { return std::max(m.max_time, m.energy_seconds); }

// crashed and timed_out are given by the parent when a worker process died in, or ran past the timeout
// of, a benchmark (--isolation=process). refused: the plugin has no code for the device's architecture
// (a build for other GPUs): not run, like not_applicable, but a failure of the run, since the case does
// apply to this device.
// implausible: timed, but faster than the device can go (plausibility.hpp): a failure, not a measurement.
enum class Status { ok, gate_failed, error, out_of_memory, not_applicable, crashed, timed_out, refused, implausible };
constexpr const char* to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::gate_failed: return "gate_failed";
    case Status::error: return "error";
    case Status::out_of_memory: return "out_of_memory";
    case Status::not_applicable: return "not_applicable";
    case Status::crashed: return "crashed";
    case Status::timed_out: return "timed_out";
    case Status::refused: return "refused";
    case Status::implausible: return "implausible";
  }
  return "?";
}
// The words a status's message opens with where the results file and Google Benchmark show it ("gate
// failed: relative L2 error ..."): a result's message keeps only what follows, so the console, which says
// the status in a word of its own, never strips English back off.
constexpr const char* message_prefix(Status s) {
  switch (s) {
    case Status::gate_failed: return "gate failed: ";
    case Status::crashed: return "crashed: ";
    case Status::timed_out: return "timed out: ";
    case Status::implausible: return "implausible: ";
    default: return "";
  }
}

// Whose word a gate word is: the gate's own (the label, the console: off, fail, pass, none), or the
// results entry's `gate`, where a result that failed for another reason says "error".
enum class GateView { gate, entry };

struct MemoryFigures {
  double allocated = 0;     // what the case holds through ctx.alloc at the end of the run
  double peak = 0;          // high-water mark of the case's own allocations
  double reserved = 0;      // what the host's allocator took from the driver for the case
  double driver_used = 0;   // the whole device's used memory as the driver reports it, during the case
  // Device memory the case did not give back: the driver's used memory after teardown (and the host's
  // frees) minus before setup, when over kLeakReportBytes; 0 otherwise.
  double leaked = 0;
};

// Leaks under this are not reported: libraries load kernels and grow pools lazily on first use.
inline constexpr double kLeakReportBytes = 256.0 * 1024 * 1024;

// Where a benchmark's wall time went, in seconds: what makes a run slow is rarely the timed work.
struct PhaseSeconds {
  double setup = 0, gate = 0, warmup = 0, sampling = 0, profile = 0, total = 0;
};

// A text a case reported (a Figure that is_text): written under the result's "facts".
struct Fact {
  std::string name;
  std::string value;
};

// One rank's own figures of a benchmark measured by several processes (a launcher started one roofbench
// per GPU): rank 0 keeps each rank's beside the slowest rank's result, which is the benchmark's.
struct RankFigures {
  int rank = 0;
  std::string host;
  std::string device;  // the rank's device label
  Status status = Status::ok;
  double time_median = std::numeric_limits<double>::quiet_NaN();
  double sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();
  double energy_per_run = std::numeric_limits<double>::quiet_NaN();
};

// What a Measurement and its Result share: which benchmark in what setting, how it ended, its samples and
// the parts that are not scalar figures (work, facts, memory, the kernel profile, phases, how it ran).
struct ResultParts {
  std::string name, plugin, case_name, ladder;
  std::string sweep_axis;  // the case's (CaseSpec::sweep_axis); the roofline joins the points along it
  Params params;
  Precision precision = Precision::fp32;
  std::string device;  // "cpu", "cuda:0", "cuda:0,1"
  Status status = Status::ok;
  std::string message;  // why it failed (after message_prefix(status)); notes otherwise

  std::vector<double> samples;  // seconds per run, one per kept sample
  std::vector<double> sample_clocks_mhz;  // each kept sample's SM clock (GPU; SampleTime::clock_mhz), same order

  Work work;
  std::vector<Fact> case_facts;  // the case's figures that are texts
  MemoryFigures memory;
  KernelProfile profile;  // filled when a profiled pass was asked for
  KernelTimeFigures kernel_time;  // filled when --kernel-time asked for it (kernel_time.hpp)
  CounterProfile counters;  // filled when --counters asked for the counters (or why there are none)
  PhaseSeconds phases;
  bool gate_checked = false;
  bool graph = false;
  bool cold = false;
  int cold_copies = 0;  // cold by rotation over this many copies of the case's inputs; 0: by flush, or hot
  // Hot, and the case's minimum bytes fit in the device's last-level cache: runs read it there, so the
  // DRAM roof understates what they can reach; the run is placed under the cache bandwidth instead.
  bool cache_resident = false;
  bool hold_abandoned = false;  // the hold timed out with one run queued (a profiler serialising launches)
  // Why the samples cannot be trusted as one number (two clusters, noise far above --noise, unsettled:
  // sample_quality.hpp); empty when they can. A noisy result still passed its gate, but says so everywhere.
  std::string quality_reason;
  std::string energy_note;  // why --energy has no figure, when it was asked for (energy.hpp)
  // Every rank's figures, when processes of several ranks measured the benchmark (rank_mode.hpp); else empty.
  std::vector<RankFigures> rank_figures;

  bool passed() const { return status == Status::ok; }
  bool noisy() const { return !quality_reason.empty(); }
};

// What the engine fills while it measures (the sample loop, its observers, the gate): a typed field per
// figure. It never leaves measure(): result_of (summaries.hpp) turns it into the Result that does.
struct Measurement : ResultParts {
  std::vector<Amount> case_counters;  // the case's figures that are numbers
  double gate_error = std::numeric_limits<double>::quiet_NaN();
  double tolerance = 0;

  double noise_at_fixed_clock = std::numeric_limits<double>::quiet_NaN();  // see statistics.hpp
  SampleSummary stats;
  int warmup_iterations = 0;
  int runs_per_sample = 1;
  int throttled_samples = 0;
  int samples_with_mean_clock = 0;  // samples whose clock is the mean over the sample (else read after it)
  int hold_timeouts = 0;  // samples dropped because the stream hold timed out (see cuda_device.cu)
  double mean_clock_mhz = 0;
  // --energy (energy.hpp): the devices' energy per run and mean power over a window of the samples (summed
  // over the ranks), NaN where not measured.
  double energy_per_run_j = std::numeric_limits<double>::quiet_NaN();
  double mean_power_w = std::numeric_limits<double>::quiet_NaN();
  double energy_window_s = 0;       // the longest of the ranks' windows
  double energy_busy_fraction = 0;  // the least busy rank's: the samples' device time over its window
  RooflinePoint point;
  std::vector<Amount> rates;  // Work::rates divided by the median time
};

// One benchmark's outcome, as it crosses from the worker to the parent and every printer reads it: the
// shared parts, and its figures (the host's table and the case's own) as a list of Summary.
struct Result : ResultParts {
  // Every figure the measurement made, timed ones included whatever the status (Summary::timed);
  // summaries_of gives those a reader shows. The case's figures keep their own names here.
  std::vector<Summary> summaries;
  Bound bound = Bound::memory;  // where the result sits on the roofline
  double attainable_flops = 0;  // the roofline's height there
  MemoryRoof memory_roof;       // the memory roof it was placed under (roofline.hpp); 0 B/s: none measured

  // The value of one of the host's figures (fig::), NaN where the measurement did not make it.
  double figure(std::string_view name) const;
  // The message as the results file, Google Benchmark and stderr give it: the status's words, then why.
  std::string error_message() const { return message_prefix(status) + message; }
  std::string gate_word(bool gate_enabled, GateView view = GateView::gate) const;
  std::string label(bool gate_enabled) const;
};

// This process's place among processes that measure together (a launcher started one roofbench per
// GPU; rank_mode.hpp): the world's ranks, the global rank of this process's first rank, and the exchange
// of a blob with every other process (Context::exchange), which throws Error when a round fails.
// world_size 1: one process, as without a launcher.
struct RankWorld {
  int world_size = 1;
  int first_rank = 0;
  std::function<std::vector<std::string>(const std::string&)> exchange;
  // Polled while a worker process measures a case whose ranks work together (ProcessRunner): why its
  // measurement must end now (another rank failed the benchmark, or the ranks lost each other), else nothing.
  std::function<std::optional<std::string>()> watch;
  bool spans_processes() const { return world_size > 1 && static_cast<bool>(exchange); }
};

// A failure that another rank caused starts with this (Context::exchange throws it, and a rank whose
// gate passed stops so when another's failed): the combined result names the rank where it began instead.
inline constexpr const char* kEndedByRank = "ended by rank ";

// The blobs of the exchange after the setup of ranks that work together across processes: each rank's verdict
// on whether the case applies ("set up", or kNotApplicableBlob and why). Rank 0 reads them (decide_round): a
// rank that gave its verdict while another still exchanged inside its setup is out of step.
inline constexpr const char* kSetUpBlob = "set up";
inline constexpr const char* kNotApplicableBlob = "not applicable: ";

// "cpu", "cuda:0", "cuda:0,1"
std::string device_label(const std::vector<Device*>& ranks);

// A Measurement naming the benchmark and its setting, with nothing measured: what measure() starts from.
Measurement unmeasured(const BenchmarkSpec& benchmark, const std::vector<Device*>& ranks);
// Its Result: what the parent fills in for a benchmark whose worker died.
Result unmeasured_result(const BenchmarkSpec& benchmark, const std::vector<Device*>& ranks);

// The engine's own outcome, typed (what its tests look into), and the Result that leaves it.
// `world`: the processes this one measures with; a case of ranks that work together (DeviceNeed::gpus,
// cpu_ranks) then takes the same number of samples on every rank (sample_loop.hpp).
Measurement take_measurement(const BenchmarkSpec& benchmark, const std::vector<Device*>& ranks, const Ceilings& ceilings,
                             const MeasureOptions& options, const RankWorld& world = {});
Result measure(const BenchmarkSpec& benchmark, const std::vector<Device*>& ranks, const Ceilings& ceilings,
               const MeasureOptions& options, const RankWorld& world = {});

}  // namespace roofbench
