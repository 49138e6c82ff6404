// The host CPU as a device: memory is ordinary aligned memory, time is the steady clock.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>

#include "device.hpp"
#include "launch_strategy.hpp"
#include "statistics.hpp"

#ifdef ROOFBENCH_HAVE_CBLAS
#include <cblas.h>
#else
#include "cpu_kernels.hpp"
#endif

namespace roofbench {
namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

std::uint16_t to_bf16_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<std::uint16_t>(bits >> 16);
}

double unit_uniform(std::uint64_t seed, std::uint64_t i) {
  return static_cast<double>(mix64(seed ^ mix64(i)) >> 11) * 0x1.0p-53;
}

std::string first_line_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// Read once: the kernel's topology does not change while roofbench runs.
const CacheLevel& host_last_level_cache() {
  static const CacheLevel cache = last_level_cache();
  return cache;
}

// Streams through a buffer larger than the last-level cache so the next sample starts cold.
class CacheFlusher {
 public:
  CacheFlusher() {
    const std::uint64_t llc = host_last_level_cache().bytes;
    buffer_.assign(static_cast<std::size_t>(llc > 0 ? llc : 64ull << 20) * 2, 1);
  }
  void flush() {
    for (std::size_t i = 0; i < buffer_.size(); i += 64) buffer_[i] = static_cast<char>(buffer_[i] + 1);
  }

 private:
  std::vector<char> buffer_;
};

}  // namespace

