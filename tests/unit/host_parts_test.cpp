// The host's parts without a process: the wire format, the ABI fingerprint, the summaries, strict JSON,
// run files, selection and the session (with a runner that returns prepared Results).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include <unistd.h>

#include "benchmark_set.hpp"
#include "device.hpp"
#include "json_writer.hpp"
#include "options.hpp"
#include "plugin_loader.hpp"
#include "results.hpp"
#include "selection.hpp"
#include "session.hpp"
#include "summaries.hpp"
#include "wire.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;

Measurement every_field_set() {
  Measurement r;
  r.name = "p/c/n:1";
  r.plugin = "p";
  r.case_name = "c";
  r.ladder = "l";
  r.sweep_axis = "n";
  r.params = Params({{"n", "1"}, {"dtype", "bf16"}});
  r.precision = Precision::bf16;
  r.device = "cuda:0,1";
  r.status = Status::timed_out;
  r.message = "m\xff";
  r.work = {.flops = 1, .bytes = 2, .bytes_read = 1.5, .items = 3, .item_name = "tokens", .rates = {{"busbw", 4}}, .read_dominated = true};
  r.case_counters = {{"loss", 5}};
  r.case_facts = {{"algorithm", "x"}};
  r.gate_checked = true;
  r.gate_error = 6;
  r.tolerance = 7;
  r.samples = {9, 10};
  r.sample_clocks_mhz = {11, 12};
  r.noise_at_fixed_clock = 13;
  r.stats = {2, 14, 15, 16, 17, 18, 19, 20, 21};
  r.warmup_iterations = 22;
  r.runs_per_sample = 23;
  r.graph = r.cold = r.cache_resident = r.hold_abandoned = true;
  r.throttled_samples = 24;
  r.samples_with_mean_clock = 25;
  r.hold_timeouts = 26;
  r.mean_clock_mhz = 27;
  r.point = {28, 29, 30, 31, 32, Bound::compute, {2.8e13, "cache"}};
  r.memory = {33, 34, 35, 36, 37};
  r.rates = {{"busbw", 38}};
  r.profile.kernels = {{"k", 39, 40}};
  r.profile.kernel_seconds_per_run = 41;
  r.profile.span_seconds_per_run = 41.5;
  r.profile.idle_seconds_per_run = 0.5;
  r.profile.error = "e";
  r.phases = {42, 43, 44, 45, 46, 47};
  r.quality_reason = "q";
  r.energy_per_run_j = 48;
  r.mean_power_w = 49;
  r.energy_window_s = 50;
  r.energy_busy_fraction = 0.51;
  r.energy_note = "n";
  r.kernel_time = {.seconds = 0.52, .samples = 53, .error = "k"};
  return r;
}

Result across_the_wire(const Result& in) {
  wire::Writer w;
  wire::put(w, in);
  wire::Reader r(w.bytes());
  Result out = wire::get_result(r);
  EXPECT_TRUE(r.at_end());
  return out;
}

// The results file's benchmarks part: equal files, equal Results (as far as the file writes them).
std::string results_file_entry(const Result& r) {
  ResultsFile file("f", {});
  file.add(r, 0, 1);
  const std::string json = file.to_json(true);
  return json.substr(json.find("\"benchmarks\""));
}

// The results entry's layout (names, nesting, order, values) for fixed Results: a passing one with every
// figure, a failed gate and a crash with the gate off. results_entry_layout.txt is what the format
// (docs/results-format.md) holds the host to: the report, compare and the history read it.
TEST(ResultsFile, AnEntrysLayoutIsPinned) {
  auto pinned = [](Status status) {
    Measurement r = every_field_set();
    r.status = status;
    r.message = "why";
    r.case_counters = {{"loss", 5}, {"noise", 5.5}};
    r.case_facts = {{"algorithm", "x"}, {"algorithm", "y"}};
    return result_of(r);
  };
  RunContext gate_on, gate_off;
  gate_off.gate = false;
  std::string entries;
  for (const auto& [status, context] : {std::pair{Status::ok, gate_on}, std::pair{Status::gate_failed, gate_on},
                                        std::pair{Status::crashed, gate_off}}) {
    ResultsFile file("f", context);
    file.add(pinned(status), 1, 2);
    const std::string json = file.to_json(true);
    entries += json.substr(json.find("\"benchmarks\""));
  }
  std::ifstream in(std::string(ROOFBENCH_TEST_UNIT_DIR) + "/results_entry_layout.txt");
  const std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(entries, expected);
}

