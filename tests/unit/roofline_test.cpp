#include "roofline.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace roofbench {
namespace {

// A made-up device: 100 GB/s, 1 TFLOP/s fp32, 0.5 TFLOP/s fp64, nothing else (like a CPU).
Ceilings cpu_like_ceilings() {
  Ceilings c;
  c.bandwidth = 100e9;
  c.flops_of(Precision::fp32) = 1e12;
  c.flops_of(Precision::fp64) = 0.5e12;
  return c;
}

TEST(Place, ElementwiseAddFp32IsMemoryBoundWithIntensityOneTwelfth) {
  const double n = 1e6;
  const Work add{.flops = n, .bytes = 3 * 4 * n};  // two fp32 reads and one write per addition
  const double seconds = add.bytes / 50e9;         // half the bandwidth ceiling
  const RooflinePoint p = place(add, seconds, Precision::fp32, cpu_like_ceilings());
  EXPECT_DOUBLE_EQ(p.intensity, 1.0 / 12.0);
  EXPECT_EQ(p.bound, Bound::memory);
  EXPECT_DOUBLE_EQ(p.bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(p.flops_per_s, n / seconds);
  EXPECT_DOUBLE_EQ(p.attainable, 100e9 / 12.0);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0.5);
}

// Attention decode: ~1 FLOP per byte, all of it reads. Its roof is the read-streaming ceiling.
TEST(Place, ReadDominatedWorkIsJudgedByTheReadRoof) {
  Ceilings c = cpu_like_ceilings();
  c.read_bandwidth = 125e9;
  const Work decode{.flops = 1e9, .bytes = 1e9, .read_dominated = true};
  const RooflinePoint p = place(decode, decode.bytes / 100e9, Precision::fp32, c);  // at the copy ceiling
  EXPECT_EQ(p.bound, Bound::memory);
  EXPECT_DOUBLE_EQ(p.attainable, 125e9);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0.8);
  Work streamed = decode;
  streamed.read_dominated = false;
  EXPECT_DOUBLE_EQ(place(streamed, decode.bytes / 100e9, Precision::fp32, c).roof_fraction, 1.0);
}

TEST(Place, ReadDominatedWithoutAReadRoofFallsBackToTheCopyCeiling) {
  const Work decode{.flops = 1e9, .bytes = 1e9, .read_dominated = true};
  const RooflinePoint p = place(decode, decode.bytes / 50e9, Precision::fp32, cpu_like_ceilings());
  EXPECT_DOUBLE_EQ(p.attainable, 100e9);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0.5);
}

// The ceilings an H200 measured: copy (read + written) 4.240e12 B/s, read streaming 4.686e12, L2 2.80e13.
Ceilings h200_ceilings() {
  Ceilings c{.bandwidth = 4.240e12, .read_bandwidth = 4.686e12, .cache_bandwidth = 2.80e13};
  c.flops_of(Precision::fp32) = 67e12;
  c.flops_of(Precision::bf16) = 989e12;
  return c;
}

TEST(MemoryRoof, HalfReadIsTheCopyRoofAndAllReadIsTheReadRoof) {
  const Ceilings c = h200_ceilings();
  const MemoryRoof copy = memory_roof(c, Work{.bytes = 2e9, .bytes_read = 1e9});
  EXPECT_NEAR(copy.bytes_per_s, c.bandwidth, 1e-9 * c.bandwidth);
  EXPECT_EQ(copy.name, "dram copy");
  const MemoryRoof read = memory_roof(c, Work{.bytes = 2e9, .bytes_read = 2e9});
  EXPECT_NEAR(read.bytes_per_s, c.read_bandwidth, 1e-9 * c.read_bandwidth);
  EXPECT_EQ(read.name, "dram read");
}

// An add reads two bytes for each it writes: f = 2/3, between the copy roof and the read roof.
TEST(MemoryRoof, TwoThirdsReadOnAnH200IsItsMixedRoof) {
  const Ceilings c = h200_ceilings();
  const double n = 1e9;
  const MemoryRoof add = memory_roof(c, Work{.flops = n, .bytes = 12 * n, .bytes_read = 8 * n});
  EXPECT_NEAR(add.bytes_per_s, 4.378e12, 0.001 * 4.378e12);
  EXPECT_EQ(add.name, "dram mixed 67% read");
  const RooflinePoint p = place(Work{.flops = n, .bytes = 12 * n, .bytes_read = 8 * n}, 12 * n / 4.37e12,
                                Precision::fp32, c);
  EXPECT_NEAR(p.roof_fraction, 0.998, 0.001);
  EXPECT_EQ(p.memory_roof.name, "dram mixed 67% read");
}

