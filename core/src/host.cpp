#include "host.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <signal.h>

#include "benchmark_set.hpp"
#include "ceilings_cache.hpp"
#include "console.hpp"
#include "device.hpp"
#include "options.hpp"
#include "plugin_loader.hpp"
#include "google_benchmark_flags.hpp"
#include "launcher_env.hpp"
#include "nvml_energy.hpp"
#include "rank_mode.hpp"
#include "results.hpp"
#include "selection.hpp"
#include "session.hpp"
#include "suite.hpp"
#include "summaries.hpp"
#include "text.hpp"
#include "worker.hpp"

namespace roofbench {
namespace {

namespace fs = std::filesystem;

// Not run is not an error: Google Benchmark 1.8 can say so (SkipWithMessage); 1.7 only has errors.
template <typename State>
void skip_as_not_run(State& state, const std::string& why) {
  if constexpr (requires { state.SkipWithMessage(why); })
    state.SkipWithMessage(why);
  else
    state.SkipWithError(why.c_str());
}

class Host {
 public:
  Host(Options options, std::string executable) : options_(std::move(options)), executable_(std::move(executable)) {}
  int run();

 private:
  void discover_devices();
  std::vector<std::string> suite_folders() const;
  void print_list(const std::vector<BenchmarkSpec>& all);
  void print_device(Device& d, const std::string& id);
  Device* select_device();
  std::vector<Device*> select_gpus(std::string& why_not);
  CachedCeilings ceilings_for(Device& d);
  void mark_ceilings_stale(Device& d, const std::string& reason);
  void run_one(benchmark::State& state, std::size_t index);
  void report_counters(benchmark::State& state, const Result& r);
  bool initialize_google_benchmark();
  void load_plugins_as_chosen(const std::vector<std::string>& folders);
  std::vector<std::string> console_preamble(const Device& device) const;
  void print_summary() const;
  // The steps of run(), in order.
  bool may_measure() const { return !lists_tests_ && !options_.list; }
  std::optional<int> refuse_early();
  void refuse_what_ranks_cannot_follow() const;
  void load_all_plugins();
  std::optional<Suite> choose_suite();
  std::vector<BenchmarkSpec> expand_benchmarks(const std::optional<Suite>& suite) const;
  RunContext run_context(const Device& device, const std::optional<Suite>& suite, const Selection& selection) const;
  void start_session(Device* device, const std::optional<Suite>& suite, Selection selection);
  void register_benchmarks(const Device& device, const NameFilter& filter);
  std::size_t registered_ = 0;  // benchmarks handed to Google Benchmark
  std::size_t run_benchmarks();
  int conclude(std::size_t ran, const std::string& filter_text, std::size_t cannot_run_here);
  // Rank mode (rank_mode.hpp): a launcher started one roofbench per GPU. A launcher's world of one rank takes the
  // same path, so that its figure is comparable with the same script's runs of several.
  bool rank_mode() const { return launcher_.launcher != Launcher::none; }
  bool quiet_rank() const { return rank_mode() && launcher_.rank != 0; }
  void meet_ranks(const Selection& selection, const NameFilter& filter);
  void calibrate_ranks(Device& d);
  std::optional<CachedCeilings> ceilings_;  // rank mode: this rank's, read or measured before the first line-up
  int run_as_quiet_rank(const NameFilter& filter);