TEST(Wire, AResultCrossesUnchanged) {
  const Result in = result_of(every_field_set());
  const Result out = across_the_wire(in);
  EXPECT_EQ(results_file_entry(in), results_file_entry(out));
  EXPECT_EQ(out.status, Status::timed_out);
  EXPECT_EQ(out.params.items(), in.params.items());
  EXPECT_EQ(out.profile.kernels.at(0).launches_per_run, 40);
  EXPECT_EQ(out.phases.total, 47);
  EXPECT_EQ(out.memory.leaked, 37);
  EXPECT_TRUE(out.work.read_dominated);
  EXPECT_EQ(out.work.bytes_read, 1.5);
  EXPECT_EQ(out.memory_roof.name, "cache");
  EXPECT_EQ(out.memory_roof.bytes_per_s, 2.8e13);
  EXPECT_EQ(out.sweep_axis, "n");
  EXPECT_EQ(out.quality_reason, "q");
  EXPECT_EQ(out.energy_note, "n");
  EXPECT_EQ(out.kernel_time.seconds, 0.52);
  EXPECT_EQ(out.kernel_time.samples, 53);
  EXPECT_EQ(out.kernel_time.error, "k");
}

TEST(Wire, TheCountersCrossUnchanged) {
  Measurement m = every_field_set();
  m.counters = sum_ranges({{"k", std::vector<double>(counter_metrics().size(), 2.0)}});
  m.counters.seconds = 54;
  m.counters.replay = "run";
  m.counters.replay_runs = 3;
  m.counters.run_replay_failure = "no kernel ran";
  const Result out = across_the_wire(result_of(m));
  EXPECT_EQ(out.counters.replay, "run");
  EXPECT_EQ(out.counters.replay_runs, 3);
  EXPECT_EQ(out.counters.run_replay_failure, "no kernel ran");
  ASSERT_EQ(out.counters.kernels.size(), 1u);
  EXPECT_EQ(out.counters.kernels[0].name, "k");
  EXPECT_EQ(out.counters.total.dram_read, 2);
  EXPECT_EQ(out.counters.total.flops_fp32, 8);  // add, multiply, and the FMA counted twice
  EXPECT_EQ(out.counters.seconds, 54);
  EXPECT_EQ(out.figure(fig::measured_bytes), 4);
  m.counters = {{}, {}, 0, "no permission"};
  EXPECT_EQ(across_the_wire(result_of(m)).counters.error, "no permission");
}

// The results file leaves a failed result's timing out (no median, roof, clocks, rates): the figures a
// passing result crosses with are compared on a passing one, which is what a clean run sends.
TEST(Wire, APassingResultsTimingCrossesUnchanged) {
  Measurement m = every_field_set();
  m.status = Status::ok;
  m.message.clear();
  const Result in = result_of(m);
  const Result out = across_the_wire(in);
  EXPECT_THAT(results_file_entry(in), HasSubstr("\"time_median\""));
  EXPECT_EQ(results_file_entry(in), results_file_entry(out));
  ASSERT_EQ(out.summaries.size(), in.summaries.size());
  for (std::size_t i = 0; i < in.summaries.size(); ++i) {
    const Summary &a = in.summaries[i], &b = out.summaries[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.value, a.value) << a.name;
    EXPECT_EQ(b.unit, a.unit) << a.name;
    EXPECT_EQ(b.description, a.description) << a.name;
    EXPECT_EQ(b.hint, a.hint) << a.name;
    EXPECT_EQ(b.from_plugin, a.from_plugin) << a.name;
    EXPECT_EQ(b.written, a.written) << a.name;
    EXPECT_EQ(b.timed, a.timed) << a.name;
  }
  EXPECT_EQ(out.figure(fig::time_median), m.stats.median);
  EXPECT_EQ(out.figure(fig::noise), m.stats.noise);
  EXPECT_EQ(out.figure(fig::flops_per_s), m.point.flops_per_s);
  EXPECT_EQ(out.figure(fig::roof_pct), 100 * m.point.roof_fraction);
  EXPECT_EQ(out.figure(fig::noise_at_fixed_clock), m.noise_at_fixed_clock);
  EXPECT_EQ(out.figure(fig::sm_clock_mhz), m.mean_clock_mhz);
  EXPECT_EQ(out.figure(fig::throttled_samples), m.throttled_samples);
  EXPECT_EQ(out.figure(fig::hold_timeouts), m.hold_timeouts);
  EXPECT_EQ(out.figure(fig::samples_with_mean_clock), m.samples_with_mean_clock);
  EXPECT_EQ(out.figure(fig::warmup_iters), m.warmup_iterations);
  EXPECT_EQ(out.figure(fig::energy_per_run), 48);
  EXPECT_EQ(out.figure(fig::power), 49);
  EXPECT_EQ(out.figure(fig::energy_window_s), 50);
  EXPECT_EQ(out.figure(fig::energy_busy_fraction), 0.51);
  EXPECT_EQ(out.bound, Bound::compute);
  EXPECT_EQ(out.attainable_flops, 31);
  EXPECT_THAT(results_file_entry(in), HasSubstr("\"energy_per_run\": 48"));
  EXPECT_THAT(results_file_entry(out), HasSubstr("\"busbw\": 38"));
}

