// CUDA GPUs as devices: memory from cudaMalloc, time from CUDA events, ceilings from cuBLAS.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>

#include "console.hpp"
#include "device.hpp"
#include "nvml_energy.hpp"
#include "roofbench/cuda.hpp"
#include "cuda_event_timing.hpp"
#include "launch_strategy.hpp"
#include "memory_roofs.hpp"

namespace roofbench {
namespace {

__global__ void fill_uniform_kernel(void* data, std::size_t count, ElementType type, double lo, double span,
                                    std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const double u = static_cast<double>(mix64(seed ^ mix64(i)) >> 11) * 0x1.0p-53;
    const double v = lo + span * u;
    switch (type) {
      case ElementType::f64: static_cast<double*>(data)[i] = v; break;
      case ElementType::f32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
      case ElementType::bf16: static_cast<__nv_bfloat16*>(data)[i] = __double2bfloat16(v); break;
      case ElementType::f16: static_cast<__half*>(data)[i] = __double2half(v); break;
      case ElementType::fp8_e4m3: static_cast<__nv_fp8_e4m3*>(data)[i] = __nv_fp8_e4m3(static_cast<float>(v)); break;
      case ElementType::i32: static_cast<int*>(data)[i] = static_cast<int>(floor(v)); break;
    }
  }
}

// Holds the stream until the host has queued every timed launch, so launch latency stays out of the
// measurement (nvbench's blocking kernel). flags[0]: released by the host; flags[1]: set here when the
// timeout ended the hold instead, which happens when the launch queue filled up before the host was
// done: that sample's launches were not all queued in time, so the host drops it and queues fewer.
// One SM's cycle counter and the global time, read together. Two marks from the same SM bracket a sample
// and give its mean SM clock (clock64 counts per SM, so marks from different SMs do not compare).
struct ClockMark {
  long long cycles;
  unsigned long long ns;
  unsigned int sm;
  unsigned int written;
};

__device__ void write_clock_mark(volatile ClockMark* mark, unsigned long long ns, long long cycles) {
  unsigned int sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  mark->cycles = cycles;
  mark->ns = ns;
  mark->sm = sm;
  __threadfence_system();
  mark->written = 1;
}

__device__ unsigned long long global_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void hold_stream_kernel(volatile int* flags, unsigned long long timeout_ns, volatile ClockMark* released) {
  const unsigned long long start = global_ns();
  unsigned long long now;
  do {
    now = global_ns();
  } while (flags[0] == 0 && now - start < timeout_ns);
  if (flags[0] == 0) flags[1] = 1;
  if (released) write_clock_mark(released, now, clock64());
}

__global__ void busy_wait_kernel(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

// Reads `count` 16-byte words and writes nothing but, should their XOR be one value, that value (which keeps
// the reads): the cache lines it passes through replace the ones there, a dirty one written back. Over four
// times the L2 no dirty line was left on an H100 (ncu counted none written back by the next kernel; over
// twice the L2, 35 kB).
__global__ void read_sweep_kernel(const uint4* data, std::size_t count, unsigned* sink) {
  unsigned x = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 v = data[i];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;
}

// Measures the SM clock: cycles counted by clock64 over a stretch of global time. Marks where it began,
// so that with the hold's mark the host can also take the mean clock over the whole sample.
__global__ void clock_probe_kernel(double* mhz, unsigned long long span_ns, volatile ClockMark* began) {
  unsigned long long t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  write_clock_mark(began, t0, c0);
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  } while (t1 - t0 < span_ns);
  const long long c1 = clock64();
  *mhz = double(c1 - c0) / double(t1 - t0) * 1e3;
}

std::string uuid_text(const cudaUUID_t& uuid) {
  std::string out;
  char buf[3];
  for (unsigned char byte : uuid.bytes) {
    std::snprintf(buf, sizeof buf, "%02x", byte);
    out += buf;
  }
  return out;
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index) {
    cudaDeviceProp prop{};
    ROOFBENCH_CUDA(cudaGetDeviceProperties(&prop, index));
    info_ = {DeviceKind::cuda, index, prop.name};
    uuid_ = uuid_text(prop.uuid);
    l2_bytes_ = static_cast<double>(prop.l2CacheSize);
    compute_capability_ = prop.major * 10 + prop.minor;
    cuda::DeviceGuard scope(index);
    ROOFBENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaDevice() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  const DeviceInfo& info() const override { return info_; }
  std::string key() const override { return "cuda-" + info_.name + "-" + uuid_; }
  std::optional<std::string> architecture_refusal(CudaProbe probe, std::string_view plugin_name) override {
    cuda::DeviceGuard scope(info_.index);
    return cuda_architecture_refusal(probe, plugin_name, "cuda:" + std::to_string(info_.index), info_.name,
                                     compute_capability_);
  }
  void* stream() override { return stream_; }
  void* allocate(std::size_t bytes) override {
    ensure_usable();
    cuda::DeviceGuard scope(info_.index);
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, std::max<std::size_t>(bytes, 1));
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so the next case starts clean
      throw OutOfMemory("out of device memory allocating " + std::to_string(bytes) + " bytes on cuda:" +
                        std::to_string(info_.index));
    }
    ROOFBENCH_CUDA(status);
    return p;
  }
  void release(void* data) noexcept override {
    if (data) cudaFree(data);
  }
  void fill_random(void* data, std::size_t count, ElementType type, double lo, double hi,
                   std::uint64_t seed) override {
    cuda::DeviceGuard scope(info_.index);
    const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((count + 255) / 256, 65535));
    fill_uniform_kernel<<<std::max(blocks, 1u), 256, 0, stream_>>>(data, count, type, lo, hi - lo, seed);
    ROOFBENCH_CUDA_LAUNCH();
  }
  void poison(void* data, std::size_t bytes) override {
    cuda::DeviceGuard scope(info_.index);
    ROOFBENCH_CUDA(cudaMemsetAsync(data, 0xFF, bytes, stream_));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    cuda::DeviceGuard scope(info_.index);
    ROOFBENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    cuda::DeviceGuard scope(info_.index);
    ROOFBENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
  }
  void synchronize() override {
    cuda::DeviceGuard scope(info_.index);
    ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
  }
  void make_current() override { ROOFBENCH_CUDA(cudaSetDevice(info_.index)); }
  double cache_bytes() const override { return l2_bytes_; }
  int cache_level() const override { return 2; }
  double driver_used_bytes() override {
    ensure_usable();  // the first call of every case: a lost device says so before the driver is asked
    cuda::DeviceGuard scope(info_.index);
    std::size_t free_bytes = 0, total = 0;
    ROOFBENCH_CUDA(cudaMemGetInfo(&free_bytes, &total));
    return static_cast<double>(total - free_bytes);
  }
  double free_bytes() override {
    cuda::DeviceGuard scope(info_.index);
    std::size_t free = 0, total = 0;
    ROOFBENCH_CUDA(cudaMemGetInfo(&free, &total));
    return static_cast<double>(free);
  }
  std::string recover() override {
    if (!lost_.empty()) return {};
    cudaSetDevice(info_.index);
    const cudaError_t sticky = cudaDeviceSynchronize();
    if (sticky == cudaSuccess) {
      cudaGetLastError();
      return {};
    }
    // A sticky error poisons the whole context. Resetting it is worth a try, but on current drivers the
    // process usually cannot get the device back: then the device is marked lost and every later case
    // on it fails at once with that reason, while the results measured so far are kept.
    const std::string cause = cudaGetErrorString(sticky);
    cudaDeviceReset();
    cudaGetLastError();
    cudaStream_t fresh = nullptr;
    std::size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(info_.index) == cudaSuccess && cudaFree(nullptr) == cudaSuccess &&
        cudaMemGetInfo(&free_bytes, &total) == cudaSuccess &&
        cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking) == cudaSuccess) {
      stream_ = fresh;
      return "device cuda:" + std::to_string(info_.index) + " reset after: " + cause;
    }
    lost_ = "device cuda:" + std::to_string(info_.index) + " was lost after a sticky error (" + cause +
            "); later cases on it are not run: run them in a new process";
    return lost_;
  }
  void ensure_usable() const {
    if (!lost_.empty()) throw Error(lost_);
  }
  Ceilings measure_ceilings(std::vector<std::string>& how) override;
  void measure_bandwidths(Ceilings& c, std::vector<std::string>& how);
  void measure_gemm_flops(Ceilings& c, std::vector<std::string>& how);
  void measure_fp8_flops(Ceilings& c, std::vector<std::string>& how);
  std::function<std::optional<double>()> energy_counter(std::string& why) override {
    char pci_bus_id[32] = {};
    ROOFBENCH_CUDA(cudaDeviceGetPCIBusId(pci_bus_id, sizeof pci_bus_id, info_.index));
    return nvml_energy_counter(pci_bus_id, why);
  }

 private:
  DeviceInfo info_;
  std::string uuid_;
  double l2_bytes_ = 0;
  int compute_capability_ = 0;  // 90 for sm_90
  cudaStream_t stream_ = nullptr;
  std::string lost_;  // why the device can no longer be used; empty while it can
};