  Options options_;
  std::string executable_;
  std::unique_ptr<Device> cpu_;
  std::vector<std::unique_ptr<Device>> gpus_;
  std::string why_no_gpu_;
  LoadResult loaded_;
  // What Google Benchmark read from its own flags.
  std::optional<std::string> filter_given_;
  bool lists_tests_ = false;
  int repetitions_ = 1;  // --benchmark_repetitions; below 1 refused when measuring, else taken as 1
  bool table_ = true;  // --benchmark_format=console: roofbench's table replaces Google Benchmark's console
  // Google Benchmark keeps a pointer to argv[0] (the "executable" of its context): these outlive it.
  std::vector<std::string> google_benchmark_args_;
  std::unique_ptr<Console> console_;
  std::unique_ptr<BenchmarkRunner> runner_;
  std::unique_ptr<Session> session_;
  LauncherEnv launcher_;
  std::unique_ptr<RankLink> link_;  // rank mode, once the ranks met
};

void Host::discover_devices() {
  cpu_ = make_cpu_device();
  gpus_ = make_cuda_devices(why_no_gpu_);
}

std::vector<std::string> Host::suite_folders() const {
  std::vector<std::string> folders = options_.suite_dirs;
  std::error_code ec;
  const fs::path exe_dir = fs::weakly_canonical(executable_, ec).parent_path();
  folders.push_back((exe_dir.parent_path() / "share" / "roofbench" / "suites").string());
  folders.push_back(ROOFBENCH_SOURCE_SUITES);
  return folders;
}

static std::string describe_need(const DeviceNeed& need) {
  if (need.kind == DeviceKind::cpu) return "cpu";
  if (need.all_selected_gpus) return "gpus>=" + std::to_string(need.count);
  return "gpu";
}

static std::string format_ceilings(const Ceilings& c) {
  std::string s = "bandwidth " + format_rate(c.bandwidth, "B/s");
  if (c.cache_bandwidth > 0) s += ", cache " + format_rate(c.cache_bandwidth, "B/s");
  for (Precision p : kAllPrecisions)
    if (c.flops_of(p) > 0) s += std::string(", ") + to_string(p) + " " + format_rate(c.flops_of(p), "FLOP/s");
  return s;
}

// A device's line in --list, with its measured ceilings (cached; --recalibrate measures them now) and
// the datasheet's beside them.
void Host::print_device(Device& d, const std::string& id) {
  std::cout << "  " << id << ": " << d.info().name << "\n";
  std::string why_not;
  std::optional<CachedCeilings> c = options_.recalibrate ? std::optional(ceilings_for(d))
                                                         : read_ceilings(ceilings_cache_path(d.key()), d.info().kind, &why_not);
  if (c)
    std::cout << "    measured " << c->measured_at << ": " << format_ceilings(c->ceilings) << "\n";
  else if (!why_not.empty())
    std::cout << "    cached ceilings not used (" << why_not << "): the next run measures them\n";
  else
    std::cout << "    ceilings not measured yet: the first run measures them (or --list --recalibrate)\n";
  if (auto sheet = datasheet_for(d.info().name)) std::cout << "    " << sheet->name << ": " << format_ceilings(sheet->ceilings) << "\n";
}

void Host::print_list(const std::vector<BenchmarkSpec>& all) {
  std::cout << "devices:\n";
  print_device(*cpu_, "cpu");
  for (auto& g : gpus_) print_device(*g, "cuda:" + std::to_string(g->info().index));
  // Every line within kConsoleWidth: longer ones wrap under their own indent.
  auto print_wrapped = [](const std::string& text, const std::string& indent) {
    std::cout << wrap_text(text, kConsoleWidth, indent, indent + "    ") << "\n";
  };
  if (gpus_.empty()) print_wrapped("(no GPU: " + why_no_gpu_ + ")", "  ");
  std::cout << "plugins:\n";
  for (const auto& p : loaded_.plugins) {
    print_wrapped(p.plugin.name + "  (" + p.path + ")", "  ");
    if (!p.plugin.description.empty()) print_wrapped(printable(p.plugin.description), "    ");
    for (const auto& c : p.plugin.cases) {
      std::size_t count = 0;
      for (const auto& b : all) count += b.spec == &c;
      print_wrapped(c.name + "  [" + describe_need(c.device) + ", " + to_string(c.precision) + ", " + std::to_string(count) +
                        " benchmarks" + (c.sweep_axis.empty() ? "" : ", sweeps " + c.sweep_axis) + "]" +
                        (c.description.empty() ? "" : "  " + printable(c.description)),
                    "    ");
      for (const auto& a : c.axes) {
        std::string values = a.name + ":";
        for (const auto& v : a.values) values += " " + v;
        print_wrapped(values, "      ");
      }
    }
  }
  if (!loaded_.failures.empty()) {
    std::cout << "plugins that failed to load:\n";
    for (const auto& f : loaded_.failures) print_wrapped(f.path + ": " + printable(f.reason), "  ");
  }
  std::string suites = "suites:";
  for (const auto& s : list_suites(suite_folders())) suites += " " + s;
  print_wrapped(suites, "");
}

Device* Host::select_device() {
  if (rank_mode() && options_.device && *options_.device != "cpu")
    throw UsageError("--device " + *options_.device + ": under " + std::string(launcher_name(launcher_.launcher)) +
                     " each rank uses the GPU of its local rank (--device cpu is the one choice)");
  if (rank_mode() && options_.gpus) throw UsageError("--gpus: under a launcher each rank uses the GPU of its local rank");
  if (rank_mode() && !options_.device && !gpus_.empty())
    return gpus_[gpu_of_local_rank(launcher_.local_rank, gpus_.size())].get();
  if (!options_.device) return gpus_.empty() ? cpu_.get() : gpus_.front().get();
  if (*options_.device == "cpu") return cpu_.get();
  const int index = std::stoi(options_.device->substr(5));
  for (auto& g : gpus_)
    if (g->info().index == index) return g.get();
  throw UsageError("--device " + *options_.device + ": no such GPU" + (gpus_.empty() ? " (" + why_no_gpu_ + ")" : ""));
}

std::vector<Device*> Host::select_gpus(std::string& why_not) {
  std::vector<Device*> chosen;
  if (!options_.gpus) {
    for (auto& g : gpus_) chosen.push_back(g.get());
  } else {
    for (int index : *options_.gpus) {
      auto it = std::find_if(gpus_.begin(), gpus_.end(), [&](auto& g) { return g->info().index == index; });
      if (it == gpus_.end()) throw UsageError("--gpus: no GPU " + std::to_string(index));
      chosen.push_back(it->get());
    }
  }
  if (chosen.empty()) why_not = gpus_.empty() ? why_no_gpu_ : "no GPU selected";
  return chosen;
}

// The device's ceilings in rounds until they settle (ceilings_cache.hpp). Ceilings that settle only
// loosely are kept with a note (a result that beats them marks them stale); a machine too busy even for
// that is refused, since every roof and every plausibility check would rest on figures it cannot repeat.
// 0.25 -> "25%".
static std::string percent_text(double fraction) { return std::to_string(std::lround(fraction * 100)) + "%"; }

static CachedCeilings measure_settled_ceilings(Device& d) {
  std::vector<Ceilings> rounds;
  CachedCeilings c;
  std::string unsettled;
  std::optional<Ceilings> settled;
  while (!settled && static_cast<int>(rounds.size()) < kCeilingsMaxRounds) {
    c.how.clear();
    rounds.push_back(d.measure_ceilings(c.how));
    if (const std::string problem = ceilings_problem(rounds.back(), d.info().kind); !problem.empty())
      throw std::runtime_error("the measured ceilings of " + d.info().name + " cannot be right: " + problem);
    settled = settled_ceilings(rounds, kCeilingsSettle, &unsettled);
  }
  const std::string rounds_text = std::to_string(rounds.size()) + " rounds";
  if (settled) {
    c.ceilings = *settled;
  } else {
    const auto loose = settled_ceilings(rounds, kCeilingsUsable);
    if (!loose)
      throw std::runtime_error("the ceilings of " + d.info().name + " did not settle in " + rounds_text + " (" + unsettled +
                               "): the machine is too busy to measure; run again when it is idle");
    c.ceilings = *loose;
    std::cerr << wrap_text("roofbench: the ceilings of " + d.info().name + " settled only within " +
                               percent_text(kCeilingsUsable) + " in " + rounds_text + " (" + unsettled +
                               "): the machine is busy; a result that beats them marks them stale",
                           kConsoleWidth, "", "    ")
              << "\n";
  }
  c.how.push_back("settled: each figure the best of " + rounds_text + ", matched within " +
                  percent_text(settled ? kCeilingsSettle : kCeilingsUsable) + " by another");
  c.measured_at = utc_timestamp();
  return c;
}

CachedCeilings Host::ceilings_for(Device& d) {
  const std::string path = ceilings_cache_path(d.key());
  std::string why_not;
  if (!options_.recalibrate) {
    if (auto cached = read_ceilings(path, d.info().kind, &why_not)) {
      if (!quiet_rank())  // the ranks other than 0 print only their errors
        std::cerr << wrap_text("roofbench: ceilings of " + d.info().name + " from " + path + " (measured " +
                                   cached->measured_at + "; --recalibrate to measure again)",
                               kConsoleWidth, "", "    ")
                  << "\n";
      return *cached;
    }
  }
  if (!why_not.empty())
    std::cerr << wrap_text("roofbench: the cached ceilings in " + path + " are not used: " + why_not, kConsoleWidth, "",
                           "    ")
              << "\n";
  std::cerr << "roofbench: measuring the ceilings of " << d.info().name << " ...\n";
  CachedCeilings c = measure_settled_ceilings(d);
  try {
    write_ceilings(path, c);
  } catch (const std::exception& e) {
    std::cerr << "roofbench: could not cache the ceilings (every run will measure them again): " << e.what() << "\n";
  }
  return c;
}

// A result beat the ceilings by more than its noise allows: the next run measures them again.
void Host::mark_ceilings_stale(Device& d, const std::string& reason) {
  const std::string path = ceilings_cache_path(d.key());
  try {
    roofbench::mark_ceilings_stale(path, reason);
    std::cerr << "roofbench: the ceilings in " << path << " are marked stale (a result beat them); the next run measures them again\n";
  } catch (const std::exception& e) {
    std::cerr << "roofbench: could not mark the cached ceilings stale: " << e.what() << "\n";
  }
}

// Google Benchmark's counters are the Result's summaries, under the same names as in the results file.
void Host::report_counters(benchmark::State& state, const Result& r) {
  for (const auto& s : summaries_of(r))
    if (s.written & written::counters)
      state.counters[s.name] = s.hint == Hint::bytes
                                   ? benchmark::Counter(s.value, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024)
                                   : benchmark::Counter(s.value);
}

// With the table, an outcome is printed by the console when Google Benchmark reports it; with json or
// csv on stdout, what a person needs beside it goes to stderr as it happens.
void Host::run_one(benchmark::State& state, std::size_t index) {
  const std::string& name = session_->selection().benchmarks[index].name;
  if (link_ && link_->lost()) {  // the ranks lost each other at an earlier benchmark, which failed
    Session::Outcome ended;
    ended.not_run_reason = "the run ended: the ranks lost each other";
    console_->record(name, ended);
    skip_as_not_run(state, "not run: " + ended.not_run_reason);
    return;
  }
  Session::Outcome out = session_->run(index);
  console_->record(name, out);
  if (!out.ran) {
    skip_as_not_run(state, "not run: " + out.not_run_reason);
    return;
  }
  const Result& r = out.result;
  if (!table_ && !out.note.empty()) std::cerr << "roofbench: " << out.note << "\n";
  for (auto _ : state) state.SetIterationTime(r.passed() ? r.figure(fig::time_median) : 1e-9);
  if (!table_ && (!r.profile.kernels.empty() || !r.profile.error.empty())) std::cerr << profile_text(name, r);
  if (!table_) std::cerr << kernel_time_text(name, r);
  if (!table_ && (r.counters.collected() || !r.counters.error.empty())) std::cerr << counters_text(name, r);
  if (!table_ && !r.message.empty()) std::cerr << "roofbench: " << name << ": " << r.error_message() << "\n";
  if (r.passed()) {
    report_counters(state, r);
    state.SetLabel(r.label(options_.measure.gate));
  } else {
    state.SkipWithError(r.error_message().c_str());
  }
}

// Said once before the table (or on stderr beside json and csv): why no GPU is used, the device, and what
// Google Benchmark's debug-build warning means here (it prints that warning with console and csv only).
std::vector<std::string> Host::console_preamble(const Device& device) const {
  std::vector<std::string> lines;
  if (gpus_.empty()) lines.push_back("no GPU used: " + why_no_gpu_);
  else if (device.info().kind == DeviceKind::cpu) lines.push_back("no GPU used: --device cpu");
  const DeviceInfo& info = device.info();
  lines.push_back("device: " + info.name + " (" + (info.kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(info.index)) + ")");
  if (link_)
    lines.push_back(std::to_string(link_->world_size()) + " ranks, one process each (" +
                    std::string(launcher_name(launcher_.launcher)) + "): each rank measures on its own device (this is " +
                    "rank 0's); a benchmark's time is its slowest rank's");
  if (google_benchmark_format() != "json" && google_benchmark_context().library_build_type == "debug")
    lines.push_back(debug_library_note());
  return lines;
}

// A path as a person would type it from here: relative when under the working folder.
static std::string shown_path(const fs::path& path) {
  std::error_code ec;
  const fs::path here = fs::current_path(ec);
  const fs::path relative = ec ? fs::path() : fs::absolute(path, ec).lexically_relative(here);
  if (ec || relative.empty() || *relative.begin() == "..") return path.string();
  return relative.string();
}

void Host::print_summary() const {
  SummarySettings s;
  if (auto path = session_->results_path()) s.results_path = shown_path(*path);
  s.results_lost = session_->results_lost();
  // The installed roofbench-report sits beside the executable; a build tree's is in the source tree.
  std::error_code ec;
  const fs::path installed = fs::weakly_canonical(executable_, ec).parent_path() / "roofbench-report";
  const fs::path in_source = fs::path(ROOFBENCH_SOURCE_SUITES).parent_path() / "reports" / "roofbench-report";
  if (fs::exists(installed, ec)) s.report_command = shown_path(installed);
  else if (fs::exists(in_source, ec)) s.report_command = shown_path(in_source);
  if (gpus_.empty()) s.why_no_gpu = why_no_gpu_;
  s.plugins_not_loaded = loaded_.failures.size();
  s.repetitions = repetitions_;
  (table_ ? std::cout : std::cerr) << closing_summary(console_->tally(), s) << std::flush;
}

// Google Benchmark parses its own flags; roofbench reads back what it needs (the filter, whether it
// only lists, the repetitions) instead of guessing from the flags' spelling.
bool Host::initialize_google_benchmark() {
  const std::string from_environment = benchmark::GetBenchmarkFilter();
  static const std::string kNotGiven = "\x01roofbench: no filter given";
  benchmark::SetBenchmarkFilter(kNotGiven);
  google_benchmark_args_ = options_.benchmark_args;
  std::vector<char*> argv;
  for (auto& a : google_benchmark_args_) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  argv.push_back(nullptr);
  benchmark::Initialize(&argc, argv.data());
  if (benchmark::ReportUnrecognizedArguments(argc, argv.data())) return false;
  const std::string filter = benchmark::GetBenchmarkFilter();
  if (filter != kNotGiven) filter_given_ = filter;
  else if (!from_environment.empty()) filter_given_ = from_environment;
  lists_tests_ = google_benchmark_lists_tests();
  repetitions_ = google_benchmark_repetitions();
  table_ = google_benchmark_format() == "console";
  return true;
}

void Host::load_plugins_as_chosen(const std::vector<std::string>& folders) {
  const auto files = find_plugin_files(folders);
  if (options_.isolation == Isolation::none) {
    loaded_ = load_plugins(files);
    return;
  }
  // Writing to a worker that just died must be an error to handle, not a signal that ends the run.
  ::signal(SIGPIPE, SIG_IGN);
  loaded_ = describe_plugins_in_workers(files, executable_, options_.timeout_s.value_or(default_timeout_seconds(options_.measure)));
}

// What is refused before anything loads: a --timeout without isolation (said, not refused), repetitions
// under one, a results folder that cannot be written. The exit code when refused.
std::optional<int> Host::refuse_early() {
  if (options_.isolation == Isolation::none && options_.timeout_s && *options_.timeout_s > 0)
    std::cerr << "roofbench: --timeout has no effect with --isolation=none (a benchmark cannot be stopped in this process)\n";
  // Google Benchmark itself would run nothing at 0 (a run that measured nothing, exiting 0) and throw a bare
  // std::length_error below it. A listing samples nothing, so it is not refused.
  if (repetitions_ < 1) {
    if (may_measure())
      throw UsageError("--benchmark_repetitions needs a whole number of at least 1, got " +
                       std::to_string(repetitions_));
    repetitions_ = 1;
  }
  if (may_measure() && options_.write_results) {
    try {
      check_results_dir_writable(options_.results_dir);
    } catch (const std::exception& e) {
      std::cerr << "roofbench: " << e.what() << " (nothing was measured; --results-dir DIR or --no-results)\n";
      return 1;
    }
  }
  return std::nullopt;
}

// The plugins from the default folders, ROOFBENCH_PLUGIN_PATH and --plugin-dir; what did not load is said.
void Host::load_all_plugins() {
  std::vector<std::string> folders = default_plugin_folders(executable_);
  for (const auto& entry : unusable_plugin_path_entries())
    std::cerr << "roofbench: ROOFBENCH_PLUGIN_PATH entry " << entry << "; skipped\n";
  folders.insert(folders.end(), options_.plugin_dirs.begin(), options_.plugin_dirs.end());
  load_plugins_as_chosen(folders);
  for (const auto& f : loaded_.failures)
    std::cerr << "roofbench: plugin " << f.path << " not loaded: " << printable(f.reason)
              << (is_stray_library(f) ? " (a warning: it is not a plugin)" : "") << "\n";
  if (loaded_.plugins.empty())
    std::cerr << "roofbench: no plugins found (searched:" << [&] {
      std::string s;
      for (auto& f : folders) s += " " + f;
      return s;
    }() << ")\n";
}

// --suite, or the smoke suite when nothing else says what to run; its sampling applied to the options.
std::optional<Suite> Host::choose_suite() {
  std::optional<Suite> suite;
  std::set<std::string> plugin_names;
  for (const auto& p : loaded_.plugins) plugin_names.insert(p.plugin.name);
  if (options_.suite || (!filter_given_ && !lists_tests_ && !options_.list)) {
    suite = find_suite(options_.suite.value_or("smoke"), suite_folders());
    suite->check_plugins(plugin_names);
    if (suite->selects_everything())
      std::cerr << "roofbench: suite " << suite->path << " has no filter line: it selects every benchmark of every plugin\n";
    apply_suite_sampling(options_, suite->max_time, suite->energy_seconds);
  }
  // Sampling stops at the --max-time whatever --min-time asks for: a larger one would be cut without a word.
  if (may_measure() && options_.min_time_given && options_.measure.min_time > options_.measure.max_time) {
    std::ostringstream why;
    why << "--min-time " << options_.measure.min_time << " is more than the --max-time of " << options_.measure.max_time
        << (options_.max_time_given ? "" : suite && suite->max_time ? " (the suite's)" : " (the default)")
        << ", where sampling stops";
    throw UsageError(why.str());
  }
  return suite;
}

// Every benchmark of every plugin, the suite's axis values applied; names must not collide.
std::vector<BenchmarkSpec> Host::expand_benchmarks(const std::optional<Suite>& suite) const {
  std::vector<BenchmarkSpec> all;
  for (const auto& p : loaded_.plugins) {
    auto expanded = expand_plugin(p.plugin, suite ? suite->axes : AxisOverrides{});
    for (auto& b : expanded) b.cuda_probe = p.cuda_probe;
    all.insert(all.end(), expanded.begin(), expanded.end());
  }
  if (const std::string dup = first_duplicate_name(all); !dup.empty())
    throw SuiteError("two benchmarks are named '" + dup + "' (the suite's axis values make them collide)");
  if (suite) suite->check_filters(all), suite->check_axes(all);
  return all;
}

// What the results file says about the run beside its results.
RunContext Host::run_context(const Device& device, const std::optional<Suite>& suite, const Selection& selection) const {
  RunContext context;
  context.executable = executable_;
  context.suite = suite ? suite->name : "";
  context.device_name = device.info().name;
  context.device_kind = to_string(device.info().kind);
  context.device_index = device.info().index;
  context.device_key = device.key();
  context.llc_level = device.cache_level();
  context.llc_bytes = device.cache_bytes();
  if (device.info().kind == DeviceKind::cuda) context.driver = nvml_driver_version();
  context.gate = options_.measure.gate;
  context.cold = options_.measure.cold;
  context.isolation = options_.isolation == Isolation::process ? "process" : "none";
  context.datasheet = datasheet_for(device.info().name);
  for (const auto& p : loaded_.plugins) {
    context.plugins.emplace_back(p.plugin.name, p.path);
    context.plugin_case_counts.push_back(p.plugin.cases.size());
  }
  context.load_failures = loaded_.failures;
  for (const auto& [n, count] : selection.not_run_by_case) context.not_run.push_back(n);
  if (link_) {
    context.launcher = launcher_name(launcher_.launcher);
    context.rank_hosts = link_->hosts();
  }
  return context;
}

// The runner (in this process, or in workers) and the session that runs the selection on it.
void Host::start_session(Device* device, const std::optional<Suite>& suite, Selection selection) {
  RunContext context = run_context(*device, suite, selection);
  if (options_.isolation == Isolation::none) {
    runner_ = std::make_unique<InProcessRunner>();
  } else {
    std::vector<std::string> files;
    for (const auto& p : loaded_.plugins) files.push_back(p.path);
    runner_ = std::make_unique<ProcessRunner>(executable_, std::move(files));
  }
  if (link_) runner_ = std::make_unique<RankedRunner>(std::move(runner_), *link_);
  SessionSettings settings;
  settings.measure = options_.measure;
  settings.default_timeout_s = options_.isolation == Isolation::none ? 0 : options_.timeout_s.value_or(default_timeout_seconds(options_.measure));
  settings.timeout_given = options_.timeout_s.has_value();
  if (options_.write_results) settings.results_dir = options_.results_dir;
  settings.run_name = suite ? suite->name : "run";
  settings.repetitions = repetitions_;
  settings.context = std::move(context);
  settings.ceilings_beaten = [this, device](const std::string& reason) { mark_ceilings_stale(*device, reason); };
  session_ = std::make_unique<Session>(std::move(selection), *runner_,
                                       [this, device] { return ceilings_ ? *ceilings_ : ceilings_for(*device); },
                                       std::move(settings));
}

// The console (its preamble, the benchmarks that cannot run here) and one Google Benchmark per selected one
// the filter matches. Google Benchmark's own filter is then told to take them all: it would match the names
// it extends ("/iterations:1/manual_time"), so a filter anchored with '$' at a benchmark's name would run nothing.
void Host::register_benchmarks(const Device& device, const NameFilter& filter) {
  const auto& selected = session_->selection().benchmarks;
  std::size_t longest_name = 0;
  for (const auto& b : selected)
    if (filter.matches(b.name)) longest_name = std::max(longest_name, b.name.size());
  // Repetitions are labelled "<name> rep i/n" and "<name> median" (Console::row_label).
  const std::string widest_suffix = " rep " + std::to_string(repetitions_) + "/" + std::to_string(repetitions_);
  if (repetitions_ > 1) longest_name += std::max(widest_suffix.size(), std::string(" median").size());
  const TableSettings table{options_.measure.gate, name_column_width(longest_name)};
  std::vector<std::string> preamble = console_preamble(device);
  if (!table_)
    for (const auto& line : preamble) std::cerr << "roofbench: " << line << "\n";
  console_ = std::make_unique<Console>(table, table_ ? std::move(preamble) : std::vector<std::string>{}, repetitions_);
  console_->tally().add_cannot_run(session_->selection().not_run);
  // Nanoseconds for every benchmark: Google Benchmark's compare.py prints times as whole numbers (a 465 ns
  // time in microseconds shows as "0") and compares only entries of one unit, so a unit chosen per run
  // would drop a benchmark whose time crossed a unit's boundary between two files.
  benchmark::SetBenchmarkFilter(".");
  for (std::size_t i = 0; i < selected.size(); ++i) {
    if (!filter.matches(selected[i].name)) continue;
    ++registered_;
    benchmark::RegisterBenchmark(selected[i].name.c_str(), [this, i](benchmark::State& s) { run_one(s, i); })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kNanosecond);
  }
}

// Google Benchmark runs what was registered; the session writes its results. How many ran.
std::size_t Host::run_benchmarks() {
  std::unique_ptr<benchmark::BenchmarkReporter> reporter = table_ ? console_->make_reporter(std::cout) : nullptr;
  // No reporter: Google Benchmark's own for --benchmark_format=json|csv (and --benchmark_out's, always).
  // None registered: Google Benchmark would say its match-all filter matched nothing; conclude() says why.
  const std::size_t ran = registered_ == 0 ? 0 : benchmark::RunSpecifiedBenchmarks(reporter.get());
  session_->finish();
  benchmark::ClearRegisteredBenchmarks();
  benchmark::Shutdown();
  return ran;
}

// The summary and the exit code: 2 when the filter matched nothing that could run, 1 on any failure.
int Host::conclude(std::size_t ran, const std::string& filter_text, std::size_t cannot_run_here) {
  // A plugin that did not load may hold benchmarks the selection asked for: the run cannot claim it ran them.
  const std::size_t plugins_failed = failures_of_the_run(loaded_.failures);
  const std::string plugins_failed_text = plugins_failed == 0 ? "" : std::to_string(plugins_failed) +
      (plugins_failed == 1 ? " plugin" : " plugins") + " could not be loaded (see above)";
  if (ran == 0 && !lists_tests_) {
    std::cerr << "roofbench: the filter '" << excerpt(filter_text) << "' matches no benchmark that can run here"
              << (cannot_run_here == 0 ? "" : " (" + std::to_string(cannot_run_here) + " matching benchmarks need another device)")
              << (plugins_failed == 0 ? "" : "; " + plugins_failed_text + ", which may hold them") << "\n";
    return plugins_failed > 0 ? 1 : 2;
  }
  if (lists_tests_) return 0;
  print_summary();
  if (plugins_failed > 0) std::cerr << "roofbench: the run fails: " << plugins_failed_text << "\n";
  return session_->results_lost() || console_->tally().failures() > 0 || plugins_failed > 0 ? 1 : 0;
}

// The ranks meet at the rendezvous and check that each selected the same benchmarks in the same order.
void Host::meet_ranks(const Selection& selection, const NameFilter& filter) {
  std::string names = "repetitions " + std::to_string(repetitions_) + "\n";
  for (const auto& b : selection.benchmarks)
    if (filter.matches(b.name)) names += b.name + "\n";
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(options_.rendezvous_timeout_s * 1000));
  link_ = std::make_unique<RankLink>(launcher_, timeout);
  link_->check_same_selection(names);
}