// A Result's figures cross as a list: one the host's table does not declare crosses like the others, so
// a figure added to the table needs no change to the wire.
TEST(Wire, AnyFigureCrossesWithoutAWireChange) {
  Result in = result_of(every_field_set());
  in.summaries.push_back({"new_figure", 1.5, "J", "a figure the wire has no field for", Hint::energy, false,
                          written::results_file, true});
  const Result out = across_the_wire(in);
  ASSERT_EQ(out.summaries.size(), in.summaries.size());
  const Summary& s = out.summaries.back();
  EXPECT_EQ(s.name, "new_figure");
  EXPECT_EQ(s.value, 1.5);
  EXPECT_EQ(s.unit, "J");
  EXPECT_EQ(s.hint, Hint::energy);
  EXPECT_EQ(s.written, written::results_file);
  EXPECT_TRUE(s.timed);
  EXPECT_EQ(out.figure("new_figure"), 1.5);
}

TEST(Wire, APluginDescriptionAndOptionsCrossUnchanged) {
  Plugin p;
  p.name = "p";
  p.description = "d";
  CaseSpec c;
  c.name = "c";
  c.axes = {Axis::ints("n", {1, 2})};
  c.device = DeviceNeed::gpus(2);
  c.precision = Precision::fp8;
  c.tolerance = 0.5;
  c.sweep_axis = "n";
  c.ladder = "l";
  c.timing = {false, 3};
  c.timeout_s = 9;
  p.add(c);
  MeasureOptions o;
  o.cold = true;
  o.graph = GraphMode::off;
  o.max_time = 0.25;
  o.seed = ~0ull;
  o.profile_runs = 4;
  o.energy_seconds = 2.5;
  wire::Writer w;
  wire::put(w, p);
  wire::put(w, o);
  wire::Reader r(w.bytes());
  const Plugin q = wire::get_plugin(r);
  const MeasureOptions o2 = wire::get_measure_options(r);
  ASSERT_EQ(q.cases.size(), 1u);
  EXPECT_EQ(q.cases[0].axes[0].values, (std::vector<std::string>{"1", "2"}));
  EXPECT_TRUE(q.cases[0].device.all_selected_gpus);
  EXPECT_EQ(q.cases[0].device.count, 2);
  EXPECT_EQ(q.cases[0].precision, Precision::fp8);
  EXPECT_EQ(q.cases[0].timeout_s, 9);
  EXPECT_FALSE(q.cases[0].timing.graphable);
  EXPECT_TRUE(o2.cold);
  EXPECT_EQ(o2.graph, GraphMode::off);
  EXPECT_EQ(o2.seed, ~0ull);
  EXPECT_EQ(o2.profile_runs, 4);
  EXPECT_EQ(o2.energy_seconds, 2.5);
}

// A list whose count runs past the message (a corrupted frame) is refused as truncated, not allocated.
TEST(Wire, AListLongerThanItsMessageIsRefused) {
  wire::Writer w;
  w.str("p");
  w.str("d");
  w.u32(0xfffffff0u);  // cases
  wire::Reader r(w.bytes());
  EXPECT_THROW(wire::get_plugin(r), wire::WireError);
}