std::uint64_t cache_size_bytes(const std::string& text) {
  std::size_t used = 0;
  unsigned long long number = 0;
  try {
    number = std::stoull(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const std::string suffix = text.substr(used);
  if (suffix.empty()) return number;
  if (suffix == "K") return number << 10;
  if (suffix == "M") return number << 20;
  if (suffix == "G") return number << 30;
  return 0;
}

CacheLevel last_level_cache(const std::string& cache_dir) {
  CacheLevel last;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(cache_dir, ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    const std::string type = first_line_of(entry.path() / "type");
    if (type != "Data" && type != "Unified") continue;
    const int level = std::atoi(first_line_of(entry.path() / "level").c_str());
    const std::uint64_t bytes = cache_size_bytes(first_line_of(entry.path() / "size"));
    if (level > last.level && bytes > 0) last = {level, bytes};
  }
  return last;
}

namespace {

class CpuDevice final : public Device {
 public:
  CpuDevice() { info_ = {DeviceKind::cpu, 0, cpu_model_name()}; }
  const DeviceInfo& info() const override { return info_; }
  // A case whose bytes fit here is labelled "data in cache": the memory roof does not bound it.
  double cache_bytes() const override { return static_cast<double>(host_last_level_cache().bytes); }
  int cache_level() const override { return host_last_level_cache().level; }
  std::string key() const override {
    return "cpu-" + info_.name + "-" + std::to_string(std::thread::hardware_concurrency()) + "threads";
  }
  void* stream() override { return nullptr; }
  void* allocate(std::size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw OutOfMemory("out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void release(void* data) noexcept override { std::free(data); }
  void fill_random(void* data, std::size_t count, ElementType type, double lo, double hi,
                   std::uint64_t seed) override {
    const double span = hi - lo;
    for (std::size_t i = 0; i < count; ++i) {
      const double v = lo + span * unit_uniform(seed, i);
      switch (type) {
        case ElementType::f64: static_cast<double*>(data)[i] = v; break;
        case ElementType::f32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
        case ElementType::bf16: static_cast<std::uint16_t*>(data)[i] = to_bf16_bits(static_cast<float>(v)); break;
        case ElementType::f16: static_cast<_Float16*>(data)[i] = static_cast<_Float16>(v); break;
        case ElementType::i32: static_cast<std::int32_t*>(data)[i] = static_cast<std::int32_t>(std::floor(v)); break;
        case ElementType::fp8_e4m3: throw Error("fp8 inputs are not supported on the CPU device");
      }
    }
  }
  void poison(void* data, std::size_t bytes) override { std::memset(data, 0xFF, bytes); }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}
  double driver_used_bytes() override { return 0; }
  Ceilings measure_ceilings(std::vector<std::string>& how) override;

 private:
  DeviceInfo info_;
};

template <typename F>
double best_seconds(int repetitions, F&& body) {
  double best = 1e300;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// All hardware threads copying their share of a buffer far larger than the caches.
double measure_copy_bandwidth(std::string& how) {
  const std::size_t bytes = std::size_t{256} << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const double seconds = best_seconds(5, [&] {
    std::vector<std::thread> pool;
    const std::size_t share = bytes / threads;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const std::size_t begin = t * share, size = t + 1 == threads ? bytes - begin : share;
        std::memcpy(to.data() + begin, from.data() + begin, size);
      });
    for (auto& th : pool) th.join();
  });
  how = "memcpy of 256 MiB on " + std::to_string(threads) + " threads, best of 5 (read + write counted)";
  return 2.0 * static_cast<double>(bytes) / seconds;
}

// All hardware threads summing their share of a buffer far larger than the caches: nothing is written,
// so this is the roof of read-dominated work. The sums go to a volatile so the reads are not dropped.
double measure_read_bandwidth(std::string& how) {
  const std::size_t bytes = std::size_t{256} << 20;
  std::vector<std::uint64_t> data(bytes / sizeof(std::uint64_t), 1);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::uint64_t> sums(threads);
  const double seconds = best_seconds(5, [&] {
    std::vector<std::thread> pool;
    const std::size_t share = data.size() / threads;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const std::size_t begin = t * share, end = t + 1 == threads ? data.size() : begin + share;
        std::uint64_t sum = 0;
        for (std::size_t i = begin; i < end; ++i) sum += data[i];
        sums[t] = sum;
      });
    for (auto& th : pool) th.join();
  });
  volatile std::uint64_t sink = 0;
  for (const auto sum : sums) sink = sink + sum;
  how = "sum of 256 MiB of uint64 on " + std::to_string(threads) + " threads, best of 5 (bytes read)";
  return static_cast<double>(bytes) / seconds;
}

// All hardware threads copying 8 KiB back and forth between two buffers of their own, which stay in
// the core's first-level cache: the fastest any data moves on this CPU (memcpy uses the widest loads
// and stores the CPU has; a copy's bytes per cycle, read + write, match a read-only loop's on cores
// that load twice per store). Alternating the direction keeps each copy's result in use.
double measure_cache_bandwidth(std::string& how) {
  const std::size_t bytes = 8 << 10;
  const int copies = 20000;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<char>> buffers(2 * threads, std::vector<char>(bytes, 1));
  volatile char sink = 0;
  const double seconds = best_seconds(5, [&] {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        char* a = buffers[2 * t].data();
        char* b = buffers[2 * t + 1].data();
        for (int i = 0; i < copies; ++i) std::memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
      });
    for (auto& th : pool) th.join();
  });
  for (const auto& buffer : buffers) sink = sink + buffer[bytes / 2];
  how = "memcpy of 8 KiB back and forth within each core's cache, " + std::to_string(copies) + " times on " +
        std::to_string(threads) + " threads, best of 5 (read + write counted)";
  return 2.0 * static_cast<double>(bytes) * copies * threads / seconds;
}

template <typename T>
double measure_gemm(std::string& how, const char* label) {
  const int n = 2048;
  std::vector<T> a(std::size_t(n) * n), b(a.size()), c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<T>(unit_uniform(1, i) - 0.5);
    b[i] = static_cast<T>(unit_uniform(2, i) - 0.5);
  }
  auto gemm = [&] {
#ifdef ROOFBENCH_HAVE_CBLAS
    if constexpr (std::is_same_v<T, double>)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, b.data(), n, 0.0, c.data(), n);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
