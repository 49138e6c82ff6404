// roofbench plugin API: the header every plugin includes (a CUDA plugin adds roofbench/cuda.hpp).
//
// A plugin is a shared library that exports one entry point: ROOFBENCH_PLUGIN("name", describe), from
// roofbench/detail/abi.hpp, which this header includes at its end. It describes benchmark cases; the
// host owns everything else: timing, warm-up, repetition, counters, the roofline and the correctness
// gate. A case never times itself.
//
// Life of one benchmark (one case at one point of its axes' cartesian product):
//   make(params) -> setup(ctx)          allocate through ctx.alloc(), fill inputs with ctx.fill_random()
//   host poisons every output buffer (all bytes 0xFF: NaN in fp64/fp32/bf16/fp16/fp8)
//   run(ctx); host synchronises;        the gate run, on fresh inputs
//   check(ctx) -> Check                 relative L2 error against the case's own reference
//   figures() -> named values           numbers and texts reported as they are (model size, algorithm)
//   run(ctx) many times                 warm-up, then timed samples (the host decides how many)
//   teardown(ctx)                       the host frees what ctx.alloc() gave
//
// run() must only enqueue work on ctx.stream() (CUDA) or do the work (CPU); it must not synchronise
// the device, allocate, or read the clock. It may be captured into a CUDA graph.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace roofbench {

enum class DeviceKind { cpu, cuda };

// The arithmetic a case's FLOPs run in: picks the compute roof and the gate's default tolerance.
enum class Precision { fp64, fp32, tf32, bf16, fp16, fp8 };

// Relative L2 error a gate accepts by default, per precision, for outputs whose reference is computed
// in fp64 from the exact (already rounded) inputs. The budget covers the rounding of the output (half
// an epsilon: 2e-3 for bf16) and accumulation over long sums (errors grow like sqrt(k) x epsilon:
// about 1e-5 for fp32 sums of 16384 terms), with headroom; an error of a few percent in one element out
// of a hundred still fails every one of them.
constexpr double default_tolerance(Precision p) {
  switch (p) {
    case Precision::fp64: return 1e-12;
    case Precision::fp32: return 1e-5;
    case Precision::tf32: return 5e-3;
    case Precision::bf16: return 2e-2;
    case Precision::fp16: return 5e-3;
    case Precision::fp8: return 1e-1;
  }
  return 0;
}

constexpr const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp64: return "fp64";
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp8: return "fp8";
  }
  return "?";
}

constexpr const char* to_string(DeviceKind k) { return k == DeviceKind::cpu ? "cpu" : "cuda"; }

// What a case needs to run: one CPU, one GPU, or ranks that work together, provided there are at least
// `count` of them. gpus(): every selected GPU of one host (--gpus, default all), one rank per GPU; when a
// launcher (torchrun, srun, mpirun) started one roofbench per GPU, one rank in each process instead.
// cpu_ranks(): the CPU of each process a launcher started, one rank each; never run without a launcher.
struct DeviceNeed {
  DeviceKind kind = DeviceKind::cpu;
  int count = 1;
  bool all_selected_gpus = false;  // ranks that work together (gpus(), cpu_ranks())
  static DeviceNeed cpu() { return {DeviceKind::cpu, 1, false}; }
  static DeviceNeed gpu() { return {DeviceKind::cuda, 1, false}; }
  static DeviceNeed gpus(int minimum) { return {DeviceKind::cuda, minimum, true}; }
  static DeviceNeed cpu_ranks(int minimum) { return {DeviceKind::cpu, minimum, true}; }
};

// One parameter axis; values are strings so that "bf16" and "4096" are treated alike. The host runs the
// cartesian product of all axes and names each benchmark <plugin>/<case>/<axis>:<value>/...
struct Axis {
  std::string name;
  std::vector<std::string> values;

  static Axis ints(std::string name, std::vector<std::int64_t> values) {
    Axis a{std::move(name), {}};
    for (auto v : values) a.values.push_back(std::to_string(v));
    return a;
  }
  // first, first*factor, ... up to and including last (if it lands on it).
  static Axis powers(std::string name, std::int64_t first, std::int64_t last, std::int64_t factor = 2) {
    Axis a{std::move(name), {}};
    for (auto v = first; v <= last; v *= factor) a.values.push_back(std::to_string(v));
    return a;
  }
  static Axis strings(std::string name, std::vector<std::string> values) {
    return Axis{std::move(name), std::move(values)};
  }
};

// The value of every axis at one point of the product.
class Params {
 public:
  Params() = default;
  explicit Params(std::vector<std::pair<std::string, std::string>> items) : items_(std::move(items)) {}