TEST(Wire, FramesArriveWholeFromPieces) {
  wire::Writer w;
  w.str("hello");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  wire::write_frame(fds[1], wire::FrameType::result, w.bytes());
  ::close(fds[1]);
  char bytes[64];
  const auto n = ::read(fds[0], bytes, sizeof bytes);
  ::close(fds[0]);
  wire::FrameBuffer buffer;
  for (ssize_t i = 0; i < n; ++i) {
    EXPECT_FALSE(buffer.next());
    buffer.append(bytes + i, 1);
  }
  const auto frame = buffer.next();
  ASSERT_TRUE(frame);
  EXPECT_EQ(frame->type, wire::FrameType::result);
  wire::Reader r(frame->payload);
  EXPECT_EQ(r.str(), "hello");
  wire::Reader truncated(std::string_view(frame->payload).substr(0, 3));
  EXPECT_THROW(truncated.str(), wire::WireError);
}

TEST(Fingerprint, OtherStringAbiIsRefusedWithOneLine) {
  const AbiFingerprint host = host_fingerprint();
  EXPECT_EQ(fingerprint_mismatch(host, host), "");
  AbiFingerprint other = host;
  other.cxx11_abi = 0;
  EXPECT_THAT(fingerprint_mismatch(other, host), HasSubstr("_GLIBCXX_USE_CXX11_ABI=0"));
  other = host;
  other.sizes[10] += 8;
  EXPECT_THAT(fingerprint_mismatch(other, host), HasSubstr("sizeof(Work)"));
  other = host;
  other.cuda_runtime_major = 0;  // not known: matches
  EXPECT_EQ(fingerprint_mismatch(other, host), "");
  other.cuda_runtime_major = 11;
  if (host.cuda_runtime_major != 0) {
    EXPECT_THAT(fingerprint_mismatch(other, host), HasSubstr("CUDA runtime 11"));
  }
}

// A result with every figure reports each host figure of the table, in its order, as the table declares it.
TEST(Summaries, TheHostsFiguresAreItsTable) {
  Measurement m = every_field_set();
  m.status = Status::ok;
  m.counters = sum_ranges({{"k", std::vector<double>(counter_metrics().size(), 52.0)}});
  m.counters.seconds = 53;
  m.rank_figures = {{.rank = 0, .time_median = 16}, {.rank = 1, .time_median = 20}};  // a run of two processes
  const Result r = result_of(m);
  std::vector<Summary> host;
  for (const auto& s : summaries_of(r))
    if (!s.from_plugin) host.push_back(s);
  ASSERT_EQ(host.size(), host_figures().size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    const HostFigure& f = host_figures()[i];
    EXPECT_EQ(host[i].name, f.name);
    EXPECT_EQ(host[i].unit, f.unit);
    EXPECT_EQ(host[i].hint, f.hint) << f.name;
    EXPECT_EQ(host[i].written, f.written) << f.name;
    EXPECT_EQ(host[i].value, f.value(m)) << f.name;
    EXPECT_TRUE(is_reserved_entry_name(f.name)) << f.name;
  }
  EXPECT_THAT(figures_markdown(), HasSubstr("| `time_median` | s | timed | results, counters, CTest | median time of one run over the kept samples |"));
}

