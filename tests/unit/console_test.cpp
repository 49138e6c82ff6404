// The console without a process: numbers for people, the table's lines, the closing summary, why no GPU
// is used, and the reporter as Google Benchmark drives it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "console.hpp"

namespace roofbench {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ConsoleNumbers, TimesHaveThreeOrFourSignificantDigitsAndAUnitPeopleRead) {
  EXPECT_EQ(format_seconds(12.3456e-6), "12.35 us");
  EXPECT_EQ(format_seconds(213e-6), "213.0 us");
  EXPECT_EQ(format_seconds(1.33832e-3), "1.338 ms");
  EXPECT_EQ(format_seconds(0.0104955), "10.50 ms");
  EXPECT_EQ(format_seconds(64.14e-9), "64.14 ns");
  EXPECT_EQ(format_seconds(2.5), "2.500 s");
  EXPECT_EQ(format_seconds(0.99996e-3), "1.000 ms") << "rounding up moves to the next unit, never 1000.0 us";
  EXPECT_EQ(format_seconds(0), "0 s");
  EXPECT_EQ(format_seconds(std::numeric_limits<double>::quiet_NaN()), "-");
}

TEST(ConsoleNumbers, EnergyTakesJoulesWithThreeSignificantDigits) {
  EXPECT_EQ(format_joules(14.47), "14.5 J");
  EXPECT_EQ(format_joules(3.21e-3), "3.21 mJ");
  EXPECT_EQ(format_joules(850e-6), "850 uJ");
  EXPECT_EQ(format_joules(0.99996), "1.00 J") << "rounding up moves to the next unit, never 1000 mJ";
  EXPECT_EQ(format_joules(std::numeric_limits<double>::quiet_NaN()), "-");
}

TEST(ConsoleNumbers, RatesTakeSiPrefixes) {
  EXPECT_EQ(format_rate(4.11e12, "B/s"), "4.11 TB/s");
  EXPECT_EQ(format_rate(748e12, "FLOP/s"), "748 TFLOP/s");
  EXPECT_EQ(format_rate(6.20387e6, "elements/s"), "6.20 M elements/s");
  EXPECT_EQ(format_rate(747.2, "matmuls/s"), "747 matmuls/s");
  EXPECT_EQ(format_rate(999.7e9, "B/s"), "1.00 TB/s");
  EXPECT_EQ(format_rate(0.5, "tokens/s"), "0.5 tokens/s");
}

// A host figure with `value`, its unit and hint from the host's one table (summaries.cpp).
Summary host_figure(const std::string& name, double value) {
  for (const HostFigure& f : host_figures())
    if (name == f.name) return {f.name, value, f.unit, f.description, f.hint};
  ADD_FAILURE() << name << " is no host figure";
  return {};
}

TEST(ConsoleNumbers, RatiosPercentagesAndCountsNeverTakeSiPrefixes) {
  // What Google Benchmark's console printed: gate_rel_err=66.2195a, noise_pct=3.87229k.
  EXPECT_EQ(format_figure(host_figure("gate_rel_err", 66.2195e-18)), "6.62e-17");
  EXPECT_EQ(format_figure(host_figure("noise", 0.0387229)), "0.0387");
  EXPECT_EQ(format_figure(host_figure("roof_pct", 3872.29)), "3872%");
  EXPECT_EQ(format_figure(host_figure("roof_pct", 41.24)), "41.2%");
  EXPECT_EQ(format_figure(host_figure("roof_pct", 0.0471)), "0.05%");
  EXPECT_EQ(format_figure(host_figure("samples", 1234567)), "1234567");
  EXPECT_EQ(format_figure(host_figure("peak_mem", 1536 * 1024)), "1.50 MiB");
  EXPECT_EQ(format_figure(host_figure("peak_mem", 768)), "768 B");
  EXPECT_EQ(format_figure(host_figure("sm_clock_mhz", 1755.4)), "1755 MHz");
  EXPECT_EQ(format_figure(host_figure("time_median", 1.5e-6)), "1.500 us");
  EXPECT_EQ(format_figure(host_figure("B/s", 4.24e12)), "4.24 TB/s");
  EXPECT_EQ(format_figure(host_figure("AI", 0.0833333)), "0.08333 FLOP/B");
}