TEST(MemoryRoof, WithoutAReadRoofAboveTheCopyRoofTheMixIsTheCopyRoof) {
  Ceilings c = h200_ceilings();
  c.read_bandwidth = 0;
  EXPECT_DOUBLE_EQ(mixed_bandwidth(c, 2.0 / 3), c.bandwidth);
  EXPECT_EQ(memory_roof(c, Work{.bytes = 3, .bytes_read = 2}).name, "dram copy");
  c.read_bandwidth = 0.9 * c.bandwidth;
  EXPECT_DOUBLE_EQ(mixed_bandwidth(c, 1), c.bandwidth);
  EXPECT_DOUBLE_EQ(mixed_bandwidth(Ceilings{}, 0.7), 0);
}

TEST(MemoryRoof, FractionsOutsideZeroToOneAreClamped) {
  const Ceilings c = h200_ceilings();
  EXPECT_DOUBLE_EQ(mixed_bandwidth(c, 1.5), mixed_bandwidth(c, 1));
  EXPECT_DOUBLE_EQ(mixed_bandwidth(c, -1), mixed_bandwidth(c, 0));
  EXPECT_LT(mixed_bandwidth(c, 0), c.bandwidth);  // all writes: the implied write rate, below the copy roof
  EXPECT_EQ(memory_roof(c, Work{.bytes = 1, .bytes_read = 5}).name, "dram read");
  EXPECT_EQ(memory_roof(c, Work{.bytes = 1000, .bytes_read = 998}).name, "dram mixed 99% read");
}

TEST(MemoryRoof, NotSaidKeepsTheReadDominatedRule) {
  const Ceilings c = h200_ceilings();
  EXPECT_EQ(memory_roof(c, Work{.bytes = 1e9}).name, "dram copy");
  EXPECT_DOUBLE_EQ(memory_roof(c, Work{.bytes = 1e9}).bytes_per_s, c.bandwidth);
  const MemoryRoof read = memory_roof(c, Work{.bytes = 1e9, .read_dominated = true});
  EXPECT_EQ(read.name, "dram read");
  EXPECT_DOUBLE_EQ(read.bytes_per_s, c.read_bandwidth);
}

// A hot run whose bytes sit in L2 reads them there: the cache bandwidth is its roof, not DRAM's.
TEST(MemoryRoof, CacheResidentRunsArePlacedUnderTheCacheRoof) {
  const Ceilings c = h200_ceilings();
  const Work copy{.bytes = 32e6, .bytes_read = 16e6};
  const RooflinePoint hot = place(copy, copy.bytes / (1.47 * c.bandwidth), Precision::fp32, c, true);
  EXPECT_EQ(hot.memory_roof.name, "cache");
  EXPECT_DOUBLE_EQ(hot.memory_roof.bytes_per_s, c.cache_bandwidth);
  EXPECT_LT(hot.roof_fraction, 1.0);
  const RooflinePoint dram = place(copy, copy.bytes / (1.47 * c.bandwidth), Precision::fp32, c, false);
  EXPECT_EQ(dram.memory_roof.name, "dram copy");
  EXPECT_NEAR(dram.roof_fraction, 1.47, 1e-9);
  Ceilings no_cache = c;
  no_cache.cache_bandwidth = 0;
  EXPECT_EQ(memory_roof(no_cache, copy, true).name, "dram copy");
}

// A memory-bound GEMM in cache: the attainable FLOP/s rise with the cache roof.
TEST(MemoryRoof, ACacheResidentGemmsAttainableFollowsTheCacheRoof) {
  const Ceilings c = h200_ceilings();
  const Work gemm{.flops = 1e9, .bytes = 1e9, .bytes_read = 0.75e9};
  const RooflinePoint p = place(gemm, 1e-3, Precision::bf16, c, true);
  EXPECT_EQ(p.bound, Bound::memory);
  EXPECT_DOUBLE_EQ(p.attainable, c.cache_bandwidth);
}

TEST(Place, ReadDominatedCopyLikeWorkWithNoFlopsUsesTheReadRoof) {
  Ceilings c = cpu_like_ceilings();
  c.read_bandwidth = 200e9;
  const Work scan{.bytes = 1e9, .read_dominated = true};
  EXPECT_DOUBLE_EQ(place(scan, scan.bytes / 100e9, Precision::fp32, c).roof_fraction, 0.5);
  EXPECT_DOUBLE_EQ(memory_roof(c, Work{.bytes = 1e9}).bytes_per_s, 100e9);
}

TEST(Place, LargeGemmIsComputeBound) {
  const double n = 1024;
  const Work gemm{.flops = 2 * n * n * n, .bytes = 3 * 4 * n * n};
  const double seconds = gemm.flops / 0.8e12;
  const RooflinePoint p = place(gemm, seconds, Precision::fp32, cpu_like_ceilings());
  EXPECT_DOUBLE_EQ(p.intensity, 2 * n / 12);
  EXPECT_EQ(p.bound, Bound::compute);
  EXPECT_DOUBLE_EQ(p.attainable, 1e12);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0.8);
}

TEST(Place, TheComputeRoofOfTheCasesPrecisionApplies) {
  const Work gemm{.flops = 2e9, .bytes = 1e6};
  const RooflinePoint p = place(gemm, 2e9 / 0.25e12, Precision::fp64, cpu_like_ceilings());
  EXPECT_DOUBLE_EQ(p.attainable, 0.5e12);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0.5);
}