  bool has(const std::string& axis) const {
    for (const auto& [k, v] : items_)
      if (k == axis) return true;
    return false;
  }
  const std::string& str(const std::string& axis) const {
    for (const auto& [k, v] : items_)
      if (k == axis) return v;
    throw std::out_of_range("roofbench: no axis named '" + axis + "'");
  }
  std::int64_t integer(const std::string& axis) const { return std::stoll(str(axis)); }
  double real(const std::string& axis) const { return std::stod(str(axis)); }
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// A named amount of one run that the host reports as a rate (amount / median time): Work::rates.
struct Amount {
  std::string name;
  double value = 0;
};

// A named value a case reports as it is, not divided by the time: a number (parameters of a model, loss
// after training, elements a gate compared) or a text (the algorithm a library chose, its math type).
// Numbers become fields of the benchmark's result, texts its "facts"; the report shows both.
//   {"parameters", 124e6}   {"algorithm", "IMPLICIT_PRECOMP_GEMM"}
struct Figure {
  std::string name;
  double number = 0;
  std::string text;
  bool is_text = false;

  Figure(std::string name, double number) : name(std::move(name)), number(number) {}
  Figure(std::string name, std::string text) : name(std::move(name)), text(std::move(text)), is_text(true) {}
};

// The work of ONE run(), counted from the shapes (not measured): the host turns it into rates.
// bytes is the minimum traffic to main memory: each input read once, each output written once.
// bytes_read is the part of bytes that is read (the inputs read once); the host then places the case
// under a memory roof for that mix of reads and writes (docs/method.md). 0: not said.
// A case on several GPUs counts flops and bytes per rank (its result is placed against one GPU's roofs)
// and items of all ranks.
struct Work {
  double flops = 0;
  double bytes = 0;
  double bytes_read = 0;  // of bytes, the minimum read; 0: not said (read_dominated then chooses the roof)
  double items = 0;       // elements, tokens, images...: reported as <item_name>/s
  std::string item_name;  // e.g. "tokens"; empty: items are not reported
  // Further amounts per run that the host reports as rates (amount / median time) under their own
  // name, e.g. {"busbw", bytes * 2(k-1)/k} for an all-reduce.
  std::vector<Amount> rates;
  // The minimum bytes are (nearly) all reads, as in attention decode reading a KV cache: the memory roof
  // is then the device's read-streaming ceiling, which is higher than its copy ceiling. Only consulted
  // when bytes_read is not said: bytes_read == bytes says the same more exactly.
  bool read_dominated = false;
};

// What check() found; figures the gate computed (elements compared, losses) the case keeps and returns
// from figures(). rel_l2_error = ||out - ref||_2 / ||ref||_2 (NaN if any output is not finite,
// which is what an output left poisoned gives). The host compares it with the case's tolerance.
struct Check {
  double rel_l2_error = 0;
  std::string detail;        // shown with a failed gate: where it went wrong, what was compared
  bool passed_extra = true;  // false fails the gate whatever the error (e.g. "loss did not fall")
};

// Relative L2 error of `out` against `ref`: the measure every gate uses. Any non-finite output gives NaN.
template <typename Out, typename Ref>
double relative_l2_error(const Out* out, const Ref* ref, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double o = static_cast<double>(out[i]), r = static_cast<double>(ref[i]);
    if (!(o - o == 0)) return std::numeric_limits<double>::quiet_NaN();
    num += (o - r) * (o - r);
    den += r * r;
  }
  if (den == 0) return num == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

enum class BufferRole {
  input,    // filled by the case (fill_random / copy); never poisoned
  output,   // poisoned by the host before the gate run
  scratch,  // workspace: neither filled nor poisoned
};

enum class ElementType { f64, f32, bf16, f16, fp8_e4m3, i32 };

struct DeviceInfo {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;          // cuda:N
  std::string name;       // "NVIDIA H200", the CPU model name
};

// The host's side of a benchmark, given to every hook. Memory from alloc() is owned and counted by the
// host (the case's high-water mark is reported) and freed after teardown(). Ranks: cases that need
// several GPUs get one device and one stream per rank; single-device cases use rank 0.
class Context {
 public:
  virtual ~Context() = default;
  virtual const Params& params() const = 0;
  virtual int ranks() const = 0;
  virtual const DeviceInfo& device(int rank = 0) const = 0;
  // cudaStream_t of the rank's device on CUDA; nullptr on the CPU.
  virtual void* stream(int rank = 0) const = 0;
  // Device memory on CUDA (cudaMalloc), 64-byte-aligned host memory on the CPU.
  virtual void* alloc(std::size_t bytes, BufferRole role, int rank = 0) = 0;
  // Fresh uniform random values in [lo, hi) from a seed that changes on every call. Ranks that work together
  // (DeviceNeed::gpus, cpu_ranks) draw other values on every rank, in one process or one per GPU under a launcher.
  virtual void fill_random(void* data, std::size_t count, ElementType type, double lo = -1.0, double hi = 1.0,
                           int rank = 0) = 0;
  // Synchronous copies between the case's device memory and host memory (plain memcpy on the CPU).
  virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, int rank = 0) = 0;
  virtual void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes, int rank = 0) = 0;
  // Waits for all work queued on the rank's stream.
  virtual void synchronize(int rank = 0) = 0;
  // A per-benchmark seed for a case's own generators (the same one fill_random starts from).
  virtual std::uint64_t seed() const = 0;

  // Ranks in several processes (a launcher started one roofbench per GPU): the ranks of the whole run, and
  // the global rank of this process's rank 0 (its rank r is first_rank() + r). In one process: ranks(), 0.
  virtual int world_size() const { return ranks(); }
  virtual int first_rank() const { return 0; }
  // Every process's `blob` on every process, in the order of their first ranks: the only channel between
  // the processes of a case (it passes through the host's rendezvous). In one process: {blob}. Throws
  // Error when another process failed the benchmark or stopped answering. Every process must call it
  // equally often, as it must run() (the host takes the same number of samples on every rank).
  virtual std::vector<std::string> exchange(const std::string& blob) { return {blob}; }
  // Global rank 0's `blob` on every process (NCCL's unique id travels this way); an exchange.
  std::string broadcast(const std::string& blob) { return exchange(blob).front(); }

  // True while the host counts the kernels of run() with CUPTI's range profiler (--counters), which does not
  // count the kernels of a CUDA graph: a case that replays a graph of its own enqueues its kernels instead.
  virtual bool counting_kernels() const { return false; }
};