// Device memory that frees itself (ceilings are measured outside any case).
struct DeviceBuffer {
  Device& device;
  void* data;
  DeviceBuffer(Device& d, std::size_t bytes) : device(d), data(d.allocate(bytes)) {}
  ~DeviceBuffer() { device.release(data); }
};

// One 16-byte load; a streaming one is not allocated in L1 and prefetches the enclosing 256 bytes into L2
// (the split-KV decode's read-once loads).
template <bool kStreaming>
__device__ __forceinline__ uint4 load_16(const uint4* p) {
#if __CUDA_ARCH__ >= 800
  if constexpr (kStreaming) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
  }
#endif
  return kStreaming ? __ldg(p) : *p;
}

// A loaded word copied to `to` (a streaming store: evict first) or folded into `folded`.
template <bool kStreaming, bool kCopy>
__device__ __forceinline__ void use_16(const uint4& v, uint4* to, unsigned int& folded) {
  if constexpr (!kCopy) folded ^= v.x ^ v.y ^ v.z ^ v.w;
  else if constexpr (kStreaming) __stcs(to, v);
  else *to = v;
}

// Streams `count` 16-byte words of `src` `passes` times (memory_roofs.hpp): copies them to `dst` (kCopy),
// or folds them by XOR and writes only when the fold hits one value (a 4-byte write, if ever), so the loads
// cannot be dropped. chunk == 0: a grid-stride loop over all of `src`; else block b takes words
// [b x chunk, (b + 1) x chunk), its threads side by side. Each thread issues kLoads independent loads
// before it uses any, so that enough bytes are in flight to saturate the memory.
template <int kLoads, bool kStreaming, bool kCopy>
__global__ void memory_stream_kernel(const uint4* src, uint4* dst, std::size_t count, std::size_t chunk, int passes,
                                     unsigned int* never_written) {
  const bool strided = chunk == 0;
  const std::size_t begin = strided ? 0 : blockIdx.x * chunk;
  const std::size_t end = strided ? count : min(count, begin + chunk);
  const std::size_t stride = strided ? std::size_t(gridDim.x) * blockDim.x : blockDim.x;
  const std::size_t first = begin + (strided ? blockIdx.x * std::size_t(blockDim.x) : 0) + threadIdx.x;
  unsigned int folded = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::size_t i = first;
    for (; i + (kLoads - 1) * stride < end; i += kLoads * stride) {
      uint4 v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) v[u] = load_16<kStreaming>(src + i + u * stride);
#pragma unroll
      for (int u = 0; u < kLoads; ++u) use_16<kStreaming, kCopy>(v[u], dst + i + u * stride, folded);
    }
    for (; i < end; i += stride) use_16<kStreaming, kCopy>(load_16<kStreaming>(src + i), dst + i, folded);
    folded = folded * 3 + pass;
  }
  if (!kCopy && folded == 0x9e3779b9u) *never_written = folded;
}