TEST(Place, ACopyWithoutFlopsIsJudgedByBandwidthAlone) {
  const Work copy{.flops = 0, .bytes = 2e9};
  const RooflinePoint p = place(copy, 0.1, Precision::fp32, cpu_like_ceilings());
  EXPECT_EQ(p.bound, Bound::memory);
  EXPECT_DOUBLE_EQ(p.flops_per_s, 0);
  EXPECT_DOUBLE_EQ(p.bytes_per_s, 20e9);
  EXPECT_DOUBLE_EQ(p.intensity, 0);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0.2);
}

TEST(Place, WorkWithoutBytesIsComputeBoundAtInfiniteIntensity) {
  const RooflinePoint p = place(Work{.flops = 1e9}, 0.01, Precision::fp32, cpu_like_ceilings());
  EXPECT_TRUE(std::isinf(p.intensity));
  EXPECT_EQ(p.bound, Bound::compute);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0.1);
}

TEST(Place, NoTimeGivesAnEmptyPoint) {
  const RooflinePoint p = place(Work{.flops = 1, .bytes = 1}, 0, Precision::fp32, cpu_like_ceilings());
  EXPECT_DOUBLE_EQ(p.flops_per_s, 0);
  EXPECT_DOUBLE_EQ(p.roof_fraction, 0);
}

TEST(ComputeRoof, APrecisionWithItsOwnRoofUsesIt) {
  Ceilings c = cpu_like_ceilings();
  c.flops_of(Precision::bf16) = 8e12;
  c.flops_of(Precision::fp8) = 16e12;
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::fp32), 1e12);
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::fp64), 0.5e12);
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::bf16), 8e12);
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::fp8), 16e12);
}

TEST(ComputeRoof, OnACpuWithOnlyFp32AndFp64ReducedPrecisionsRunAsFp32) {
  const Ceilings c = cpu_like_ceilings();
  for (Precision p : {Precision::tf32, Precision::bf16, Precision::fp16, Precision::fp8})
    EXPECT_DOUBLE_EQ(compute_roof(c, p), 1e12) << to_string(p);
}

TEST(ComputeRoof, HalfPrecisionsFallBackToBf16ThenTf32) {
  Ceilings c = cpu_like_ceilings();
  c.flops_of(Precision::tf32) = 4e12;
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::fp16), 4e12);
  c.flops_of(Precision::bf16) = 8e12;
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::fp16), 8e12);
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::fp8), 8e12);
}

TEST(ComputeRoof, Fp8WithOnlyAnFp16RoofUsesIt) {
  Ceilings c = cpu_like_ceilings();
  c.flops_of(Precision::fp16) = 6e12;
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::fp8), 6e12);
  EXPECT_DOUBLE_EQ(compute_roof(c, Precision::bf16), 6e12);
}

TEST(ComputeRoof, Fp32FallsBackToFp64AndNothingGivesZero) {
  Ceilings only_fp64;
  only_fp64.flops_of(Precision::fp64) = 3e11;
  EXPECT_DOUBLE_EQ(compute_roof(only_fp64, Precision::fp32), 3e11);
  EXPECT_DOUBLE_EQ(compute_roof(Ceilings{}, Precision::bf16), 0);
}

TEST(Datasheet, H200) {
  const auto d = datasheet_for("NVIDIA H200");
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->name.find("H200"), std::string::npos);
  EXPECT_DOUBLE_EQ(d->ceilings.bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(d->ceilings.flops_of(Precision::fp64), 67e12);
  EXPECT_DOUBLE_EQ(d->ceilings.flops_of(Precision::tf32), 494.7e12);
  EXPECT_DOUBLE_EQ(d->ceilings.flops_of(Precision::bf16), 989.4e12);
  EXPECT_DOUBLE_EQ(d->ceilings.flops_of(Precision::fp16), 989.4e12);
  EXPECT_DOUBLE_EQ(d->ceilings.flops_of(Precision::fp8), 1978.9e12);
}

TEST(Datasheet, H100SxmAndPcieDiffer) {
  const auto sxm = datasheet_for("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(sxm.has_value());
  EXPECT_DOUBLE_EQ(sxm->ceilings.bandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ(sxm->ceilings.flops_of(Precision::bf16), 989.4e12);
  const auto pcie = datasheet_for("NVIDIA H100 PCIe");
  ASSERT_TRUE(pcie.has_value());
  EXPECT_DOUBLE_EQ(pcie->ceilings.bandwidth, 2.0e12);
  EXPECT_DOUBLE_EQ(pcie->ceilings.flops_of(Precision::bf16), 756e12);
}

TEST(Datasheet, NoneForOtherDevices) {
  EXPECT_FALSE(datasheet_for("NVIDIA A100-SXM4-80GB").has_value());
  EXPECT_FALSE(datasheet_for("AMD EPYC 9654 96-Core Processor").has_value());
}

}  // namespace
}  // namespace roofbench