// Every rank reads or measures its ceilings before the first line-up; the others wait for one that measures
// (RankLink::calibrate).
void Host::calibrate_ranks(Device& d) {
  const bool measures = options_.recalibrate || !read_ceilings(ceilings_cache_path(d.key()), d.info().kind);
  link_->calibrate(measures, [&] { ceilings_ = ceilings_for(d); });
}

// A rank other than 0 runs what rank 0's Google Benchmark runs, in its order (each benchmark's repetitions
// together), and prints nothing but its errors. Its exit code is rank 0's (every rank has the same combined
// results): 2 when nothing was selected, 1 when a benchmark failed or a plugin did not load.
int Host::run_as_quiet_rank(const NameFilter& filter) {
  bool failed = failures_of_the_run(loaded_.failures) > 0, ran = false;
  for (std::size_t i = 0; i < session_->selection().benchmarks.size() && !link_->lost(); ++i) {
    if (!filter.matches(session_->selection().benchmarks[i].name)) continue;
    ran = true;
    for (int repetition = 0; repetition < repetitions_ && !link_->lost(); ++repetition)
      failed = session_->run(i).counts_as_failure || failed;
  }
  session_->finish();
  if (!ran && !failed) return 2;
  return failed || link_->lost() ? 1 : 0;
}

