// kernel_counters.hpp's bookkeeping: the metrics collected and what each adds to, kernels summed per run,
// the ratios to the model, the verdict's wording, and the figures and console text with and without counters.
#include "kernel_counters.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "console.hpp"
#include "counter_observer.hpp"
#include "summaries.hpp"
#include "text.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::vector<double> values(std::initializer_list<std::pair<const char*, double>> named) {
  std::vector<double> v(counter_metrics().size(), 0.0);
  for (const auto& [name, value] : named)
    for (std::size_t i = 0; i < v.size(); ++i)
      if (std::string(counter_metrics()[i].name) == name) v[i] = value;
  return v;
}

TEST(CounterMetrics, AreSumsEachCountedOnceWithFmaAsTwo) {
  std::set<std::string> names;
  for (const CounterMetric& m : counter_metrics()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_THAT(std::string(m.name), ::testing::EndsWith(".sum"));
    const bool fma = std::string(m.name).find("fma_pred_on") != std::string::npos;
    EXPECT_EQ(m.weight, fma ? 2.0 : 1.0) << m.name;
  }
  for (const char* needed : {"dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
                             "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "sm__ops_path_tensor_src_fp16.sum"})
    EXPECT_TRUE(names.count(needed)) << needed;
}

TEST(CounterMetrics, RangeValuesLandInTheirFields) {
  KernelCounters k;
  add_range(k, values({{"dram__bytes_read.sum", 100}, {"dram__bytes_write.sum", 50}, {"lts__t_bytes.sum", 400},
                       {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 10}, {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 3},
                       {"sm__sass_thread_inst_executed_op_dfma_pred_on.sum", 1}, {"sm__sass_thread_inst_executed_op_hmul_pred_on.sum", 4},
                       {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", 1000}}));
  EXPECT_EQ(k.dram_read, 100);
  EXPECT_EQ(k.dram_write, 50);
  EXPECT_EQ(k.dram_bytes(), 150);
  EXPECT_EQ(k.l2_bytes, 400);
  EXPECT_EQ(k.flops_fp32, 23);
  EXPECT_EQ(k.flops_fp64, 2);
  EXPECT_EQ(k.flops_fp16, 4);
  EXPECT_EQ(k.flops_tensor, 1000);
  EXPECT_EQ(k.flops(), 1029);
  EXPECT_EQ(k.launches_per_run, 1);
}

TEST(CounterProfiles, SumKernelsByNameMostBytesFirst) {
  const auto small = values({{"dram__bytes_read.sum", 10}});
  const auto big = values({{"dram__bytes_read.sum", 300}, {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 5}});
  CounterProfile p = sum_ranges({{"norm", small}, {"gemm", big}, {"norm", small}});
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].name, "gemm");
  EXPECT_EQ(p.kernels[0].dram_read, 300);
  EXPECT_EQ(p.kernels[0].launches_per_run, 1);
  EXPECT_EQ(p.kernels[1].name, "norm");
  EXPECT_EQ(p.kernels[1].dram_read, 20);
  EXPECT_EQ(p.kernels[1].launches_per_run, 2);
  EXPECT_EQ(p.total.dram_read, 320);
  EXPECT_EQ(p.total.flops(), 10);
  EXPECT_EQ(p.total.launches_per_run, 3);
}

TEST(CounterProfiles, KernelNamesReadAsCpp) {
  EXPECT_EQ(demangled("_Z11copy_kernelPKfPfm"), "copy_kernel(float const*, float*, unsigned long)");
  EXPECT_EQ(demangled("add_vec16"), "add_vec16");  // a C name stays as it is
}

TEST(CounterProfiles, RatioIsZeroWithoutAModelOrACount) {
  EXPECT_DOUBLE_EQ(counter_ratio(230, 100), 2.3);
  EXPECT_EQ(counter_ratio(230, 0), 0);
  EXPECT_EQ(counter_ratio(0, 100), 0);
}

KernelCounters counted(double dram, double l2, double flops) {
  KernelCounters k;
  k.dram_read = dram, k.l2_bytes = l2, k.flops_fp32 = flops;
  return k;
}

TEST(CounterVerdict, SaysWhereTheRatioSaysSomething) {
  EXPECT_EQ(counters_verdict(counted(230, 500, 0), 100, 0), "moves 2.3x its minimum bytes");
  EXPECT_EQ(counters_verdict(counted(10, 120, 0), 100, 0), "reads its data from L2: DRAM bytes 0.1x the model");
  EXPECT_EQ(counters_verdict(counted(5, 10, 0), 100, 0), "DRAM bytes 0.05x the model");
  EXPECT_EQ(counters_verdict(counted(100, 100, 300), 100, 100), "executes 3.0x its counted FLOPs");
  EXPECT_EQ(counters_verdict(counted(250, 300, 300), 100, 100), "moves 2.5x its minimum bytes; executes 3.0x its counted FLOPs");
  EXPECT_THAT(counters_verdict(counted(100, 100, 50), 100, 100), HasSubstr("executes 0.5x its counted FLOPs"));
}

TEST(CounterVerdict, IsSilentWhereTheModelHolds) {
  EXPECT_THAT(counters_verdict(counted(105, 200, 99), 100, 100), IsEmpty());
}

// A case modelled above the ridge whose counted bytes put it below: DRAM, not its FLOPs, bounds it there.
TEST(CounterVerdict, NamesACountedIntensityUnderTheRidge) {
  EXPECT_EQ(counted_ridge_clause(counted(1e9, 1e9, 164e9), 790e12, 2.97e12),
            "its counted intensity, 164 FLOP/B, is under the ridge (266 FLOP/B): by its counted bytes DRAM bounds it");
  EXPECT_THAT(counted_ridge_clause(counted(1e9, 1e9, 400e9), 790e12, 2.97e12), IsEmpty());
  EXPECT_THAT(counted_ridge_clause(counted(0, 0, 400e9), 790e12, 2.97e12), IsEmpty()) << "no bytes counted";
  EXPECT_THAT(counted_ridge_clause(counted(1e9, 1e9, 164e9), 790e12, 0), IsEmpty()) << "no memory roof";
  EXPECT_THAT(counters_verdict(counted(105, 200, 0), 100, 100), IsEmpty());  // no FLOPs counted: nothing said of them
  EXPECT_THAT(counters_verdict(counted(105, 200, 50), 0, 0), IsEmpty());     // nothing modelled
}

Measurement copy_measurement() {
  Measurement m;
  m.name = "micro/copy/n:64M";
  m.work.bytes = 512e6;
  m.stats.median = 1e-3;
  return m;
}

TEST(CounterFigures, AreReportedBesideTheModel) {
  Measurement m = copy_measurement();
  m.counters = sum_ranges({{"copy", values({{"dram__bytes_read.sum", 268e6}, {"dram__bytes_write.sum", 248e6}, {"lts__t_bytes.sum", 540e6}})}});
  m.counters.seconds = 0.25;
  const Result r = result_of(m);
  EXPECT_DOUBLE_EQ(r.figure(fig::measured_bytes), 516e6);
  EXPECT_DOUBLE_EQ(r.figure(fig::measured_dram_read), 268e6);
  EXPECT_DOUBLE_EQ(r.figure(fig::measured_dram_write), 248e6);
  EXPECT_DOUBLE_EQ(r.figure(fig::measured_l2_bytes), 540e6);
  EXPECT_DOUBLE_EQ(r.figure(fig::measured_bytes_ratio), 516.0 / 512);
  EXPECT_EQ(r.figure(fig::measured_flops), 0);
  EXPECT_EQ(r.figure(fig::measured_ai), 0);
  EXPECT_TRUE(std::isnan(r.figure(fig::measured_flops_ratio)));  // the copy models no FLOPs
  EXPECT_DOUBLE_EQ(r.figure(fig::counters_s), 0.25);
  const std::string text = counters_text(m.name, r);
  EXPECT_THAT(text, HasSubstr("counters: DRAM"));
  EXPECT_THAT(text, HasSubstr("1.01x the model"));
  EXPECT_THAT(text, Not(HasSubstr("moves")));
}

TEST(CounterFigures, ManyKernelsGetTheTableAndTheVerdict) {
  Measurement m = copy_measurement();
  m.counters = sum_ranges({{"attention", values({{"dram__bytes_read.sum", 900e6}})}, {"gemv", values({{"dram__bytes_read.sum", 300e6}})}});
  const std::string text = counters_text(m.name, result_of(m));
  EXPECT_THAT(text, HasSubstr("micro/copy/n:64M moves 2.3x its minimum bytes"));
  EXPECT_THAT(text, HasSubstr("attention"));
  EXPECT_THAT(text, HasSubstr("gemv"));
  EXPECT_LT(text.find("attention"), text.find("gemv"));
}

TEST(CounterFigures, WithoutCountersTheBenchmarkSaysWhyAndKeepsItsTiming) {
  Measurement m = copy_measurement();
  m.counters.error = "cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
  m.counters.seconds = 0.01;
  const Result r = result_of(m);
  EXPECT_TRUE(r.passed());
  EXPECT_DOUBLE_EQ(r.figure(fig::time_median), 1e-3);
  for (auto name : {fig::measured_bytes, fig::measured_flops, fig::measured_ai, fig::measured_bytes_ratio})
    EXPECT_TRUE(std::isnan(r.figure(name))) << name;
  EXPECT_DOUBLE_EQ(r.figure(fig::counters_s), 0.01);
  EXPECT_EQ(counters_text(m.name, r), "  no counters for micro/copy/n:64M: cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES\n");
}

// The console says how the counts were made, and why each kernel was replayed where run replay failed.
TEST(CounterFigures, SayHowTheyWereCounted) {
  Measurement m = copy_measurement();
  m.counters = sum_ranges({{"copy", values({{"dram__bytes_read.sum", 268e6}})}});
  m.counters.replay = "run";
  m.counters.replay_runs = 3;
  EXPECT_THAT(counters_text(m.name, result_of(m)), HasSubstr("counters (run replay, 3 runs): DRAM"));
  m.counters.replay = "kernel";
  m.counters.replay_runs = 1;
  m.counters.run_replay_failure = "no kernel ran in the counted run";
  const std::string text = counters_text(m.name, result_of(m));
  EXPECT_THAT(text, HasSubstr("counters (kernel replay): DRAM"));
  EXPECT_THAT(text, HasSubstr("run replay failed, so each kernel was replayed: no kernel ran in the counted run"));
}

// A range takes its launch's name where the launches seen are the ranges once per pass; else its place in a
// run, so that a graph's kernels (unseen) add up per kernel over the runs, and no name lands on the wrong range.
TEST(RangeNames, AreTheLaunchesWhereTheyMatchElseThePlaceInTheRun) {
  const std::vector<std::string> launches = {"_Z4copyv", "_Z5scalev", "_Z4copyv", "_Z5scalev"};
  EXPECT_EQ(range_name(launches, 1, 4, 1), "scale()");
  EXPECT_EQ(range_name(launches, 1, 2, 2), "scale()");  // run replay: the same launches in each of two passes
  // A graph of four kernels: no launch seen, four ranges, named by their place in the run.
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(range_name({}, i, 4, 1), "kernel " + std::to_string(i + 1));
  // One kernel seen beside graph kernels: not one launch per range.
  EXPECT_EQ(range_name({"_Z4copyv", "_Z4copyv"}, 0, 4, 1), "kernel 1");
}

TEST(CounterReplayNames, ReadBackAsTheyAreWritten) {
  for (CounterReplay r : {CounterReplay::automatic, CounterReplay::kernel, CounterReplay::run})
    EXPECT_EQ(counter_replay_from(to_string(r)), r) << to_string(r);
  EXPECT_EQ(counter_replay_from("application"), std::nullopt);
}

TEST(CounterFigures, AreAbsentWhenNotAskedFor) {
  const Result r = result_of(copy_measurement());
  EXPECT_TRUE(std::isnan(r.figure(fig::measured_bytes)));
  EXPECT_TRUE(std::isnan(r.figure(fig::counters_s)));
}

// The host side of CUPTI's profiler knows a chip's metrics without a GPU or a driver: every metric the pass
// asks for must exist on the H100/H200 (GH100), or the pass would fail there at its first benchmark.
TEST(CounterMetrics, AllExistOnGH100) {
  const std::vector<std::string> unknown = unknown_counter_metrics("GH100");
  if (unknown.size() == 1 && unknown.front().find("without CUPTI") != std::string::npos) GTEST_SKIP() << unknown.front();
  EXPECT_THAT(unknown, IsEmpty());
}

}  // namespace
}  // namespace roofbench
