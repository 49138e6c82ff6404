#include "memory_roofs.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace roofbench {
namespace {

using ::testing::HasSubstr;

bool has(const std::vector<MemoryVariant>& table, auto&& predicate) {
  return std::any_of(table.begin(), table.end(), predicate);
}

TEST(MemoryRoofs, EveryVariantOfBothTablesCanRun) {
  for (const auto* table : {&read_variants(), &copy_variants()})
    for (const MemoryVariant& v : *table) EXPECT_EQ(variant_problem(v), "") << describe(v);
}

// The cache roof is measured with the read table's first variant: the grid-stride kernel it always was.
TEST(MemoryRoofs, TheFirstReadVariantIsTheGridStrideKernelOfTheCacheRoof) {
  const MemoryVariant& first = read_variants().front();
  EXPECT_EQ(first.layout, MemoryLayout::grid_stride);
  EXPECT_EQ(first.threads, 512);
  EXPECT_EQ(first.blocks_per_sm, 4);
  EXPECT_EQ(first.loads_in_flight, 4);
  EXPECT_FALSE(first.streaming);
  EXPECT_EQ(copy_variants().front().layout, MemoryLayout::memcpy);
  EXPECT_FALSE(has(read_variants(), [](auto& v) { return v.layout == MemoryLayout::memcpy; }));
}

// The shapes the split-KV decode reads in (blocks of 128, one wave of contiguous runs at 8 blocks per SM
// with 4 loads in flight, 64 KiB splits, read-once loads) are in the read table, beside other block sizes,
// blocks per SM and loads in flight.
TEST(MemoryRoofs, TheReadTableHoldsTheDecodeShapesAndOthers) {
  const auto& t = read_variants();
  EXPECT_TRUE(has(t, [](auto& v) {
    return v.layout == MemoryLayout::chunks && v.chunk_bytes == 0 && v.threads == 128 && v.blocks_per_sm == 8 &&
           v.loads_in_flight == 4;
  }));
  EXPECT_TRUE(has(t, [](auto& v) { return v.chunk_bytes == 64 * 1024 && v.threads == 128; }));
  EXPECT_TRUE(has(t, [](auto& v) { return v.layout == MemoryLayout::chunks && v.streaming; }));
  for (int loads : kLoadsInFlight)
    EXPECT_TRUE(has(t, [loads](auto& v) { return v.loads_in_flight == loads; })) << loads;
  for (int threads : {128, 256, 512})
    EXPECT_TRUE(has(t, [threads](auto& v) { return v.threads == threads; })) << threads;
  EXPECT_TRUE(has(copy_variants(), [](auto& v) { return v.layout == MemoryLayout::chunks; }));
}

// micro's copy_kernel: blocks of 256, each thread 4 loads a grid apart, once; a copy, so in the copy table only.
TEST(MemoryRoofs, TheCopyTableHoldsTheShippedCopyKernelsShape) {
  EXPECT_TRUE(has(copy_variants(), [](auto& v) {
    return v.layout == MemoryLayout::one_step && v.threads == 256 && v.loads_in_flight == 4 && !v.streaming;
  }));
  EXPECT_FALSE(has(read_variants(), [](auto& v) { return v.layout == MemoryLayout::one_step; }));
  EXPECT_THAT(variant_problem({MemoryLayout::one_step, 256, 0, 4, true, 0}), HasSubstr("no streaming form"));
}

TEST(MemoryRoofs, AVariantThatCannotRunSaysWhy) {
  MemoryVariant v;
  v.threads = 100;
  EXPECT_THAT(variant_problem(v), HasSubstr("not 1 to 32 whole warps"));
  v = {};
  v.loads_in_flight = 5;
  EXPECT_THAT(variant_problem(v), HasSubstr("built for 4, 8 or 16"));
  v = {};
  v.blocks_per_sm = 0;
  EXPECT_THAT(variant_problem(v), HasSubstr("no blocks per SM"));
  v = {MemoryLayout::chunks, 128, 0, 4, false, 1000};
  EXPECT_THAT(variant_problem(v), HasSubstr("not whole steps of 8192"));
  v.chunk_bytes = 8192;
  EXPECT_EQ(variant_problem(v), "");  // fixed chunks need no blocks per SM
}

TEST(MemoryRoofs, TheBestRunIsTheFastestThatRan) {
  const MemoryVariant a, b{MemoryLayout::chunks, 128, 8, 4, false, 0};
  EXPECT_EQ(best_run({{a, 4.5e12}, {b, 4.7e12}, {a, 4.6e12}}), 1u);
  EXPECT_EQ(best_run({{a, 0}, {b, 4.1e12}}), 1u);  // 0: could not run
  EXPECT_EQ(best_run({{a, 4.7e12}, {b, 4.7e12}}), 0u);  // the first of equals
  EXPECT_THROW(best_run({{a, 0}}), std::invalid_argument);
  EXPECT_THROW(best_run({}), std::invalid_argument);
}

TEST(MemoryRoofs, TheHowNamesTheWinnerAndTheSpread) {
  const MemoryVariant grid;
  const MemoryVariant chunks{MemoryLayout::chunks, 128, 0, 4, true, 64 * 1024};
  const std::vector<MemoryRun> runs = {{grid, 4.5e12}, {chunks, 4.7e12}, {grid, 0}};
  EXPECT_EQ(roof_how("read_bandwidth", runs, "kernels reading", std::size_t{2} << 30, 10, "bytes read"),
            "read_bandwidth: the best of 3 kernels reading 2.00 GiB (4.50 TB/s to 4.70 TB/s, each the best of 10): "
            "contiguous 64.0 KiB chunks, one per block of 128, 4 x 16-byte loads in flight per thread, streaming "
            "hints (loads bypass L1 and prefetch 256 bytes into L2, stores evict first) (bytes read)");
}

TEST(MemoryRoofs, EachLayoutIsDescribed) {
  EXPECT_EQ(describe(read_variants().front()),
            "grid-stride loop, 4 blocks of 512 per SM, 4 x 16-byte loads in flight per thread");
  EXPECT_EQ(describe({MemoryLayout::chunks, 128, 8, 8, false, 0}),
            "one contiguous chunk per block, 8 blocks of 128 per SM, 8 x 16-byte loads in flight per thread");
  EXPECT_EQ(describe(copy_variants().front()), "cudaMemcpyAsync device to device");
  EXPECT_EQ(describe({MemoryLayout::one_step, 256, 0, 4, false, 0}),
            "one step a thread, blocks of 256 in as many waves as it takes, 4 x 16-byte read-only loads in flight "
            "per thread, a grid apart");
}

// The roofs stream as much as the largest shipped copy (4 GiB) where its two buffers fit, less on a smaller GPU.
TEST(MemoryRoofs, TheRoofsStreamTheLargestCopyWhereItFits) {
  constexpr double GiB = 1024.0 * 1024 * 1024;
  EXPECT_EQ(memory_roof_bytes(140 * GiB), std::size_t{4} << 30);
  EXPECT_EQ(memory_roof_bytes(11 * GiB), std::size_t{4} << 30);
  EXPECT_EQ(memory_roof_bytes(10 * GiB), std::size_t{2} << 30);
  EXPECT_EQ(memory_roof_bytes(3 * GiB), std::size_t{1} << 30);
  EXPECT_EQ(memory_roof_bytes(0.1 * GiB), std::size_t{256} << 20);
}

}  // namespace
}  // namespace roofbench