// The other ranks follow rank 0's Google Benchmark, each benchmark once, in the selection's order
// (run_as_quiet_rank). Shuffled, rank 0 would line up at another benchmark and the run would end out of step
// at once. With a warm-up of its own, Google Benchmark calls a benchmark's function again and again until
// the reported times add up to that many seconds (benchmark_runner.cc, RunWarmUp, 1.7 and 1.8, even with
// Iterations(1)): rank 0 would measure the benchmark several times and line up alone. roofbench warms every
// benchmark up itself, so that flag is refused rather than followed. Without a worker (--isolation=none) a
// rank that waits in a collective for a failed rank could not be stopped short of ending its process (and the
// run): it would wait for ever, so that is refused too.
void Host::refuse_what_ranks_cannot_follow() const {
  const std::string under = "under " + std::string(launcher_name(launcher_.launcher));
  if (options_.isolation == Isolation::none)
    throw UsageError("--isolation=none: " + under + " each rank measures in a worker process, so that a rank left "
                     "waiting for a failed one can be stopped");
  if (google_benchmark_interleaves())
    throw UsageError("--benchmark_enable_random_interleaving: " + under + " every rank runs the benchmarks in one order");
  if (google_benchmark_min_warmup_time() > 0)
    throw UsageError("--benchmark_min_warmup_time: " + under + " every rank runs each benchmark once (roofbench "
                     "warms each one up itself)");
}

