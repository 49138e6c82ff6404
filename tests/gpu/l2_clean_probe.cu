// How much each way of cleaning the L2 leaves to write back, and what a kernel after it writes back. For each
// clean and each target: a kernel writes 1 GiB (the L2 is left full of dirty lines), the clean runs, then the
// target: target_read reads 4.7 MB and writes nothing (its DRAM writes are the dirty lines the clean left, as
// far as 4.7 MB of reads evict them), target_copy reads 3/4 of the L2 and writes 1/4 (how much of its own
// writes leave the L2 before it ends), target_sweep reads four times the L2 and writes nothing (every dirty
// line the clean left is evicted). Nsight Compute profiles the targets alone, in one pass:
//   ncu --clock-control none --cache-control none --kernel-name-base demangled -k regex:target_
//       --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv --print-units base roofbench_l2_clean_probe
//   (one command line; with --cache-control all, ncu's own flush comes last before every target)
// The cleans are named in launch order, three targets each. roofbench's counters pass cleans with a read
// sweep over four times the L2 (Timer::clean_caches; docs/method.md, "The hardware's counters").
#include "l2_probe_kernels.cuh"

namespace {

using namespace roofbench::l2_probe;
#define CHECK L2_PROBE_CHECK

__global__ void sweep_read(const uint4* data, std::size_t words, unsigned* sink) { read_words(data, words, sink); }

// The profiled kernels: the same reads under names of their own, and a copy.
__global__ void target_read(const uint4* data, std::size_t words, unsigned* sink) { read_words(data, words, sink); }
__global__ void target_sweep(const uint4* data, std::size_t words, unsigned* sink) { read_words(data, words, sink); }
__global__ void target_copy(const uint4* in, uint4* out, std::size_t out_words) { copy_words(in, out, out_words); }

__global__ void sweep_write(uint4* data, std::size_t words) { write_words(data, words); }

// Drops each 128-byte line from the L2 without writing it back.
__global__ void discard_l2(char* data, std::size_t bytes) {
  for (std::size_t i = first_index() * 128; i < bytes; i += stride() * 128)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(data + i) : "memory");
}

struct Buffers {
  uint4* dirty;   // 1 GiB written before each clean
  uint4* target;  // what target_read reads
  uint4* copy;    // what target_copy reads (3/4 of the L2) and writes (1/4)
  uint4* big;     // what target_sweep reads, four times the L2
  uint4* clean;   // eight times the L2, for the cleans
  unsigned* sink;
  std::size_t l2;
};

void run_clean(int variant, const Buffers& b) {
  const std::size_t l2_words = b.l2 / sizeof(uint4);
  switch (variant) {
    case 1: sweep_read<<<kBlocks, kThreads>>>(b.clean, 2 * l2_words, b.sink); break;
    case 2: sweep_read<<<kBlocks, kThreads>>>(b.clean, 4 * l2_words, b.sink); break;
    case 3: sweep_read<<<kBlocks, kThreads>>>(b.clean, 8 * l2_words, b.sink); break;
    case 4: CHECK(cudaMemsetAsync(b.clean, 0, 2 * b.l2)); break;
    case 5:
      sweep_write<<<kBlocks, kThreads>>>(b.clean, 2 * l2_words);
      discard_l2<<<kBlocks, kThreads>>>(reinterpret_cast<char*>(b.clean), 2 * b.l2);
      break;
    case 6:
      sweep_read<<<kBlocks, kThreads>>>(b.clean, 4 * l2_words, b.sink);
      discard_l2<<<kBlocks, kThreads>>>(reinterpret_cast<char*>(b.clean), 4 * b.l2);
      break;
    default: break;
  }
  CHECK(cudaGetLastError());
}

void run_target(int target, const Buffers& b, std::size_t target_bytes) {
  const std::size_t l2_words = b.l2 / sizeof(uint4);
  switch (target) {
    case 0: target_read<<<kBlocks, kThreads>>>(b.target, target_bytes / sizeof(uint4), b.sink); break;
    case 1: target_copy<<<kBlocks, kThreads>>>(b.copy, b.copy + 3 * (l2_words / 4), l2_words / 4); break;
    default: target_sweep<<<kBlocks, kThreads>>>(b.big, 4 * l2_words, b.sink); break;
  }
  CHECK(cudaGetLastError());
}

}  // namespace

int main() {
  const char* cleans[] = {"none",
                          "read sweep over 2x the L2",
                          "read sweep over 4x the L2",
                          "read sweep over 8x the L2",
                          "memset over 2x the L2",
                          "write over 2x the L2, then discard.global.L2",
                          "read sweep over 4x the L2, then discard.global.L2 over it"};
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const std::size_t dirty_bytes = std::size_t{1} << 30, target_bytes = 4718592;
  Buffers b{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, static_cast<std::size_t>(l2)};
  CHECK(cudaMalloc(&b.dirty, dirty_bytes));
  CHECK(cudaMalloc(&b.target, target_bytes));
  CHECK(cudaMalloc(&b.copy, b.l2));
  CHECK(cudaMalloc(&b.big, 4 * b.l2));
  CHECK(cudaMalloc(&b.clean, 8 * b.l2));
  CHECK(cudaMalloc(&b.sink, sizeof(unsigned)));
  CHECK(cudaMemset(b.target, 1, target_bytes));
  CHECK(cudaMemset(b.copy, 1, b.l2));
  CHECK(cudaMemset(b.big, 1, 4 * b.l2));
  CHECK(cudaMemset(b.clean, 0, 8 * b.l2));
  for (int variant = 0; variant < 7; ++variant) {
    std::printf("clean %d: %s\n", variant, cleans[variant]);
    for (int target = 0; target < 3; ++target) {
      sweep_write<<<kBlocks, kThreads>>>(b.dirty, dirty_bytes / sizeof(uint4));
      run_clean(variant, b);
      CHECK(cudaDeviceSynchronize());
      run_target(target, b, target_bytes);
      CHECK(cudaDeviceSynchronize());
    }
  }
  return 0;
}