using MemoryKernel = void (*)(const uint4*, uint4*, std::size_t, std::size_t, int, unsigned int*);

// The copy table's one_step variant: micro's copy_kernel (kernels/cuda_elementwise, vec16 without the add) in
// its own form, so that the copy roof bounds it: read-only loads through restrict pointers (ld.global.nc),
// each thread's kLoads loads a grid apart, all issued before any store, once; the rest one at a time. `count`
// words, one pass (the chunk, pass and sink parameters are memory_stream_kernel's, unused).
template <int kLoads>
__global__ void one_step_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t count,
                                     std::size_t, int, unsigned int*) {
  const std::size_t thread = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = thread;
  for (; i + (kLoads - 1) * stride < count; i += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < count; i += stride) dst[i] = src[i];
}

MemoryKernel one_step_kernel(int loads) {
  switch (loads) {
    case 4: return &one_step_copy_kernel<4>;
    case 8: return &one_step_copy_kernel<8>;
    case 16: return &one_step_copy_kernel<16>;
    default: throw Error("memory roofs: no kernel with " + std::to_string(loads) + " loads in flight");
  }
}

template <bool kCopy>
MemoryKernel memory_kernel(int loads, bool streaming) {
  switch (loads) {
    case 4: return streaming ? &memory_stream_kernel<4, true, kCopy> : &memory_stream_kernel<4, false, kCopy>;
    case 8: return streaming ? &memory_stream_kernel<8, true, kCopy> : &memory_stream_kernel<8, false, kCopy>;
    case 16: return streaming ? &memory_stream_kernel<16, true, kCopy> : &memory_stream_kernel<16, false, kCopy>;
    default: throw Error("memory roofs: no kernel with " + std::to_string(loads) + " loads in flight");
  }
}

// A variant (memory_roofs.hpp) made a launch over `count` words on a device of `sms` SMs.
struct MemoryLaunch {
  MemoryRun run;            // the variant as it runs (blocks per SM: what fits), its rate still 0
  MemoryKernel kernel = nullptr;  // null for memcpy
  unsigned int blocks = 0;
  std::size_t chunk = 0;    // words per block; 0 for the grid-stride loop
};