TEST(Summaries, PluginCountersNeverTakeAHostName) {
  Measurement m = every_field_set();
  m.status = Status::ok;
  m.case_counters = {{"samples", 1}, {"noise", 2}, {"loss", 3}, {"noise", 4}};
  std::set<std::string> names;
  for (const auto& s : summaries_of(result_of(m))) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_FALSE(s.unit.empty() && !s.from_plugin) << s.name;
    if (s.name == "samples") {
      EXPECT_EQ(s.value, 2) << "the host's count";
    }
    if (s.name == "case.samples") {
      EXPECT_EQ(s.value, 1);
    }
  }
  for (const char* n : {"case.samples", "case.noise", "case.noise.2", "loss", "busbw", "tokens/s"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(Summaries, EnergyFiguresOnlyWhereMeasured) {
  Measurement r = every_field_set();
  r.status = Status::ok;
  auto names = [&] {
    std::set<std::string> out;
    for (const auto& s : summaries_of(result_of(r))) out.insert(s.name);
    return out;
  };
  EXPECT_TRUE(names().count("energy_per_run"));
  EXPECT_TRUE(names().count("power"));
  r.energy_per_run_j = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(names().count("energy_per_run"));
  EXPECT_FALSE(names().count("power"));
  r.case_counters = {{"power", 3}};  // a plugin's "power" never takes the host's name
  EXPECT_TRUE(names().count("case.power"));
}

// Code reads a host figure by its fig:: constant: each constant names a line of the table, and each line
// is named by a constant, so a misspelt name cannot compile and a figure cannot go unnamed.
TEST(Summaries, EveryFigureNameIsALineOfTheTable) {
  std::set<std::string> table;
  for (const HostFigure& f : host_figures()) table.insert(f.name);
  std::set<std::string> constants;
  for (std::string_view name : fig::all) {
    EXPECT_TRUE(table.count(std::string(name))) << name;
    constants.insert(std::string(name));
  }
  EXPECT_EQ(constants, table);
}

// The parent may fail a result after it was timed (implausible): its list keeps the timed figures, and
// what is shown is what a result that failed in the worker shows.
TEST(Summaries, AResultFailedAfterItsTimingShowsWhatAFailedOneShows) {
  Measurement m = every_field_set();
  m.status = Status::ok;
  m.case_counters = {{"busbw", 1}, {"loss", 2}};  // "busbw" is also a rate: renamed only while the rate shows
  Result failed_later = result_of(m);
  failed_later.status = Status::implausible;
  m.status = Status::implausible;
  const std::vector<Summary> a = summaries_of(failed_later), b = summaries_of(result_of(m));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].value, b[i].value) << a[i].name;
    EXPECT_EQ(a[i].description, b[i].description) << a[i].name;
  }
  EXPECT_EQ(results_file_entry(failed_later), results_file_entry(result_of(m)));
  std::set<std::string> names;
  for (const auto& s : a) names.insert(s.name);
  EXPECT_FALSE(names.count("time_median"));
  EXPECT_TRUE(names.count("busbw")) << "the counter keeps its name once the rate is not shown";
  EXPECT_EQ(failed_later.figure(fig::time_median), 16) << "the list keeps it";
}

TEST(StrictJson, BadBytesBecomeReplacementCharactersAndDuplicateKeysThrow) {
  EXPECT_EQ(json_escape("ok \xc3\xa9"), "ok \xc3\xa9");
  EXPECT_EQ(json_escape("a\xff" "b"), "a\\ufffdb");
  EXPECT_EQ(json_escape("\xc3\x28"), "\\ufffd(");
  EXPECT_EQ(json_escape("\xed\xa0\x80"), "\\ufffd\\ufffd\\ufffd");  // a surrogate
  JsonWriter j;
  j.begin_object().field("a", 1);
  EXPECT_THROW(j.field("a", 2), std::logic_error);
}