// Copies of a case's inputs, for timing it cold without flushing the cache (optional: Case::rotation()).
// Under --cold the host asks for `copies` sets in all, so many that together they exceed twice the
// cache, and times a graph of runs that read them in turn: each run finds its data in main memory, with
// no flush and no event inside its span (docs/method.md). The SDK's InputCopies
// (roofbench/case_support/input_copies.hpp) is one for buffers made by ctx.alloc().
class Rotation {
 public:
  virtual ~Rotation() = default;
  // The bytes of one set: what a run reads (and, where its outputs rotate too, writes).
  virtual std::size_t bytes() const = 0;
  // Called once after the gate: makes sets 1..copies-1 beside set 0 (the buffers of setup()), through
  // ctx.alloc(), each input with the same contents, so that the gate holds on every set.
  virtual void make_copies(Context& ctx, int copies) = 0;
  // The set the next run() reads, 0..copies-1. A run's pointers are taken when it is enqueued, so a
  // graph captured run by run after use(0), use(1), ... keeps reading the sets in that order.
  virtual void use(int copy) = 0;
};

class Case {
 public:
  virtual ~Case() = default;
  virtual void setup(Context& ctx) = 0;
  virtual void run(Context& ctx) = 0;
  virtual Work work() const = 0;
  virtual Check check(Context& ctx) = 0;
  virtual void teardown(Context&) {}
  // Values reported as they are on every result (model size, the gate's figures, the algorithm a
  // library chose): called once after the gate (after setup when the gate is off), before teardown.
  virtual std::vector<Figure> figures() const { return {}; }
  // The copies of its inputs a case can rotate over under --cold; nullptr (the default): the host
  // flushes the cache before each cold sample instead.
  virtual Rotation* rotation() { return nullptr; }
};

// How the host may time a case. graphable: run() can be captured into a CUDA graph (true for pure
// kernel launches; false when run() uses host-side logic such as data-dependent control).
struct Timing {
  bool graphable = true;
  double min_samples = 10;  // the host takes at least this many samples
};

struct CaseSpec {
  std::string name;  // [A-Za-z0-9_.-]+
  std::string description;
  std::vector<Axis> axes;
  DeviceNeed device;
  Precision precision = Precision::fp32;
  std::function<std::unique_ptr<Case>(const Params&)> make;
  double tolerance = 0;     // 0: default_tolerance(precision)
  std::string sweep_axis;   // an axis run upward until throughput stops rising or memory runs out
  std::string ladder;       // cases with the same ladder name form a waterfall (e.g. "gpt")
  Timing timing;
  double timeout_s = 0;     // seconds one benchmark of this case may take in all; 0: the host's default
};

// Filled by the plugin's describe function.
struct Plugin {
  std::string name;  // the first part of every benchmark name
  std::string description;
  std::vector<CaseSpec> cases;
  void add(CaseSpec spec) { cases.push_back(std::move(spec)); }
};

// A plugin's problem, thrown from any hook: the host reports the message with the benchmark's name.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown from make() or setup() when this point of the axes does not apply to the device it got (fp8 on
// a GPU without fp8 tensor cores, an in-place all-reduce on one rank, which NCCL does not run at all):
// the benchmark is listed as not run with the reason, and is not a failure. Ranks that work together across
// processes agree on it after setup: thrown on one rank, the benchmark is not applicable on every rank.
struct NotApplicable : Error {
  using Error::Error;
};

}  // namespace roofbench

#include "roofbench/detail/abi.hpp"  // kAbiVersion, the fingerprint and ROOFBENCH_PLUGIN