TEST(ConsoleNumbers, AKernelIsLabelledByItsNameAndTemplateArguments) {
  EXPECT_EQ(kernel_label("void roofbench::gpt::cuda::(anonymous namespace)::layernorm_backward_kernel<128>(float const*, int)"),
            "layernorm_backward_kernel<128>");
  EXPECT_EQ(kernel_label("void <unnamed>::gemv_kernel<4, 1>(const uint4 *, __nv_bfloat16 *, int)"), "gemv_kernel<4, 1>");
  EXPECT_EQ(kernel_label("roofbench::gpt::cuda::attention::(anonymous namespace)::forward_v13(Params)"), "forward_v13");
  EXPECT_EQ(kernel_label("void f<std::pair<int, int> >(int)"), "f<std::pair<int, int> >");
  EXPECT_EQ(kernel_label("nvjet_sm90_tst_128x160_64x5_2x1_v_bz_TNT"), "nvjet_sm90_tst_128x160_64x5_2x1_v_bz_TNT");
  EXPECT_EQ(kernel_label("kernel 3"), "kernel 3") << "ranges named by their place keep their words";
  EXPECT_EQ(kernel_label("all kernels"), "all kernels");
  EXPECT_EQ(kernel_label("void ns::f<(int)2>(float*)"), "f<(int)2>");
}

TEST(ConsoleNumbers, ShortenKeepsTheFirstLineAndCutsWithAnEllipsis) {
  EXPECT_EQ(shorten("  gate   failed:\tbad  ", 40), "gate failed: bad");
  EXPECT_EQ(shorten("crashed: signal 11\nits log ended: a\nb", 40), "crashed: signal 11...");
  EXPECT_EQ(shorten("0123456789abcdef", 10), "0123456...");
  EXPECT_EQ(shorten("caf\xc3\xa9\xc3\xa9\xc3\xa9", 8), "caf\xc3\xa9...");
  EXPECT_EQ(shorten("caf\xc3\xa9\xc3\xa9\xc3\xa9", 7), "caf...") << "a UTF-8 character is never cut in two";
}

TEST(NoGpuReason, SaysTheRealCause) {
  GpuAbsence none;  // what a machine without any NVIDIA driver shows
  none.runtime_says_driver_too_old = true;
  none.runtime_error = "CUDA driver version is insufficient for CUDA runtime version";
  none.runtime_cuda_version = 13000;
  none.driver_library_error = "libcuda.so.1: cannot open shared object file: No such file or directory";
  EXPECT_EQ(explain_no_gpu(none), "no NVIDIA driver is installed (libcuda.so.1 cannot be loaded; no /dev/nvidia* device)");

  GpuAbsence no_nodes = none;
  no_nodes.driver_library_loads = true;
  EXPECT_THAT(explain_no_gpu(no_nodes), StartsWith("the NVIDIA driver's library is installed but there is no /dev/nvidia* device"));

  GpuAbsence old = no_nodes;
  old.device_nodes = true;
  old.driver_cuda_version = 12040;
  EXPECT_EQ(explain_no_gpu(old),
            "the NVIDIA driver is too old: it supports CUDA 12.4, this roofbench was built with CUDA 13.0 (update the driver)");

  GpuAbsence empty;
  empty.driver_library_loads = empty.device_nodes = true;
  empty.runtime_says_no_device = true;
  empty.driver_cuda_version = 13000;
  EXPECT_EQ(explain_no_gpu(empty), "no CUDA device found (the NVIDIA driver for CUDA 13.0 sees none)");

  GpuAbsence hidden = empty;
  hidden.cuda_visible_devices = "";
  EXPECT_EQ(explain_no_gpu(hidden), "no CUDA device found with CUDA_VISIBLE_DEVICES=\"\"");

  GpuAbsence other = empty;
  other.runtime_says_no_device = false;
  other.runtime_error = "all CUDA-capable devices are busy or unavailable";
  EXPECT_EQ(explain_no_gpu(other), "CUDA cannot be used: all CUDA-capable devices are busy or unavailable");
}