#else
    if constexpr (std::is_same_v<T, float>) kernels::cpu::matmul_blocked(a.data(), b.data(), c.data(), n, n, n);
#endif
  };
#ifndef ROOFBENCH_HAVE_CBLAS
  if constexpr (std::is_same_v<T, double>) return 0;  // no fp64 kernel without BLAS: no fp64 roof
#endif
  gemm();
  const double seconds = best_seconds(3, gemm);
#ifdef ROOFBENCH_HAVE_CBLAS
  how = std::string("cblas ") + label + " 2048^3, best of 3";
#else
  how = std::string("roofbench blocked ") + label + " 2048^3, best of 3";
#endif
  return 2.0 * n * double(n) * n / seconds;
}

Ceilings CpuDevice::measure_ceilings(std::vector<std::string>& how) {
  Ceilings c;
  std::string note;
  c.bandwidth = measure_copy_bandwidth(note);
  how.push_back("bandwidth: " + note);
  c.read_bandwidth = measure_read_bandwidth(note);
  how.push_back("read_bandwidth: " + note);
  c.cache_bandwidth = measure_cache_bandwidth(note);
  how.push_back("cache_bandwidth: " + note);
  c.flops_of(Precision::fp64) = measure_gemm<double>(note, "dgemm");
  if (c.flops_of(Precision::fp64) > 0) how.push_back("fp64: " + note);
  c.flops_of(Precision::fp32) = measure_gemm<float>(note, "sgemm");
  how.push_back("fp32: " + note);
  return c;
}

// Carries out its launch strategy's plans on the host: hot, or cold with its own cache flush.
class CpuTimer final : public Timer {
 public:
  CpuTimer(std::function<void()> run_once, const TimingOptions& options)
      : run_once_(std::move(run_once)), strategy_(make_launch_strategy(options)) {
    if (strategy_->graph()) throw Error("the CPU device has no graph launch: its samples run on the host");
    if (strategy_->flushes()) flusher_ = std::make_unique<CacheFlusher>();
  }
  SampleTime time(int runs) override {
    return {time_on_host(strategy_->plan(runs, true), run_once_, [this] { flusher_->flush(); }), 0};
  }
  void run_untimed(int runs) override {
    const SamplePlan plan = strategy_->plan(runs, false);
    for (SampleStep step : plan.before_graph)
      if (step == SampleStep::runs)
        for (int r = 0; r < plan.runs; ++r) run_once_();
  }

 private:
  std::function<void()> run_once_;
  std::unique_ptr<LaunchStrategy> strategy_;
  std::unique_ptr<CacheFlusher> flusher_;
};

}  // namespace

double time_on_host(const SamplePlan& plan, const std::function<void()>& run, const std::function<void()>& flush) {
  if (!plan.in_graph.empty() || !plan.after_graph.empty()) throw Error("the host has no graphs to launch");
  using Clock = std::chrono::steady_clock;
  Clock::time_point start, stop;
  for (SampleStep step : plan.before_graph) {
    switch (step) {
      case SampleStep::flush: flush(); break;
      case SampleStep::start: start = Clock::now(); break;
      case SampleStep::runs:
        for (int r = 0; r < plan.runs; ++r) run();
        break;
      case SampleStep::stop: stop = Clock::now(); break;
    }
  }
  return std::chrono::duration<double>(stop - start).count();
}

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

std::unique_ptr<Timer> make_cpu_timer(std::function<void()> run_once, const TimingOptions& options) {
  return std::make_unique<CpuTimer>(std::move(run_once), options);
}

std::unique_ptr<Timer> Device::make_timer(const std::vector<Device*>& ranks, std::function<void()> run_once,
                                          const TimingOptions& options) {
  if (info().kind == DeviceKind::cpu) return make_cpu_timer(std::move(run_once), options);
  return make_cuda_timer(ranks, std::move(run_once), options);
}

}  // namespace roofbench