TEST(RunFiles, TwoClaimsOfOneNameGetTwoFiles) {
  const auto dir = std::filesystem::temp_directory_path() / ("roofbench-claim-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string a = claim_run_file(dir.string(), "stamp-run"), b = claim_run_file(dir.string(), "stamp-run");
  EXPECT_NE(a, b);
  EXPECT_THAT(b, HasSubstr("stamp-run-2.json"));
  EXPECT_NO_THROW(check_results_dir_writable(dir.string()));
  EXPECT_THROW(check_results_dir_writable(a + "/below-a-file"), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST(Selection, FilterReadsAsGoogleBenchmarkReadsItAndMatchesTheShownName) {
  EXPECT_TRUE(NameFilter("^p/c/").matches("p/c/n:1"));
  EXPECT_TRUE(NameFilter("n:1/").matches("p/c/n:1"));  // the suffix is part of the name
  EXPECT_FALSE(NameFilter("-^p/").matches("p/c/n:1"));
  EXPECT_TRUE(NameFilter("^p/c/n:1$").matches("p/c/n:1"));  // and the name as roofbench shows it
  EXPECT_FALSE(NameFilter("^p/c/n:1$").matches("p/c/n:10"));
  EXPECT_TRUE(NameFilter("manual_time$").matches("p/c/n:1"));
  EXPECT_FALSE(NameFilter("-n:1$").matches("p/c/n:1"));
  EXPECT_TRUE(NameFilter("").matches("x"));
  EXPECT_TRUE(NameFilter("all").matches("x"));
  EXPECT_THROW(NameFilter{"^p/("}, UsageError);
  EXPECT_THROW(NameFilter{std::string(kMaxFilterLength + 1, 'a')}, UsageError);
}

// Axis values that would make two names one are refused, and a repeated name is found.
TEST(BenchmarkNames, AmbiguousValuesAreRefused) {
  EXPECT_EQ(axis_value_problem("4096x4096x4096"), "");
  EXPECT_THAT(axis_value_problem("x/b:1"), HasSubstr("'/'"));
  EXPECT_THAT(axis_value_problem("caf\xc3\xa9"), HasSubstr("byte 0xc3"));
  EXPECT_THAT(axis_value_problem(""), HasSubstr("empty"));
  CaseSpec c;
  c.name = "c";
  std::vector<BenchmarkSpec> specs{{"p/c/n:1", "p", &c, {}}, {"p/c/n:2", "p", &c, {}}, {"p/c/n:1", "p", &c, {}}};
  EXPECT_EQ(first_duplicate_name(specs), "p/c/n:1");
}

// A runner that hands out prepared results, so the Session's bookkeeping is seen alone.
class ScriptedRunner final : public BenchmarkRunner {
 public:
  std::vector<Result> script;
  std::vector<double> timeouts;
  Result run(const RunRequest& q) override {
    timeouts.push_back(q.timeout_s);
    Result r = script.at(timeouts.size() - 1);
    r.name = q.benchmark.name;
    return r;
  }
};

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sweep_.name = "sweep";
    sweep_.sweep_axis = "n";
    sweep_.timeout_s = 3;
    plain_.name = "plain";
    for (const char* n : {"1", "2", "3", "4"}) {
      Params p(std::vector<std::pair<std::string, std::string>>{{"n", n}});
      selection_.benchmarks.push_back({benchmark_name("p", "sweep", p), "p", &sweep_, p});
      selection_.ranks.push_back({nullptr});
    }
    selection_.benchmarks.push_back({"p/plain", "p", &plain_, {}});
    selection_.ranks.push_back({nullptr});
  }
  Result passing(double items_per_s) {
    Measurement r;
    r.work.items = items_per_s;
    r.work.item_name = "items";
    r.stats.median = 1;
    return result_of(r);
  }
  CaseSpec sweep_, plain_;
  Selection selection_;
  ScriptedRunner runner_;
  int ceilings_measured_ = 0;
};

TEST_F(SessionTest, SweepsEndFailuresCountAndCeilingsAreMeasuredOnce) {
  Result crashed;
  crashed.status = Status::crashed;
  runner_.script = {passing(100), passing(101), passing(102), crashed};
  SessionSettings settings;
  settings.default_timeout_s = 7;
  Session session(selection_, runner_, [&] { ++ceilings_measured_; return CachedCeilings{}; }, settings);
  EXPECT_EQ(ceilings_measured_, 0) << "not before the first benchmark";
  EXPECT_TRUE(session.run(0).ran);
  EXPECT_TRUE(session.run(1).ran);
  const auto third = session.run(2);  // two points in a row under +5%: the sweep ends here
  EXPECT_TRUE(third.ran);
  EXPECT_THAT(third.note, HasSubstr("knee at n=1"));
  const auto fourth = session.run(3);
  EXPECT_FALSE(fourth.ran);
  EXPECT_THAT(fourth.not_run_reason, HasSubstr("throughput stopped rising"));
  const auto plain = session.run(4);
  EXPECT_TRUE(plain.ran);
  EXPECT_TRUE(plain.counts_as_failure);
  EXPECT_EQ(ceilings_measured_, 1);
  EXPECT_EQ(runner_.timeouts, (std::vector<double>{3, 3, 3, 7})) << "a case's timeout_s wins over the default";
  EXPECT_FALSE(session.results_path());
}

// A case's own timeout replaces the default, not the user's --timeout: --timeout 0 (none) and a longer
// --timeout for a slow machine hold for the gpt steps' 240 s too.
TEST_F(SessionTest, AGivenTimeoutBoundsCasesWithTheirOwn) {
  for (const double given : {0.0, 600.0}) {
    runner_ = ScriptedRunner{};
    runner_.script = {passing(1), passing(1)};
    SessionSettings settings;
    settings.default_timeout_s = given;
    settings.timeout_given = true;
    Session session(selection_, runner_, [] { return CachedCeilings{}; }, settings);
    session.run(0);  // the sweep case, timeout_s 3
    session.run(4);  // the plain case
    EXPECT_EQ(runner_.timeouts, (std::vector<double>{given, given})) << "--timeout " << given;
  }
}

// Both are not run; a case that applies to no device here is not a failure, a plugin built for other
// GPUs is (the run measured nothing it was asked to on the GPU it has).
TEST_F(SessionTest, ARefusedBuildIsNotRunButFailsTheRun) {
  Result does_not_apply, refused;
  does_not_apply.status = Status::not_applicable;
  does_not_apply.message = "this case applies to no device";
  refused.status = Status::refused;
  refused.message = "plugin p has no code for cuda:0 (GPU, sm_90): built for sm_80";
  runner_.script = {does_not_apply, refused};
  Session session(selection_, runner_, [] { return CachedCeilings{}; }, SessionSettings{});
  const auto first = session.run(4), second = session.run(4);
  EXPECT_FALSE(first.ran);
  EXPECT_FALSE(first.counts_as_failure);
  EXPECT_FALSE(second.ran);
  EXPECT_TRUE(second.counts_as_failure);
  EXPECT_EQ(second.not_run_reason, refused.message);
}

TEST_F(SessionTest, ResultsThatCannotBeWrittenMakeTheRunLoseThem) {
  runner_.script = {passing(1)};
  SessionSettings settings;
  settings.results_dir = "/proc/roofbench-cannot-be-here";
  Session session(selection_, runner_, [] { return CachedCeilings{}; }, settings);
  session.run(4);
  EXPECT_TRUE(session.results_lost());
}


// latest.json is replaced by a rename, as the run's own file is: a reader (roofbench-compare on
// latest.json, a second run in the same folder) never sees it half written. A link to the old one keeps
// the old contents; a copy over it in place would change them under the reader.
TEST_F(SessionTest, LatestIsReplacedWholeNotRewrittenInPlace) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("roofbench-latest-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  runner_.script = {passing(1), passing(2)};
  SessionSettings settings;
  settings.results_dir = dir.string();
  Session session(selection_, runner_, [] { return CachedCeilings{}; }, settings);
  session.run(4);
  const fs::path latest = dir / "latest.json", held = dir / "held-by-a-reader.json";
  ASSERT_TRUE(fs::exists(latest));
  fs::create_hard_link(latest, held);
  const auto size_before = fs::file_size(held);
  session.run(4);
  EXPECT_EQ(fs::file_size(held), size_before) << "latest.json was rewritten in place";
  EXPECT_NE(fs::file_size(latest), size_before);
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().extension(), ".json") << "left behind: " << entry.path();
  fs::remove_all(dir);
}