int Host::run() {
  if (options_.help || options_.help_markdown) {
    std::cout << (options_.help_markdown ? usage_markdown() : usage_text());
    return 0;
  }
  if (!initialize_google_benchmark()) return 2;
  launcher_ = detect_launcher(process_environment());
  // Only rank 0 prints what the run lists and keeps results; the others print only their errors.
  if (quiet_rank() && (options_.list || lists_tests_)) return 0;
  if (quiet_rank()) options_.write_results = false;
  if (rank_mode() && may_measure()) refuse_what_ranks_cannot_follow();
  if (const std::optional<int> refused = refuse_early()) return *refused;
  discover_devices();
  load_all_plugins();
  const std::optional<Suite> suite = choose_suite();
  const std::vector<BenchmarkSpec> all = expand_benchmarks(suite);
  if (options_.list) {
    print_list(all);
    return 0;
  }
  Device* device = select_device();
  std::string why_no_gpus;
  const DeviceChoice choice{device, select_gpus(why_no_gpus), !gpus_.empty(), why_no_gpu_, launcher_.world_size};
  const std::string filter_text = filter_given_ ? *filter_given_ : suite ? suite->combined_filter() : ".";
  const NameFilter filter(filter_text);
  // What cannot run here is said in the summary, one line per reason.
  Selection selection = select_benchmarks(all, choice, filter);
  const std::size_t cannot_run_here = selection.not_run.size();
  if (rank_mode() && may_measure()) meet_ranks(selection, filter);
  const auto runs_here = [&](const BenchmarkSpec& b) { return filter.matches(b.name); };
  if (link_ && std::any_of(selection.benchmarks.begin(), selection.benchmarks.end(), runs_here)) calibrate_ranks(*device);
  start_session(device, suite, std::move(selection));
  if (link_ && quiet_rank()) return run_as_quiet_rank(filter);
  register_benchmarks(*device, filter);
  return conclude(run_benchmarks(), filter_text, cannot_run_here);
}

}  // namespace

int run_host(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc >= 2 && std::string(argv[1]) == kWorkerFlag) return worker_main(argc, argv);
  // Under a launcher, the lines of ranks other than 0 say whose they are (to its end: the errors below too).
  const std::unique_ptr<StderrPrefix> prefix = prefix_stderr_of_other_ranks(process_environment());
  try {
    Options options = parse_options(argc, argv);
    std::error_code ec;
    std::string executable = fs::read_symlink("/proc/self/exe", ec).string();  // argv[0] may be a bare name
    if (ec || executable.empty()) executable = argc > 0 ? argv[0] : "roofbench";
    Host host(std::move(options), executable);
    return host.run();
  } catch (const UsageError& e) {
    std::cerr << "roofbench: " << e.what() << "\n";
    return 2;
  } catch (const SuiteError& e) {
    std::cerr << "roofbench: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "roofbench: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace roofbench