TEST(NoGpuReason, TheDebugNoteSaysTimingsAreNotAffected) {
  EXPECT_THAT(debug_library_note(), AllOf(HasSubstr("Library was built as DEBUG"), HasSubstr("not affected")));
}

Result passing(const std::string& name, double median) {
  Measurement r;
  r.name = name;
  r.status = Status::ok;
  r.work.flops = 1e6;
  r.work.bytes = 8e6;
  r.work.items = 1e6;
  r.work.item_name = "elements";
  r.stats.median = median;
  r.stats.noise = 0.0123;
  r.stats.count = 20;
  r.gate_checked = true;
  r.gate_error = 1e-8;
  r.point = {1e6 / median, 8e6 / median, 0.125, 0, 0.412, Bound::memory};
  return result_of(r);
}

Session::Outcome ran(Result r, bool failure = false) {
  Session::Outcome out;
  out.ran = true;
  out.counts_as_failure = failure;
  out.result = std::move(r);
  return out;
}

Session::Outcome failed(const std::string& name, Status status, const std::string& message) {
  Result r;
  r.name = name;
  r.status = status;
  r.message = message;
  return ran(r, true);
}

Session::Outcome not_run(const std::string& reason) {
  Session::Outcome out;
  out.not_run_reason = reason;
  return out;
}

const TableSettings kTable{true, 24};

TEST(ConsoleTable, APassingRowHasTimeRateRoofBoundGateAndNoise) {
  const std::string row = table_row("cpu/add/n:65536", ran(passing("cpu/add/n:65536", 12.34e-6)), kTable);
  EXPECT_THAT(row, StartsWith("cpu/add/n:65536          "));
  EXPECT_THAT(row, AllOf(HasSubstr("12.34 us"), HasSubstr("81.0 G elements/s"), HasSubstr("41.2%"), HasSubstr("memory"),
                         HasSubstr("pass"), HasSubstr("1.2%")));
  EXPECT_THAT(row, Not(HasSubstr("iterations:1")));
  EXPECT_LT(row.size(), 100u);
  // The columns sit under the header's.
  const std::string header = table_header(kTable);
  EXPECT_EQ(header.find("time") + 4, row.find("12.34 us") + 8);
  EXPECT_EQ(header.find("noise") + 5, row.rfind("1.2%") + 4);
}

TEST(ConsoleTable, TheProfileSaysHowLongTheDeviceIdledBetweenLaunches) {
  Result r = passing("p/c", 22e-6);
  r.profile.kernels = {{"k", 20e-6, 2}};
  r.profile.kernel_seconds_per_run = 20e-6;
  r.profile.span_seconds_per_run = 21.5e-6;
  r.profile.idle_seconds_per_run = 1.5e-6;
  EXPECT_THAT(profile_text("p/c", r), AllOf(HasSubstr("profile: 20.0 us of kernels per run (run median 22.0 us)\n"),
                                            HasSubstr("idle between launches: 1.5 us of the 21.5 us")));
  r.profile.span_seconds_per_run = 30e-6;  // the traced run slower than the timed: the gaps are the tracer's
  EXPECT_THAT(profile_text("p/c", r), HasSubstr("idle between launches: not shown: the traced run spanned 30.0 us"));
  r.profile.span_seconds_per_run = 0;  // no records with times: nothing to say about idle time
  EXPECT_THAT(profile_text("p/c", r), Not(HasSubstr("idle")));
}

