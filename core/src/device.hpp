// The devices the host measures on. Each Device is one CPU or one GPU; a case that needs several GPUs
// gets one Device per rank. Plugins never see this interface: they get a Context (plugin.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "cuda_arch.hpp"
#include "roofbench/plugin.hpp"
#include "roofline.hpp"

namespace roofbench {

// Thrown when an allocation fails for lack of memory: a sweep ends on it instead of failing the run.
struct OutOfMemory : Error {
  using Error::Error;
};

class Timer;
struct TimingOptions;

// A CPU's last-level cache as the kernel's topology gives it (cache_dir: /sys/devices/system/cpu/cpu0/cache,
// one index*/ folder per cache with level, type and size): the highest level of a data or unified cache,
// its size in bytes (one instance: the size a core's data can stay in). Level 0, 0 bytes where it cannot
// be read.
struct CacheLevel {
  int level = 0;
  std::uint64_t bytes = 0;
};
CacheLevel last_level_cache(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");
// "32768K", "1024K", "36M", "512" as the kernel writes a cache's size; 0 when not one of these.
std::uint64_t cache_size_bytes(const std::string& text);

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  // Stable identity for the ceilings cache: model and, for GPUs, the board's UUID.
  virtual std::string key() const = 0;
  virtual void* stream() = 0;
  virtual void* allocate(std::size_t bytes) = 0;  // throws OutOfMemory
  virtual void release(void* data) noexcept = 0;
  virtual void fill_random(void* data, std::size_t count, ElementType type, double lo, double hi,
                           std::uint64_t seed) = 0;
  virtual void poison(void* data, std::size_t bytes) = 0;  // every byte 0xFF: NaN in every float format
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Makes this device the calling thread's current one (a GPU's cudaSetDevice), so that a single-device case's
  // own CUDA calls (handles, kernel launches on its stream) go to the device its stream belongs to.
  virtual void make_current() {}
  // The last-level cache a hot run's data can stay in (a GPU's L2); 0 if unknown.
  virtual double cache_bytes() const { return 0; }
  // That cache's level (2 for a GPU's L2, 3 for most CPUs' L3); 0 if unknown.
  virtual int cache_level() const { return 0; }
  // Bytes in use on the device as its driver reports them (whole device, all processes); 0 if unknown.
  virtual double driver_used_bytes() = 0;
  // Bytes still free on the device as its driver reports them; 0 if unknown.
  virtual double free_bytes() { return 0; }
  // After an error that may have left the device unusable (a sticky CUDA error): reset what can be
  // reset so the next case starts clean. Returns a note on what was done, empty if nothing.
  virtual std::string recover() { return {}; }
  // Whether a CUDA plugin's kernels have code this device can run, through the plugin's probe
  // (cuda_arch.hpp): one line saying why not, or nullopt. Devices that run no CUDA code refuse nothing.
  virtual std::optional<std::string> architecture_refusal(CudaProbe, std::string_view /*plugin_name*/) {
    return std::nullopt;
  }
  virtual Ceilings measure_ceilings(std::vector<std::string>& how) = 0;
  // A reader of the device's energy counter (joules since a fixed moment; nullopt on a failed read), for
  // --energy (energy.hpp); empty, with the reason in `why`, where the device has none.
  virtual std::function<std::optional<double>()> energy_counter(std::string& why) {
    why = "the " + std::string(info().kind == DeviceKind::cpu ? "CPU" : "device") + " has no energy counter here";
    return {};
  }
  // The Timer for a case's runs on `ranks` (this device first): the CPU's or CUDA's by the device's kind
  // (the sample loop's Launcher asks: sample_loop.hpp). A test device may return its own, to stand in for what the CPU never does (a stream
  // hold that times out).
  virtual std::unique_ptr<Timer> make_timer(const std::vector<Device*>& ranks, std::function<void()> run_once,
                                            const TimingOptions& options);
};

struct SampleTime {
  double seconds = 0;          // for all the runs of the sample together
  double clock_mhz = 0;        // the mean SM clock over the sample, else the one right after it; 0 if not known
  bool clock_spans_sample = false;  // clock_mhz is the mean over the whole sample
  bool hold_timed_out = false;  // the stream hold ended by timeout: the launches were not all queued
};

// The launch a Timer is made for: its launch strategy (make_launch_strategy, launch_strategy.hpp) and,
// on a GPU, the stream hold.
struct TimingOptions {
  bool cold = false;   // flush the caches before each sample (or rotate: copies)
  bool graph = false;  // capture the runs into a CUDA graph and time its replay
  bool hold = true;    // CUDA: hold the stream with a spin kernel while the runs are queued
  int copies = 0;      // cold by rotation over this many copies of the case's inputs (a graph); 0: not
  std::function<void(int)> use_copy;  // under rotation: makes the next run read that copy (Rotation::use)
};

// Times back-to-back runs of one case on its devices (all ranks; the slowest rank's time counts).
class Timer {
 public:
  virtual ~Timer() = default;
  virtual SampleTime time(int runs) = 0;
  // The launches of a sample of `runs` (a graph replay in graph mode), waited for, untimed: what a
  // profiled pass observes, so its per-kernel figures come from the same launch path as the timing.
  virtual void run_untimed(int runs) = 0;
  // The same runs enqueued one by one, never as a graph, waited for: what the counters pass counts (CUPTI's
  // range profiler does not count a graph's kernels).
  virtual void run_enqueued(int runs) { run_untimed(runs); }
  // Writes back and evicts what the caches hold, leaving clean lines, in one kernel launch (a read of a
  // buffer four times their size), waited for: the counted run then has no dirty line of earlier work to
  // write back and none of its data cached. Where a timer has no caches to clean it launches nothing.
  virtual void clean_caches() {}
  virtual double max_clock_mhz() const { return 0; }
};

std::unique_ptr<Device> make_cpu_device();
std::unique_ptr<Timer> make_cpu_timer(std::function<void()> run_once, const TimingOptions& options);

// CUDA GPUs, when the host was built with CUDA; `why_none` says why the list is empty.
std::vector<std::unique_ptr<Device>> make_cuda_devices(std::string& why_none);
// The CUDA runtime major version this host was built against; 0 without CUDA.
int cuda_runtime_major_built();

std::unique_ptr<Timer> make_cuda_timer(const std::vector<Device*>& ranks, std::function<void()> run_once,
                                       const TimingOptions& options);

// The counter-based generator both device kinds fill inputs with: element i of a fill with `seed`.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace roofbench