// Blocks per SM are lowered to what fits on an SM at once, so that the blocks asked for all stream together
// (a grid-stride block or a one-wave chunk left for a second wave would run alone at the end), unless
// `as_asked` (the cache roof's kernel: 4 x SMs blocks of 512, however many fit at once).
MemoryLaunch plan_memory_launch(const MemoryVariant& v, bool copy, std::size_t count, int sms, bool as_asked = false) {
  MemoryLaunch l{{v, 0}};
  if (v.layout == MemoryLayout::memcpy) return l;
  if (v.layout == MemoryLayout::one_step && !copy) throw Error("memory roofs: one_step is a copy variant");
  l.kernel = v.layout == MemoryLayout::one_step ? one_step_kernel(v.loads_in_flight)
             : copy ? memory_kernel<true>(v.loads_in_flight, v.streaming)
                    : memory_kernel<false>(v.loads_in_flight, v.streaming);
  int fits = 0;
  ROOFBENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, l.kernel, v.threads, 0));
  if (fits <= 0) return l;  // no block fits on an SM: no launch (blocks 0)
  const bool fixed_chunks = v.layout == MemoryLayout::chunks && v.chunk_bytes != 0;
  const bool one_step = v.layout == MemoryLayout::one_step;
  l.run.variant.blocks_per_sm =
      fixed_chunks || one_step ? fits : as_asked ? v.blocks_per_sm : std::min(v.blocks_per_sm, fits);
  const std::size_t step = std::size_t(v.threads) * v.loads_in_flight;
  if (one_step) {  // the kernel's grid-stride loop (chunk 0) over a grid of one step a thread
    l.blocks = static_cast<unsigned int>((count + step - 1) / step);
    return l;
  }
  const std::size_t wave = std::size_t(l.run.variant.blocks_per_sm) * sms;
  if (v.layout == MemoryLayout::grid_stride) {
    l.blocks = static_cast<unsigned int>(wave);
    return l;
  }
  l.chunk = fixed_chunks ? v.chunk_bytes / sizeof(uint4) : ((count + wave - 1) / wave + step - 1) / step * step;
  l.blocks = static_cast<unsigned int>((count + l.chunk - 1) / l.chunk);
  return l;
}

// The side of the GEMMs that measure the compute roofs.
constexpr int kCeilingGemmN = 8192;
constexpr double kCeilingGemmFlops = 2.0 * kCeilingGemmN * double(kCeilingGemmN) * kCeilingGemmN;
// Launches before the timed ones, and the timed ones whose best sets the roof: with 3 and 10, an H100's fp32
// roof came out 0.5% under the median of the micro plugin's own 8192^3 cuBLAS GEMM.
constexpr int kCeilingGemmWarmups = 10, kCeilingGemmRepetitions = 20;

struct GemmFormat {
  Precision precision;
  cudaDataType_t input, output;
  cublasComputeType_t compute;
  ElementType fill;
  std::size_t input_bytes, output_bytes;
};

// The best of the ceiling's timed launches of an n^3 cublasGemmEx (kCeilingGemmN) in format `f`, A as
// `transpose_a` says, B as stored.
double best_gemm_seconds(cudaStream_t stream, cublasHandle_t handle, const GemmFormat& f, cublasOperation_t transpose_a,
                         const void* a, const void* b, void* d) {
  const int n = kCeilingGemmN;
  const double one = 1.0, zero = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const bool double_scale = f.compute == CUBLAS_COMPUTE_64F;
  return best_event_seconds(stream, kCeilingGemmWarmups, kCeilingGemmRepetitions, [&] {
    ROOFBENCH_CUBLAS(cublasGemmEx(handle, transpose_a, CUBLAS_OP_N, n, n, n,
                                  double_scale ? static_cast<const void*>(&one) : &one_f, a, f.input, n, b, f.input, n,
                                  double_scale ? static_cast<const void*>(&zero) : &zero_f, d, f.output, n, f.compute,
                                  CUBLAS_GEMM_DEFAULT));
  });
}

// The best of `repetitions` runs of `l` over `bytes` of `from` (into `to` for a copy), `passes` times.
double best_memory_seconds(const MemoryLaunch& l, cudaStream_t stream, const void* from, void* to, std::size_t bytes,
                           int passes, int repetitions) {
  return best_event_seconds(stream, 3, repetitions, [&] {
    if (!l.kernel) {
      ROOFBENCH_CUDA(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
      return;
    }
    l.kernel<<<l.blocks, l.run.variant.threads, 0, stream>>>(static_cast<const uint4*>(from), static_cast<uint4*>(to),
                                                             bytes / sizeof(uint4), l.chunk, passes,
                                                             static_cast<unsigned int*>(to));
    ROOFBENCH_CUDA(cudaGetLastError());
  });
}

constexpr int kMemoryRepetitions = 10;

// The memory roofs: the best of the copy variants, the best of the read variants (memory_roofs.hpp), and the
// first read variant over data that stays in L2.
void CudaDevice::measure_bandwidths(Ceilings& c, std::vector<std::string>& how) {
  std::size_t free_bytes = 0, total = 0;
  ROOFBENCH_CUDA(cudaMemGetInfo(&free_bytes, &total));
  const std::size_t bytes = memory_roof_bytes(double(free_bytes));
  DeviceBuffer from(*this, bytes), to(*this, bytes);
  fill_random(from.data, bytes / 4, ElementType::f32, -1, 1, 7);
  const auto copies = measure_memory_variants(copy_variants(), true, stream_, from.data, to.data, bytes, kMemoryRepetitions);
  c.bandwidth = copies[best_run(copies)].rate;
  how.push_back(roof_how("bandwidth", copies, "ways of copying", bytes, kMemoryRepetitions, "read + written counted"));
  const auto reads = measure_memory_variants(read_variants(), false, stream_, from.data, to.data, bytes, kMemoryRepetitions);
  c.read_bandwidth = reads[best_run(reads)].rate;
  how.push_back(roof_how("read_bandwidth", reads, "kernels reading", bytes, kMemoryRepetitions, "bytes read"));
  // Half the L2, read 64 times in one kernel: the data stays in L2 after the first pass.
  int sms = 0;
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, info_.index));
  const std::size_t cached_bytes = std::max<std::size_t>(static_cast<std::size_t>(l2_bytes_ / 2), 1 << 20) & ~std::size_t{15};
  const int passes = 64;
  const MemoryLaunch cache_read = plan_memory_launch(read_variants().front(), false, cached_bytes / sizeof(uint4), sms, true);
  const double cache_s =
      best_memory_seconds(cache_read, stream_, from.data, to.data, cached_bytes, passes, kMemoryRepetitions);
  c.cache_bandwidth = static_cast<double>(cached_bytes) * passes / cache_s;
  how.push_back("cache_bandwidth: a kernel reading half the L2 (" + std::to_string(cached_bytes >> 20) + " MiB) 64 times (" +
                describe(cache_read.run.variant) + "), best of 10 (bytes read)");
}