TEST(ConsoleTable, TheRateIsItemsElseFlopsElseBytes) {
  Result r = passing("p/c", 1e-3);
  EXPECT_THAT(table_row("p/c", ran(r), kTable), HasSubstr("1.00 G elements/s"));
  r.work.item_name.clear();
  EXPECT_THAT(table_row("p/c", ran(r), kTable), HasSubstr("1.00 GFLOP/s"));
  r.work.flops = 0;
  EXPECT_THAT(table_row("p/c", ran(r), kTable), HasSubstr("8.00 GB/s"));
}

TEST(ConsoleTable, NotesSayGraphCacheColdAndLeaks) {
  Result r = passing("p/c", 1e-6);
  r.graph = r.cache_resident = true;
  r.memory.leaked = 10.0 * (1 << 30);
  EXPECT_THAT(table_row("p/c", ran(r), kTable), EndsWith("graph, data in cache, leaked 10.0 GiB"));
}

TEST(ConsoleTable, NotesSayWhichWayARunWasCold) {
  Result r = passing("p/c", 1e-6);
  r.cold = true;
  EXPECT_THAT(table_row("p/c", ran(r), kTable), EndsWith(" cold"));
  r.graph = true;
  r.cold_copies = 23;
  EXPECT_THAT(table_row("p/c", ran(r), kTable), EndsWith("graph, cold over 23 copies"));
}

TEST(ConsoleTable, AFailureIsOneShortLineSayingWhatAndWhy) {
  const std::string gate = table_row("wrong/off/n:4096", failed("wrong/off/n:4096", Status::gate_failed,
                                                                "relative L2 error 0.01, tolerance 1e-05 (fp32)"),
                                     kTable);
  EXPECT_EQ(gate, "wrong/off/n:4096          FAIL (gate): relative L2 error 0.01, tolerance 1e-05 (fp32)");
  const std::string long_message(500, 'x');
  const std::string crash = table_row("crash/b", failed("crash/b", Status::crashed, long_message), kTable);
  EXPECT_THAT(crash, AllOf(HasSubstr("FAIL (crashed): xxx"), EndsWith("...")));
  EXPECT_LE(crash.size(), 120u);
  EXPECT_THAT(table_row("c/t", failed("c/t", Status::timed_out, "ran past its 1.5 s timeout"), kTable),
              HasSubstr("FAIL (timed out): ran past its 1.5 s timeout"));
  EXPECT_THAT(table_row("c/e", failed("c/e", Status::error, "run() failed"), kTable), HasSubstr("FAIL (error): run() failed"));
  EXPECT_THAT(table_row("c/n", not_run("fp8 needs an sm_89 or newer GPU"), kTable),
              HasSubstr("not run: fp8 needs an sm_89 or newer GPU"));
  Session::Outcome oom = failed("s/w/n:9", Status::out_of_memory, "out of memory");
  oom.counts_as_failure = false;
  EXPECT_THAT(table_row("s/w/n:9", oom, kTable), HasSubstr("out of memory, ends its sweep"));
}

TEST(ConsoleTable, RepetitionsGiveTheMedianOfMediansAndTheirSpread) {
  const std::string row = repetitions_row("p/c", {passing("p/c", 1e-3), passing("p/c", 1.1e-3), passing("p/c", 1.05e-3)}, 3, kTable);
  EXPECT_THAT(row, AllOf(HasSubstr("1.050 ms"), HasSubstr("median of 3 repetitions"), HasSubstr("1.000 ms to 1.100 ms"),
                         HasSubstr("spread 9.5%")));
  EXPECT_THAT(repetitions_row("p/c", {passing("p/c", 1e-3)}, 3, kTable), HasSubstr("median of 1 passing of 3 repetitions"));
}