// A cache folder as the kernel lays it out under /sys/devices/system/cpu/cpu0/cache.
void write_cache_index(const std::filesystem::path& dir, int index, const std::string& level, const std::string& type,
                       const std::string& size) {
  const auto folder = dir / ("index" + std::to_string(index));
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "level") << level << "\n";
  std::ofstream(folder / "type") << type << "\n";
  std::ofstream(folder / "size") << size << "\n";
}

TEST(CpuCache, TheLastLevelIsTheHighestDataOrUnifiedCacheTheKernelLists) {
  const auto dir = std::filesystem::temp_directory_path() / ("roofbench-cache-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  write_cache_index(dir, 0, "1", "Data", "48K");
  write_cache_index(dir, 1, "1", "Instruction", "32K");
  write_cache_index(dir, 2, "2", "Unified", "2048K");
  write_cache_index(dir, 3, "3", "Unified", "32768K");  // lscpu's 32 MiB, where sysconf may say 320 MiB
  const CacheLevel l3 = last_level_cache(dir.string());
  EXPECT_EQ(l3.level, 3);
  EXPECT_EQ(l3.bytes, 32ull << 20);
  std::filesystem::remove_all(dir / "index3");
  EXPECT_EQ(last_level_cache(dir.string()).level, 2) << "a CPU whose last level is its L2 says so";
  write_cache_index(dir, 4, "4", "Instruction", "64M");
  EXPECT_EQ(last_level_cache(dir.string()).bytes, 2ull << 20) << "an instruction cache holds no data";
  std::filesystem::remove_all(dir);
  EXPECT_EQ(last_level_cache(dir.string()).level, 0) << "no topology: unknown, not a guess";
}

TEST(CpuCache, SizesAsTheKernelWritesThem) {
  EXPECT_EQ(cache_size_bytes("32768K"), 32ull << 20);
  EXPECT_EQ(cache_size_bytes("36M"), 36ull << 20);
  EXPECT_EQ(cache_size_bytes("512"), 512u);
  EXPECT_EQ(cache_size_bytes("12 KB"), 0u);
  EXPECT_EQ(cache_size_bytes(""), 0u);
}

}  // namespace
}  // namespace roofbench