// The compute roofs of every precision cublasGemmEx has, each an 8192^3 GEMM on random inputs.
void CudaDevice::measure_gemm_flops(Ceilings& c, std::vector<std::string>& how) {
  const int n = kCeilingGemmN;
  cublasHandle_t handle;
  ROOFBENCH_CUBLAS(cublasCreate(&handle));
  ROOFBENCH_CUBLAS(cublasSetStream(handle, stream_));
  const GemmFormat formats[] = {
      {Precision::fp64, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, ElementType::f64, 8, 8},
      {Precision::fp32, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, ElementType::f32, 4, 4},
      {Precision::tf32, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, ElementType::f32, 4, 4},
      {Precision::bf16, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, ElementType::bf16, 2, 2},
      {Precision::fp16, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, ElementType::f16, 2, 2},
  };
  try {
    for (const auto& f : formats) {
      DeviceBuffer a(*this, f.input_bytes * n * n), b(*this, f.input_bytes * n * n), d(*this, f.output_bytes * n * n);
      fill_random(a.data, std::size_t(n) * n, f.fill, -1, 1, 11);
      fill_random(b.data, std::size_t(n) * n, f.fill, -1, 1, 12);
      // cuBLAS picks another kernel for each layout; the plugins call both (micro's GEMMs TN), so both bound.
      double best = 0;
      const char* best_layout = "";
      for (const auto& [name, transpose_a] : {std::pair{"NN", CUBLAS_OP_N}, std::pair{"TN", CUBLAS_OP_T}}) {
        const double s = best_gemm_seconds(stream_, handle, f, transpose_a, a.data, b.data, d.data);
        if (best == 0 || s < best) std::tie(best, best_layout) = std::tuple{s, name};
      }
      c.flops_of(f.precision) = kCeilingGemmFlops / best;
      how.push_back(std::string(to_string(f.precision)) + ": cublasGemmEx 8192^3 on random inputs, best of " +
                    std::to_string(kCeilingGemmRepetitions) + " in each of the NN and TN layouts (" + best_layout +
                    " won)");
    }
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  ROOFBENCH_CUBLAS(cublasDestroy(handle));
}

// The fp8 roof (sm_89 and later), through cuBLASLt.
void CudaDevice::measure_fp8_flops(Ceilings& c, std::vector<std::string>& how) {
  const int n = kCeilingGemmN;
  // fp8 (e4m3) needs cuBLASLt and the "TN" layout: A transposed, both column-major.
  cublasLtHandle_t lt;
  ROOFBENCH_CUBLASLT(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, d_layout = nullptr;
  try {
    DeviceBuffer a(*this, std::size_t(n) * n), b(*this, std::size_t(n) * n), d(*this, 2 * std::size_t(n) * n);
    const std::size_t workspace_bytes = 64u << 20;
    DeviceBuffer workspace(*this, workspace_bytes);
    fill_random(a.data, std::size_t(n) * n, ElementType::fp8_e4m3, -1, 1, 13);
    fill_random(b.data, std::size_t(n) * n, ElementType::fp8_e4m3, -1, 1, 14);
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
    ROOFBENCH_CUBLASLT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(&a_layout, CUDA_R_8F_E4M3, n, n, n));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(&b_layout, CUDA_R_8F_E4M3, n, n, n));
    ROOFBENCH_CUBLASLT(cublasLtMatrixLayoutCreate(&d_layout, CUDA_R_16BF, n, n, n));
    const float one = 1.0f, zero = 0.0f;
    const double s = best_event_seconds(stream_, kCeilingGemmWarmups, kCeilingGemmRepetitions, [&] {
      ROOFBENCH_CUBLASLT(cublasLtMatmul(lt, desc, &one, a.data, a_layout, b.data, b_layout, &zero, d.data, d_layout,
                                        d.data, d_layout, nullptr, workspace.data, workspace_bytes, stream_));
    });
    c.flops_of(Precision::fp8) = kCeilingGemmFlops / s;
    how.push_back("fp8: cublasLtMatmul e4m3 x e4m3 -> bf16, 8192^3 on random inputs, best of " +
                  std::to_string(kCeilingGemmRepetitions));
  } catch (const Error& e) {
    how.push_back(std::string("fp8: not measured: ") + e.what());
  }
  if (desc) cublasLtMatmulDescDestroy(desc);
  for (auto layout : {a_layout, b_layout, d_layout})
    if (layout) cublasLtMatrixLayoutDestroy(layout);
  cublasLtDestroy(lt);
}