RunTally tally_of_a_mixed_run() {
  RunTally t;
  t.add("good/a/n:1", ran(passing("good/a/n:1", 1e-6)));
  t.add("good/a/n:2", ran(passing("good/a/n:2", 1e-6)));
  t.add("wrong/g", failed("wrong/g", Status::gate_failed, "gate failed"));
  t.add("wrong/e", failed("wrong/e", Status::error, "threw"));
  t.add("wrong/o", failed("wrong/o", Status::out_of_memory, "out of memory"));
  t.add("crash/c", failed("crash/c", Status::crashed, "signal 11"));
  t.add("crash/t", failed("crash/t", Status::timed_out, "timed out"));
  Session::Outcome sweep_end = failed("good/s/n:9", Status::out_of_memory, "out of memory");
  sweep_end.counts_as_failure = false;
  sweep_end.note = "sweep good/s: knee at n=4 (out of memory at n=9)";
  t.add("good/s/n:9", sweep_end);
  t.add("good/s/n:10", not_run("the sweep of n ended (out of memory at n=9)"));
  t.add("good/s/n:11", not_run("the sweep of n ended (out of memory at n=9)"));
  t.add_cannot_run({{"micro/add/n:1", "needs a CUDA GPU; no NVIDIA driver is installed"},
                    {"micro/add/n:2", "needs a CUDA GPU; no NVIDIA driver is installed"},
                    {"micro/copy/n:1", "needs a CUDA GPU; no NVIDIA driver is installed"}});
  return t;
}

TEST(ConsoleSummary, CountsFailuresByKindAndNotRunByReason) {
  const RunTally t = tally_of_a_mixed_run();
  EXPECT_EQ(t.ran, 8);
  EXPECT_EQ(t.passed, 2);
  EXPECT_EQ(t.failed(), 5);
  EXPECT_EQ(t.failures(), 5 + t.refused) << "the exit code's count: the refused fail the run too";
  SummarySettings s;
  s.results_path = "roofbench-results/2026-12-01T09-00-00-smoke.json";
  s.report_command = "reports/roofbench-report";
  s.why_no_gpu = "no NVIDIA driver is installed";
  s.plugins_not_loaded = 2;
  const std::string summary = closing_summary(t, s);
  EXPECT_THAT(summary, StartsWith("summary: ran 8 benchmarks: 2 passed, 5 failed (1 gate, 2 errors, 1 crashed, 1 timed out)\n"));
  EXPECT_THAT(summary, HasSubstr("  1 ran out of memory and ended a sweep (not a failure)\n"));
  EXPECT_THAT(summary, HasSubstr("  not run: 3 benchmarks of 2 cases: needs a CUDA GPU; no GPU (see above)\n"));
  EXPECT_THAT(summary, HasSubstr("  not run: 2 benchmarks of 1 case: the sweep of n ended (out of memory at n=9)\n"));
  EXPECT_THAT(summary, HasSubstr("  sweep good/s: knee at n=4 (out of memory at n=9)\n"));
  EXPECT_THAT(summary, HasSubstr("  2 plugins not loaded (reasons above)\n"));
  EXPECT_THAT(summary, HasSubstr("  results: roofbench-results/2026-12-01T09-00-00-smoke.json"));
  EXPECT_THAT(summary, EndsWith("  next: reports/roofbench-report roofbench-results/2026-12-01T09-00-00-smoke.json -o report/\n"));
  EXPECT_THAT(summary, Not(HasSubstr("no NVIDIA driver"))) << "the cause is said once, before the table";
}

