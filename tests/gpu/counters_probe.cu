// roofbench's counters pass against Nsight Compute on kernels of known traffic, outside any benchmark. Each
// probe kernel runs after the pass's clean (a read sweep over four times the L2, as Timer::clean_caches):
//   roofbench_counters_probe count    counts each kernel as --counters does (CUPTI's Range Profiler, run
//                                     replay, the clean inside each pass) and prints its DRAM bytes; then
//                                     each followed by an empty kernel, whose range shows what reached DRAM
//                                     after the probe's range ended
//   roofbench_counters_probe launch   launches the same kernels, each after the same clean, for ncu:
//     ncu --clock-control none --cache-control none -k regex:probe_ --metrics dram__bytes_read.sum,
//         dram__bytes_write.sum --csv --print-units base roofbench_counters_probe launch   (one line)
//     (--cache-control all: ncu's own flush instead of the clean)
// The kernels: a copy that reads 3/4 of the L2 and writes 1/4; a write of twice the L2; a read of eight times
// the L2 that then writes 1/16 of the L2 in 264-byte records, as a split-KV decode writes its partials. Then
// the copy again with its buffers moved by a few MiB each time (both modes, after the others): how many of
// its dirty lines its own reads evict may depend on where its buffers fall in the L2.
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernel_counters.hpp"
#include "l2_probe_kernels.cuh"

namespace {

using namespace roofbench::l2_probe;
#define CHECK L2_PROBE_CHECK

__global__ void clean_sweep(const uint4* data, std::size_t words, unsigned* sink) { read_words(data, words, sink); }
__global__ void probe_copy(const uint4* in, uint4* out, std::size_t out_words) { copy_words(in, out, out_words); }
__global__ void probe_write(uint4* out, std::size_t words) { write_words(out, words); }

// Reads `words` (coalesced), then writes `count` records of 66 floats (264 bytes) from what it read.
__global__ void probe_records(const uint4* in, std::size_t words, float* records, std::size_t count) {
  unsigned x = 0;
  for (std::size_t i = first_index(); i < words; i += stride()) x ^= in[i].x;
  for (std::size_t r = first_index(); r < count; r += stride())
    for (int f = 0; f < 66; ++f) records[r * 66 + f] = float(x + f);
}

struct Probe {
  std::string name;
  double read_bytes, write_bytes;  // what the kernel moves
  std::function<void()> launch;
};

struct Buffers {
  std::size_t l2 = 0;
  uint4 *clean = nullptr, *in = nullptr, *out = nullptr;
  unsigned* sink = nullptr;
};

Buffers make_buffers() {
  Buffers b;
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  b.l2 = static_cast<std::size_t>(l2);
  CHECK(cudaMalloc(&b.clean, 4 * b.l2));
  CHECK(cudaMalloc(&b.in, 8 * b.l2));
  CHECK(cudaMalloc(&b.out, 2 * b.l2));
  CHECK(cudaMalloc(&b.sink, sizeof(unsigned)));
  CHECK(cudaMemset(b.clean, 0, 4 * b.l2));
  CHECK(cudaMemset(b.in, 1, 8 * b.l2));
  CHECK(cudaDeviceSynchronize());
  return b;
}

// probe_copy with its input and output `shift` words into their buffers.
Probe copy_probe(const Buffers& b, std::size_t shift, std::string name) {
  const std::size_t l2_words = b.l2 / sizeof(uint4);
  return {std::move(name), 0.75 * double(b.l2), 0.25 * double(b.l2),
          [=] { probe_copy<<<kBlocks, kThreads>>>(b.in + shift, b.out + shift, l2_words / 4); }};
}

std::vector<Probe> probes(const Buffers& b) {
  const std::size_t l2_words = b.l2 / sizeof(uint4), records = b.l2 / 16 / 264;
  return {
      copy_probe(b, 0, "probe_copy"),
      {"probe_write", 0, 2.0 * double(b.l2), [=] { probe_write<<<kBlocks, kThreads>>>(b.out, 2 * l2_words); }},
      {"probe_records", 8.0 * double(b.l2), double(records) * 264,
       [=] { probe_records<<<kBlocks, kThreads>>>(b.in, 8 * l2_words, reinterpret_cast<float*>(b.out), records); }},
  };
}

// probe_copy with its input and output moved `mib` MiB into their buffers (2 MiB: a GPU page).
std::vector<Probe> placements(const Buffers& b) {
  const std::size_t l2_words = b.l2 / sizeof(uint4), mib_words = (std::size_t{1} << 20) / sizeof(uint4);
  std::vector<Probe> moved;
  for (std::size_t mib : {2, 6, 14, 30, 62}) {
    const std::size_t shift = mib * mib_words;
    if (shift + l2_words / 4 > 2 * l2_words) break;  // the output must stay inside b.out
    moved.push_back(copy_probe(b, shift, "probe_copy +" + std::to_string(mib) + " MiB"));
  }
  return moved;
}

void clean(const Buffers& b) {
  clean_sweep<<<kBlocks, kThreads>>>(b.clean, 4 * (b.l2 / sizeof(uint4)), b.sink);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
}

// Does nothing: launched right after a probe in the same counted run, its range holds what reaches DRAM
// after the probe's range ended (writes still in flight when the profiler read the probe's counters).
__global__ void probe_drain() {}

// Each probe counted alone, then followed by probe_drain in the same run, then the moved copies alone, each
// kernel's row printed.
void count(const Buffers& b) {
  std::vector<std::pair<Probe, bool>> runs;  // a probe, and whether probe_drain follows it
  for (const bool drained : {false, true})
    for (const Probe& p : probes(b)) runs.emplace_back(p, drained);
  for (const Probe& p : placements(b)) runs.emplace_back(p, false);
  for (const auto& run : runs) {
    const Probe& p = run.first;
    const bool drained = run.second;
    const roofbench::CounterProfile c = roofbench::collect_counters(
        [&] {
          p.launch();
          if (drained) probe_drain<<<1, 1>>>();
          CHECK(cudaDeviceSynchronize());
        },
        -1, roofbench::CounterReplay::run, [&] { clean(b); });
    if (!c.error.empty()) {
      std::printf("%s: no counters: %s\n", p.name.c_str(), c.error.c_str());
      continue;
    }
    std::printf("%-14s moves read %.0f written %.0f%s (%s replay)\n", p.name.c_str(), p.read_bytes, p.write_bytes,
                drained ? ", then probe_drain" : "", c.replay.c_str());
    for (const roofbench::KernelCounters& k : c.kernels)
      std::printf("  counted %-60.60s DRAM read %.0f written %.0f\n", k.name.c_str(), k.dram_read, k.dram_write);
  }
}

void launch(const Buffers& b) {
  std::vector<Probe> all = probes(b);
  for (const Probe& p : placements(b)) all.push_back(p);
  for (const Probe& p : all) {
    clean(b);
    p.launch();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::printf("%-14s moves read %.0f written %.0f\n", p.name.c_str(), p.read_bytes, p.write_bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "count" && mode != "launch") {
    std::fprintf(stderr, "usage: roofbench_counters_probe count|launch\n");
    return 2;
  }
  const Buffers b = make_buffers();
  for (const Probe& p : probes(b)) p.launch();  // each kernel loaded outside the passes, as by a benchmark's timing
  probe_drain<<<1, 1>>>();
  clean(b);
  mode == "count" ? count(b) : launch(b);
  return 0;
}