Ceilings CudaDevice::measure_ceilings(std::vector<std::string>& how) {
  cuda::DeviceGuard scope(info_.index);
  Ceilings c;
  measure_bandwidths(c, how);
  measure_gemm_flops(c, how);
  int major = 0, minor = 0;
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, info_.index));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, info_.index));
  if (major * 10 + minor >= 89) measure_fp8_flops(c, how);
  ROOFBENCH_CUDA(cudaStreamSynchronize(stream_));
  return c;
}

// Carries out its launch strategy's plans (launch_strategy.hpp) on the ranks' streams and in graphs, with
// the stream hold and the clock probe around every timed sample.
class CudaTimer final : public Timer {
 public:
  CudaTimer(const std::vector<Device*>& ranks, std::function<void()> run_once, const TimingOptions& options)
      : run_once_(std::move(run_once)), use_copy_(options.use_copy), hold_(options.hold),
        strategy_(make_launch_strategy(options)) {
    for (Device* d : ranks) {
      Rank r{d->info().index, static_cast<cudaStream_t>(d->stream())};
      cuda::DeviceGuard scope(r.device);
      ROOFBENCH_CUDA(cudaEventCreate(&r.start));
      ROOFBENCH_CUDA(cudaEventCreate(&r.stop));
      if (strategy_->flushes()) {
        r.flush_bytes = 2 * l2_bytes(r.device);
        ROOFBENCH_CUDA(cudaMalloc(&r.flush, r.flush_bytes));
      }
      ranks_.push_back(r);
    }
    cuda::DeviceGuard scope(ranks_.front().device);
    ROOFBENCH_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&release_), 2 * sizeof(int), cudaHostAllocMapped));
    ROOFBENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&release_on_device_), release_, 0));
    ROOFBENCH_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&clock_mhz_), sizeof(double), cudaHostAllocMapped));
    ROOFBENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&clock_mhz_on_device_), clock_mhz_, 0));
    ROOFBENCH_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&marks_), 2 * sizeof(ClockMark), cudaHostAllocMapped));
    ROOFBENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&marks_on_device_), marks_, 0));
    int khz = 0;
    ROOFBENCH_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ranks_.front().device));
    max_clock_mhz_ = khz / 1e3;
  }
  ~CudaTimer() override {
    for (auto& r : ranks_) {
      cudaSetDevice(r.device);
      cudaEventDestroy(r.start);
      cudaEventDestroy(r.stop);
      if (r.flush) cudaFree(r.flush);
      if (r.clean) cudaFree(r.clean);
    }
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    cudaFreeHost(release_);
    cudaFreeHost(clock_mhz_);
    cudaFreeHost(marks_);
  }
  double max_clock_mhz() const override { return max_clock_mhz_; }

  SampleTime time(int runs) override {
    const SamplePlan plan = strategy_->plan(runs, true);
    cudaGraphExec_t graph = plan.in_graph.empty() ? nullptr : graph_for(plan);
    static_cast<volatile int*>(release_)[0] = 0;
    static_cast<volatile int*>(release_)[1] = 0;
    marks_[0].written = marks_[1].written = 0;
    // The hold goes in after a flush on the stream and before anything timed (an event, or the graph that
    // records them; a cold graph holds its own flush, so the hold comes before it there).
    bool held = !hold_;
    auto hold_once = [&] {
      if (held) return;
      held = true;
      for (auto& r : ranks_) {
        cuda::DeviceGuard scope(r.device);
        const bool first = &r == &ranks_.front();
        hold_stream_kernel<<<1, 1, 0, r.stream>>>(release_on_device_, kHoldTimeoutNs, first ? marks_on_device_ : nullptr);
        ROOFBENCH_CUDA_LAUNCH();
      }
    };
    for (SampleStep step : plan.before_graph) {
      if (step != SampleStep::flush) hold_once();
      enqueue_step(step, plan, false);
    }
    if (graph) {
      hold_once();
      cuda::DeviceGuard scope(ranks_.front().device);
      ROOFBENCH_CUDA(cudaGraphLaunch(graph, ranks_.front().stream));
    }
    for (SampleStep step : plan.after_graph) enqueue_step(step, plan, false);
    __atomic_store_n(release_, 1, __ATOMIC_SEQ_CST);
    {
      cuda::DeviceGuard scope(ranks_.front().device);
      clock_probe_kernel<<<1, 1, 0, ranks_.front().stream>>>(clock_mhz_on_device_, kClockProbeNs, marks_on_device_ + 1);
      ROOFBENCH_CUDA_LAUNCH();
    }
    double slowest = 0;
    for (auto& r : ranks_) {
      cuda::DeviceGuard scope(r.device);
      ROOFBENCH_CUDA(cudaStreamSynchronize(r.stream));
      float ms = 0;
      ROOFBENCH_CUDA(cudaEventElapsedTime(&ms, r.start, r.stop));
      slowest = std::max(slowest, ms * 1e-3);
    }
    SampleTime sample{slowest, 0, static_cast<volatile int*>(release_)[1] != 0};
    sample_clock(sample);
    return sample;
  }

  // The mean SM clock from the hold's release to the probe when both ran on one SM (the whole sample);
  // else the probe's reading right after it.
  void sample_clock(SampleTime& sample) const {
    const volatile ClockMark& released = marks_[0];
    const volatile ClockMark& probed = marks_[1];
    sample.clock_spans_sample = released.written && probed.written && released.sm == probed.sm &&
                                probed.ns > released.ns && probed.cycles > released.cycles;
    sample.clock_mhz = sample.clock_spans_sample
                           ? double(probed.cycles - released.cycles) / double(probed.ns - released.ns) * 1e3
                           : *static_cast<volatile double*>(clock_mhz_);
  }

  void run_enqueued(int runs) override {
    enqueue_step(SampleStep::runs, strategy_->plan(runs, false), false);
    wait_for_ranks();
  }

  // One kernel: a read sweep over four times the L2 of a buffer written once, when it is made (the sweep
  // writes those lines back at its first call).
  void clean_caches() override {
    for (auto& r : ranks_) {
      cuda::DeviceGuard scope(r.device);
      if (!r.clean) {
        r.clean_bytes = 4 * l2_bytes(r.device);
        ROOFBENCH_CUDA(cudaMalloc(&r.clean, r.clean_bytes + sizeof(unsigned)));
        ROOFBENCH_CUDA(cudaMemsetAsync(r.clean, 0, r.clean_bytes, r.stream));
      }
      read_sweep_kernel<<<1024, 256, 0, r.stream>>>(static_cast<const uint4*>(r.clean), r.clean_bytes / sizeof(uint4),
                                                    reinterpret_cast<unsigned*>(static_cast<char*>(r.clean) + r.clean_bytes));
      ROOFBENCH_CUDA_LAUNCH();
    }
    wait_for_ranks();
  }

  void run_untimed(int runs) override {
    const SamplePlan plan = strategy_->plan(runs, false);
    for (SampleStep step : plan.before_graph) enqueue_step(step, plan, false);
    if (!plan.in_graph.empty()) {
      cuda::DeviceGuard scope(ranks_.front().device);
      ROOFBENCH_CUDA(cudaGraphLaunch(graph_for(plan), ranks_.front().stream));
    }
    wait_for_ranks();
  }

 private:
  // The device's L2 in bytes (taken as at least 1 MiB): a flush goes over twice it, a clean four times.
  static std::size_t l2_bytes(int device) {
    int l2 = 0;
    ROOFBENCH_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    return static_cast<std::size_t>(std::max(l2, 1 << 20));
  }

  void wait_for_ranks() {
    for (auto& r : ranks_) {
      cuda::DeviceGuard scope(r.device);
      ROOFBENCH_CUDA(cudaStreamSynchronize(r.stream));
    }
  }

  static constexpr unsigned long long kHoldTimeoutNs = 100'000'000;
  static constexpr unsigned long long kClockProbeNs = 20'000;

  struct Rank {
    int device;
    cudaStream_t stream;
    cudaEvent_t start = nullptr, stop = nullptr;
    void* flush = nullptr;
    std::size_t flush_bytes = 0;
    void* clean = nullptr;  // clean_caches's buffer, made at its first call
    std::size_t clean_bytes = 0;
  };

  // One step of a sample's plan (launch_strategy.hpp) on every rank's stream, or, while a graph is captured
  // (`in_graph`, one rank), as a node of it: the events then as external event nodes, so they are recorded
  // when the graph reaches them. Under rotation each run is pointed at its copy before it is enqueued.
  void enqueue_step(SampleStep step, const SamplePlan& plan, bool in_graph) {
    if (step == SampleStep::runs) {
      for (int i = 0; i < plan.runs; ++i) {
        if (plan.copies > 0) use_copy_(copy_for_run(plan, i));
        run_once_();
      }
      return;
    }
    for (auto& r : ranks_) {
      cuda::DeviceGuard scope(r.device);
      switch (step) {
        case SampleStep::flush:
          if (r.flush) ROOFBENCH_CUDA(cudaMemsetAsync(r.flush, 1, r.flush_bytes, r.stream));
          break;
        case SampleStep::start:
        case SampleStep::stop: {
          cudaEvent_t event = step == SampleStep::start ? r.start : r.stop;
          if (in_graph) ROOFBENCH_CUDA(cudaEventRecordWithFlags(event, r.stream, cudaEventRecordExternal));
          else ROOFBENCH_CUDA(cudaEventRecord(event, r.stream));
          break;
        }
        case SampleStep::runs: break;
      }
    }
  }

  // The graph steps of a sample's plan captured once into one graph (rank 0's stream); replaying it leaves
  // out the per-launch CPU cost.
  cudaGraphExec_t graph_for(const SamplePlan& plan) {
    const std::vector<SampleStep>& steps = plan.in_graph;
    const int runs = plan.runs;
    if (auto it = graphs_.find({steps, runs}); it != graphs_.end()) return it->second;
    const Rank& r = ranks_.front();
    cuda::DeviceGuard scope(r.device);
    cudaGraph_t graph = nullptr;
    ROOFBENCH_CUDA(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
    try {
      for (SampleStep step : steps) enqueue_step(step, plan, true);
    } catch (...) {
      // End the capture so the stream is usable again, and free what it had recorded so far.
      if (cudaStreamEndCapture(r.stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
      throw;
    }
    ROOFBENCH_CUDA(cudaStreamEndCapture(r.stream, &graph));
    cudaGraphExec_t exec;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    ROOFBENCH_CUDA(status);
    graphs_[{steps, runs}] = exec;
    return exec;
  }

  std::function<void()> run_once_;
  std::function<void(int)> use_copy_;  // under rotation (TimingOptions::copies)
  bool hold_;  // hold the stream while a sample's launches are queued
  std::unique_ptr<LaunchStrategy> strategy_;
  std::vector<Rank> ranks_;
  std::map<std::pair<std::vector<SampleStep>, int>, cudaGraphExec_t> graphs_;  // by steps and runs
  int* release_ = nullptr;  // [0] release, [1] the hold timed out
  int* release_on_device_ = nullptr;
  double* clock_mhz_ = nullptr;
  double* clock_mhz_on_device_ = nullptr;
  ClockMark* marks_ = nullptr;  // [0] the hold's release, [1] the probe's start (rank 0)
  ClockMark* marks_on_device_ = nullptr;
  double max_clock_mhz_ = 0;
};

}  // namespace

std::vector<MemoryRun> measure_memory_variants(const std::vector<MemoryVariant>& table, bool copy, void* stream,
                                              const void* from, void* to, std::size_t bytes, int repetitions) {
  int device = 0, sms = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  ROOFBENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::vector<MemoryRun> runs;
  for (const MemoryVariant& v : table) {
    if (const std::string problem = variant_problem(v); !problem.empty()) throw Error("memory roofs: " + problem);
    const MemoryLaunch l = plan_memory_launch(v, copy, bytes / sizeof(uint4), sms);
    if (l.kernel && l.blocks == 0) {
      runs.push_back({v, 0});
      continue;
    }
    const double s = best_memory_seconds(l, static_cast<cudaStream_t>(stream), from, to, bytes, 1, repetitions);
    runs.push_back({l.run.variant, (copy ? 2.0 : 1.0) * static_cast<double>(bytes) / s});
  }
  return runs;
}

int cuda_runtime_major_built() { return CUDART_VERSION / 1000; }

// The runtime says "CUDA driver version is insufficient" even where no driver is installed at all: look.
static GpuAbsence look_for_the_driver(cudaError_t status) {
  GpuAbsence found;
  if (void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    found.driver_library_loads = true;
    ::dlclose(driver);
  } else if (const char* error = ::dlerror()) {
    found.driver_library_error = error;
  }
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/dev", ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().starts_with("nvidia")) {
      found.device_nodes = true;
      break;
    }
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) found.driver_cuda_version = driver;
  found.runtime_cuda_version = CUDART_VERSION;
  found.runtime_says_no_device = status == cudaSuccess || status == cudaErrorNoDevice;
  found.runtime_says_driver_too_old = status == cudaErrorInsufficientDriver;
  if (status != cudaSuccess) found.runtime_error = cudaGetErrorString(status);
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) found.cuda_visible_devices = visible;
  return found;
}

std::vector<std::unique_ptr<Device>> make_cuda_devices(std::string& why_none) {
  std::vector<std::unique_ptr<Device>> devices;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    why_none = explain_no_gpu(look_for_the_driver(status));
    return devices;
  }
  for (int i = 0; i < count; ++i) devices.push_back(std::make_unique<CudaDevice>(i));
  return devices;
}

std::unique_ptr<Timer> make_cuda_timer(const std::vector<Device*>& ranks, std::function<void()> run_once,
                                       const TimingOptions& options) {
  return std::make_unique<CudaTimer>(ranks, std::move(run_once), options);
}

void enqueue_busy_wait(cudaStream_t stream, unsigned long long nanoseconds) {
  busy_wait_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  ROOFBENCH_CUDA(cudaGetLastError());
}

}  // namespace roofbench