TEST(ConsoleSummary, ABuildForOtherGpusIsNotRunAndFailsTheRun) {
  RunTally t;
  t.add("good/a", ran(passing("good/a", 1e-6)));
  const std::string why = "plugin scale_cuda has no code for cuda:0 (NVIDIA H200, sm_90): built for sm_80";
  for (const char* name : {"scale_cuda/scale/n:1", "scale_cuda/scale/n:2"}) {
    Session::Outcome refused = not_run(why);
    refused.counts_as_failure = true;
    t.add(name, refused);
  }
  EXPECT_EQ(t.refused, 2);
  EXPECT_EQ(t.ran, 1);
  SummarySettings s;
  const std::string summary = closing_summary(t, s);
  EXPECT_THAT(summary, HasSubstr("  2 benchmarks were not run because their plugin has no code for this GPU (listed "
                                 "below): the run fails\n"));
  EXPECT_THAT(summary, HasSubstr("  not run: 2 benchmarks of 1 case: " + why + "\n"));
}

TEST(ConsoleSummary, SaysWhenResultsWereNotKept) {
  RunTally t;
  t.add("good/a", ran(passing("good/a", 1e-6)));
  SummarySettings s;
  EXPECT_EQ(closing_summary(t, s), "summary: ran 1 benchmark: 1 passed, 0 failed\n  results: not written (--no-results)\n");
  s.results_path = "x.json";
  s.results_lost = true;
  s.report_command = "roofbench-report";
  EXPECT_THAT(closing_summary(t, s), AllOf(HasSubstr("results: could not be kept"), Not(HasSubstr("next:"))));
  s.repetitions = 5;
  EXPECT_THAT(closing_summary(t, s), StartsWith("summary: ran 1 benchmark run (5 repetitions each): "));
}

TEST(ConsoleSummary, ANoisyPassIsNamedWithItsReason) {
  RunTally t;
  Session::Outcome noisy = ran(passing("cpu/add/n:4096", 1e-6));
  noisy.result.quality_reason = "bimodal: 5 of 40 samples near 4.9 ms, the rest near 1.0 us";
  t.add("cpu/add/n:4096", noisy);
  t.add("good/a", ran(passing("good/a", 1e-6)));
  const std::string summary = closing_summary(t, SummarySettings{});
  EXPECT_THAT(summary, StartsWith("summary: ran 2 benchmarks: 2 passed, 0 failed\n"));
  EXPECT_THAT(summary, HasSubstr("  1 of the passed is NOISY: their samples do not make one number"));
  EXPECT_THAT(summary, HasSubstr("    cpu/add/n:4096: bimodal: 5 of 40 samples near 4.9 ms"));
  EXPECT_THAT(table_row("cpu/add/n:4096", noisy, kTable), EndsWith("NOISY"));
  EXPECT_THAT(noisy.result.label(true), HasSubstr(" noisy"));
}

// Ranks in several processes: the time is the slowest rank's, so a straggler is named with how far it lags.
TEST(ConsoleSummary, RanksFarApartAreNamedWithTheSlowest) {
  RunTally t;
  Session::Outcome apart = ran(passing("nccl/all_reduce/bytes:1048576", 1e-6));
  apart.result.rank_figures = {{.rank = 0, .time_median = 1.0e-3}, {.rank = 1, .time_median = 1.5e-3}};
  Session::Outcome close = ran(passing("nccl/all_reduce/bytes:2097152", 1e-6));
  close.result.rank_figures = {{.rank = 0, .time_median = 1.0e-3}, {.rank = 1, .time_median = 1.05e-3}};
  t.add("nccl/all_reduce/bytes:1048576", apart);
  t.add("nccl/all_reduce/bytes:2097152", close);
  t.add("good/a", ran(passing("good/a", 1e-6)));
  const std::string summary = closing_summary(t, SummarySettings{});
  EXPECT_THAT(summary, HasSubstr("  1 of the passed had ranks more than 10% apart (the time is the slowest rank's):\n"
                                 "    nccl/all_reduce/bytes:1048576: rank 1 is the slowest, 50% above the fastest\n"));
  EXPECT_THAT(summary, Not(HasSubstr("bytes:2097152")));
}

// Google Benchmark's side, as its runner calls a display reporter: the context, then each benchmark's
// runs (its repetitions, then their aggregates).
benchmark::BenchmarkReporter::Run gb_run(const std::string& name, bool aggregate = false) {
  benchmark::BenchmarkReporter::Run run;
  run.run_name.function_name = name;
  run.run_type = aggregate ? benchmark::BenchmarkReporter::Run::RT_Aggregate : benchmark::BenchmarkReporter::Run::RT_Iteration;
  run.aggregate_name = aggregate ? "median" : "";
  return run;
}

TEST(ConsoleReporter, PrintsThePreambleHeaderAndOneLinePerRecordedOutcome) {
  Console console(kTable, {"no GPU used: no NVIDIA driver is installed"}, 1);
  std::ostringstream out;
  auto reporter = console.make_reporter(out);
  reporter->ReportContext(benchmark::BenchmarkReporter::Context());
  console.record("good/a/n:1", ran(passing("good/a/n:1", 2e-6)));
  reporter->ReportRuns({gb_run("good/a/n:1")});
  Session::Outcome sweep = ran(passing("good/s/n:4", 3e-6));
  sweep.note = "sweep good/s: knee at n=4 (throughput stopped rising)";
  console.record("good/s/n:4", sweep);
  reporter->ReportRuns({gb_run("good/s/n:4")});
  console.record("wrong/g", failed("wrong/g", Status::gate_failed, "relative L2 error 0.01"));
  reporter->ReportRuns({gb_run("wrong/g")});

  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 7u) << out.str();
  EXPECT_EQ(lines[0], "no GPU used: no NVIDIA driver is installed");
  EXPECT_THAT(lines[1], StartsWith("host: "));
  EXPECT_EQ(lines[2], table_header(kTable));
  EXPECT_THAT(lines[3], AllOf(StartsWith("good/a/n:1 "), HasSubstr("2.000 us")));
  EXPECT_THAT(lines[4], AllOf(StartsWith("good/s/n:4 "), HasSubstr("3.000 us")));
  EXPECT_EQ(lines[5], "  sweep good/s: knee at n=4 (throughput stopped rising)");
  EXPECT_THAT(lines[6], AllOf(StartsWith("wrong/g "), HasSubstr("FAIL (gate): relative L2 error 0.01")));
  EXPECT_EQ(console.tally().ran, 3);
  EXPECT_EQ(console.tally().gate_failed, 1);
}

TEST(ConsoleReporter, RepetitionsThenOneLineForTheirAggregates) {
  Console console(kTable, {}, 2);
  std::ostringstream out;
  auto reporter = console.make_reporter(out);
  console.record("p/c", ran(passing("p/c", 1e-3)));
  console.record("p/c", ran(passing("p/c", 2e-3)));
  reporter->ReportRuns({gb_run("p/c"), gb_run("p/c")});
  reporter->ReportRuns({gb_run("p/c", true), gb_run("p/c", true), gb_run("p/c", true)});
  const std::string text = out.str();
  EXPECT_THAT(text, AllOf(HasSubstr("1.000 ms"), HasSubstr("2.000 ms"), HasSubstr("median of 2 repetitions")));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The longest names the shipped GPU suites give, and one wider than a whole line.
const std::vector<std::string> kLongNames = {
    "transformer/attention_prefill_bf16/impl:cudnn/mask:causal/heads:16x128/t:4096",
    "conv/conv_bf16/layer:conv3_3x3s2_128/pass:fwd/layout:nhwc/impl:cudnn/n:256",
    "gpt/lab_attention_bf16/version:v9/batch:512",
    "micro/matmul/n:8192/dtype:bf16",
    "p/" + std::string(70, 'x') + "/axis:" + std::string(80, 'y') + "/n:1"};

TEST(ConsoleWidth, WrapTextKeepsLinesWithinTheWidthAndBreaksLongWordsAfterASlash) {
  EXPECT_EQ(wrap_text("one two three", 9), "one two\nthree");
  EXPECT_EQ(wrap_text("name  [cpu]", 40, "  "), "  name  [cpu]") << "the spaces between words stay";
  EXPECT_EQ(wrap_text("aaaa/bbbb/cccc", 10, "", "  "), "aaaa/bbbb/\n  cccc");
  for (const std::string& name : kLongNames)
    for (const std::string& line : lines_of(wrap_text(name + " and some words after it", 40, "  ", "    ")))
      EXPECT_LE(line.size(), 40u) << line;
}

TEST(ConsoleWidth, EveryRowFitsAndTheFiguresStayUnderTheirHeadings) {
  std::size_t longest = 0;
  for (const std::string& name : kLongNames) longest = std::max(longest, name.size());
  const TableSettings table{true, name_column_width(longest)};
  const std::string header = table_header(table);
  EXPECT_LE(header.size(), kConsoleWidth);
  for (const std::string& name : kLongNames) {
    Result r = passing(name, 465e-9);
    r.graph = r.cache_resident = true;
    r.energy_note = "the energy counter of this GPU did not advance during the samples, too short a window";
    const std::string row = table_row(name, ran(r), table);
    const std::vector<std::string> lines = lines_of(row);
    for (const std::string& line : lines) EXPECT_LE(line.size(), kConsoleWidth) << row;
    EXPECT_THAT(row, HasSubstr(name.substr(0, 40))) << "the name is shown, wrapped rather than cut";
    const auto figures = std::find_if(lines.begin(), lines.end(),
                                      [](const std::string& l) { return l.find("465.0 ns") != std::string::npos; });
    ASSERT_NE(figures, lines.end()) << row;
    EXPECT_EQ(header.find("time") + 4, figures->find("465.0 ns") + 8) << row;
    const std::string failure = table_row(name, failed(name, Status::crashed, std::string(300, 'x')), table);
    for (const std::string& line : lines_of(failure)) EXPECT_LE(line.size(), kConsoleWidth) << failure;
  }
}

TEST(ConsoleWidth, RepetitionRowsAreLabelledUnderALongName) {
  const std::string name = kLongNames[0];
  Console console(TableSettings{true, name_column_width(name.size())}, {}, 2);
  std::ostringstream out;
  auto reporter = console.make_reporter(out);
  console.record(name, ran(passing(name, 1e-3)));
  console.record(name, ran(passing(name, 2e-3)));
  reporter->ReportRuns({gb_run(name), gb_run(name)});
  reporter->ReportRuns({gb_run(name, true)});
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_EQ(lines[0], name);
  EXPECT_THAT(lines[1], AllOf(StartsWith("  rep 1/2 "), HasSubstr("1.000 ms")));
  EXPECT_THAT(lines[2], AllOf(StartsWith("  rep 2/2 "), HasSubstr("2.000 ms")));
  EXPECT_THAT(lines[3], AllOf(StartsWith("  median "), HasSubstr("1.500 ms")));
  EXPECT_THAT(lines[4], HasSubstr("median of 2 repetitions")) << "what does not fit goes on a line of its own";
  for (const std::string& line : lines) EXPECT_LE(line.size(), kConsoleWidth) << line;
}

TEST(ConsoleWidth, ShortNamesCarryTheirRepetitionOnTheirOwnRow) {
  Console console(kTable, {}, 2);
  std::ostringstream out;
  auto reporter = console.make_reporter(out);
  console.record("p/c", ran(passing("p/c", 1e-3)));
  console.record("p/c", ran(passing("p/c", 2e-3)));
  reporter->ReportRuns({gb_run("p/c"), gb_run("p/c")});
  reporter->ReportRuns({gb_run("p/c", true)});
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_THAT(lines[0], StartsWith("p/c rep 1/2 "));
  EXPECT_THAT(lines[1], StartsWith("p/c rep 2/2 "));
  EXPECT_THAT(lines[2], StartsWith("p/c median "));
}

}  // namespace
}  // namespace roofbench
