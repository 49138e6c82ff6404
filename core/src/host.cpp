#include "host.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>
#include <set>

#include "benchmark_set.hpp"
#include "ceilings_cache.hpp"
#include "device.hpp"
#include "options.hpp"
#include "plugin_loader.hpp"
#include "results.hpp"
#include "suite.hpp"

namespace roofbench {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGoogleBenchmarkSuffix = "/iterations:1/manual_time";

// Along a sweep axis throughput is expected to rise; the sweep ends when it stops rising (two points
// in a row under +5%) or memory runs out. The knee is the first point within 10% of the best.
struct Sweep {
  std::vector<std::pair<std::string, double>> points;  // axis value, throughput
  int flat_points = 0;
  bool ended = false;
  std::string end_reason;
  static constexpr double kRise = 1.05, kKneeFraction = 0.9;

  void add(const std::string& value, double throughput) {
    const double best = points.empty() ? 0 : std::max_element(points.begin(), points.end(), [](auto& a, auto& b) {
                                                return a.second < b.second;
                                              })->second;
    points.emplace_back(value, throughput);
    flat_points = throughput > best * kRise ? 0 : flat_points + 1;
    if (flat_points >= 2) end("throughput stopped rising");
  }
  void end(std::string reason) {
    ended = true;
    end_reason = std::move(reason);
  }
  std::string knee() const {
    double best = 0;
    for (auto& p : points) best = std::max(best, p.second);
    for (auto& p : points)
      if (p.second >= kKneeFraction * best) return p.first;
    return {};
  }
};

// Not run is not an error: Google Benchmark 1.8 can say so (SkipWithMessage); 1.7 only has errors.
template <typename State>
void skip_as_not_run(State& state, const std::string& why) {
  if constexpr (requires { state.SkipWithMessage(why); })
    state.SkipWithMessage(why);
  else
    state.SkipWithError(why.c_str());
}

double sweep_throughput(const Result& r) {
  if (!r.work.item_name.empty() && r.work.items > 0) return r.work.items / r.stats.median;
  if (r.work.flops > 0) return r.point.flops_per_s;
  return r.point.bytes_per_s;
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
  void run_one(benchmark::State& state, std::size_t index);
  void report_counters(benchmark::State& state, const Result& r);
  void save_results(bool complete);

  Options options_;
  std::string executable_;
  std::unique_ptr<Device> cpu_;
  std::vector<std::unique_ptr<Device>> gpus_;
  std::string why_no_gpu_;
  LoadResult loaded_;
  std::vector<BenchmarkSpec> selected_;
  std::vector<std::vector<Device*>> ranks_of_;
  Ceilings ceilings_;
  std::unique_ptr<ResultsFile> results_;
  std::map<std::string, int> repetition_counter_;
  std::map<std::string, Sweep> sweeps_;
  int failures_ = 0;
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

// 4.27e12 -> "4.27 T"
static std::string si(double value) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (value >= 1000 && i < 5) value /= 1000, ++i;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", value, prefixes[i]);
  return buf;
}

static std::string format_ceilings(const Ceilings& c) {
  std::string s = "bandwidth " + si(c.bandwidth) + "B/s";
  for (Precision p : kAllPrecisions)
    if (c.flops_of(p) > 0) s += std::string(", ") + to_string(p) + " " + si(c.flops_of(p)) + "FLOP/s";
  return s;
}

// A device's line in --list, with its measured ceilings (cached; --recalibrate measures them now) and
// the datasheet's beside them.
void Host::print_device(Device& d, const std::string& id) {
  std::cout << "  " << id << ": " << d.info().name << "\n";
  std::optional<CachedCeilings> c = options_.recalibrate ? std::optional(ceilings_for(d))
                                                         : read_ceilings(ceilings_cache_path(d.key()));
  if (c)
    std::cout << "    measured " << c->measured_at << ": " << format_ceilings(c->ceilings) << "\n";
  else
    std::cout << "    ceilings not measured yet: the first run measures them (or --list --recalibrate)\n";
  if (auto sheet = datasheet_for(d.info().name)) std::cout << "    " << sheet->name << ": " << format_ceilings(sheet->ceilings) << "\n";
}

void Host::print_list(const std::vector<BenchmarkSpec>& all) {
  std::cout << "devices:\n";
  print_device(*cpu_, "cpu");
  for (auto& g : gpus_) print_device(*g, "cuda:" + std::to_string(g->info().index));
  if (gpus_.empty()) std::cout << "  (no GPU: " << why_no_gpu_ << ")\n";
  std::cout << "plugins:\n";
  for (const auto& p : loaded_.plugins) {
    std::cout << "  " << p.plugin.name << "  (" << p.path << ")" << (p.plugin.description.empty() ? "" : "\n    " + p.plugin.description) << "\n";
    for (const auto& c : p.plugin.cases) {
      std::size_t count = 0;
      for (const auto& b : all) count += b.spec == &c;
      std::cout << "    " << c.name << "  [" << describe_need(c.device) << ", " << to_string(c.precision) << ", " << count
                << " benchmarks" << (c.sweep_axis.empty() ? "" : ", sweeps " + c.sweep_axis) << "]";
      if (!c.description.empty()) std::cout << "  " << c.description;
      std::cout << "\n";
      for (const auto& a : c.axes) {
        std::cout << "      " << a.name << ":";
        for (const auto& v : a.values) std::cout << " " << v;
        std::cout << "\n";
      }
    }
  }
  if (!loaded_.failures.empty()) {
    std::cout << "plugins that failed to load:\n";
    for (const auto& f : loaded_.failures) std::cout << "  " << f.path << ": " << f.reason << "\n";
  }
  std::cout << "suites:";
  for (const auto& s : list_suites(suite_folders())) std::cout << " " << s;
  std::cout << "\n";
}

Device* Host::select_device() {
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

CachedCeilings Host::ceilings_for(Device& d) {
  const std::string path = ceilings_cache_path(d.key());
  if (!options_.recalibrate)
    if (auto cached = read_ceilings(path)) {
      std::cerr << "roofbench: ceilings of " << d.info().name << " from " << path << " (measured " << cached->measured_at
                << "; --recalibrate to measure again)\n";
      return *cached;
    }
  std::cerr << "roofbench: measuring the ceilings of " << d.info().name << " ...\n";
  CachedCeilings c;
  c.ceilings = d.measure_ceilings(c.how);
  c.measured_at = utc_timestamp();
  try {
    write_ceilings(path, c);
  } catch (const std::exception& e) {
    std::cerr << "roofbench: could not cache the ceilings in " << path << ": " << e.what() << "\n";
  }
  return c;
}

void Host::report_counters(benchmark::State& state, const Result& r) {
  auto& c = state.counters;
  c["FLOP/s"] = r.point.flops_per_s;
  c["B/s"] = r.point.bytes_per_s;
  c["AI"] = r.point.intensity;
  c["roof_pct"] = 100.0 * r.point.roof_fraction;
  if (!r.work.item_name.empty()) c[r.work.item_name + "/s"] = r.work.items / r.stats.median;
  for (const auto& rate : r.rates) c[rate.name] = rate.value;
  c["time_median"] = r.stats.median;
  c["noise_pct"] = 100.0 * r.stats.noise;
  c["samples"] = static_cast<double>(r.stats.count);
  c["warmup_iters"] = r.warmup_iterations;
  if (r.gate_checked) c["gate_rel_err"] = r.gate_error;
  if (r.memory.peak > 0) c["peak_mem"] = benchmark::Counter(r.memory.peak, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
  if (r.mean_clock_mhz > 0) c["sm_clock_mhz"] = r.mean_clock_mhz;
  if (!std::isnan(r.noise_at_fixed_clock)) c["noise_fixed_clock_pct"] = 100.0 * r.noise_at_fixed_clock;
  if (r.hold_timeouts > 0) c["hold_timeouts"] = r.hold_timeouts;
  for (const auto& x : r.case_counters) c[x.name] = x.value;
  for (const auto& x : r.gate_counters) c[x.name] = x.value;
}

// The kernels that take the time, most first, each with its share of the run's kernel time.
void print_profile(const std::string& name, const Result& r) {
  if (!r.profile.error.empty()) {
    std::cerr << "roofbench: profile of " << name << ": " << r.profile.error << "\n";
    return;
  }
  char line[400];
  std::snprintf(line, sizeof line, "roofbench: profile of %s: %.1f us of kernels per run (run median %.1f us)\n",
                name.c_str(), r.profile.kernel_seconds_per_run * 1e6, r.stats.median * 1e6);
  std::cerr << line;
  std::size_t shown = 0;
  for (const auto& k : r.profile.kernels) {
    if (++shown > 15) break;
    std::snprintf(line, sizeof line, "  %6.1f%%  %9.1f us  %6.1f launches  %.150s\n",
                  100 * k.seconds_per_run / r.profile.kernel_seconds_per_run, k.seconds_per_run * 1e6,
                  k.launches_per_run, k.name.c_str());
    std::cerr << line;
  }
}

void Host::save_results(bool complete) {
  if (!results_) return;
  try {
    results_->write(complete);
    const fs::path latest = fs::path(results_->path()).parent_path() / "latest.json";
    fs::copy_file(results_->path(), latest, fs::copy_options::overwrite_existing);
  } catch (const std::exception& e) {
    std::cerr << "roofbench: cannot write results: " << e.what() << "\n";
  }
}

void Host::run_one(benchmark::State& state, std::size_t index) {
  const BenchmarkSpec& b = selected_[index];
  const std::string group = sweep_group(b);
  if (!group.empty() && sweeps_[group].ended) {
    const Sweep& s = sweeps_[group];
    skip_as_not_run(state, "not run: the sweep of " + b.spec->sweep_axis + " ended (" + s.end_reason + ")");
    if (results_) results_->add_not_run({b.name, "sweep ended: " + s.end_reason});
    return;
  }
  Result r = measure(b, ranks_of_[index], ceilings_, options_.measure);
  const int repetition = repetition_counter_[b.name]++;
  if (r.status == Status::not_applicable) {
    skip_as_not_run(state, "not run: " + r.message);
    if (results_) {
      results_->add_not_run({b.name, r.message});
      save_results(false);
    }
    return;
  }

  if (!group.empty()) {
    Sweep& s = sweeps_[group];
    if (r.status == Status::out_of_memory) s.end("out of memory at " + b.spec->sweep_axis + "=" + b.params.str(b.spec->sweep_axis));
    else if (r.passed()) s.add(b.params.str(b.spec->sweep_axis), sweep_throughput(r));
    if (s.ended && !s.knee().empty()) {
      const std::string note = "sweep " + group + ": knee at " + b.spec->sweep_axis + "=" + s.knee() + " (" + s.end_reason + ")";
      std::cerr << "roofbench: " << note << "\n";
      if (results_) results_->add_note(note);
    }
  }
  // An out-of-memory point of a sweep ends the sweep, not the run.
  const bool counts_as_failure = !r.passed() && !(r.status == Status::out_of_memory && !group.empty());
  if (counts_as_failure) ++failures_;

  for (auto _ : state) state.SetIterationTime(r.passed() ? r.stats.median : 1e-9);
  if (!r.profile.kernels.empty() || !r.profile.error.empty()) print_profile(b.name, r);
  if (r.passed()) {
    report_counters(state, r);
    state.SetLabel(r.label(options_.measure.gate));
  } else {
    std::cerr << "roofbench: " << b.name << ": " << r.message << "\n";
    state.SkipWithError(r.message.c_str());
  }
  if (results_) {
    results_->add(std::move(r), repetition, options_.benchmark_repetitions);
    save_results(false);
  }
}

int Host::run() {
  if (options_.help) {
    std::cout << usage_text();
    return 0;
  }
  discover_devices();
  std::vector<std::string> folders = default_plugin_folders(executable_);
  folders.insert(folders.end(), options_.plugin_dirs.begin(), options_.plugin_dirs.end());
  loaded_ = load_plugins(find_plugin_files(folders));
  for (const auto& f : loaded_.failures) std::cerr << "roofbench: plugin " << f.path << " not loaded: " << f.reason << "\n";
  if (loaded_.plugins.empty() && !options_.help)
    std::cerr << "roofbench: no plugins found (searched:" << [&] {
      std::string s;
      for (auto& f : folders) s += " " + f;
      return s;
    }() << ")\n";

  std::optional<Suite> suite;
  std::set<std::string> plugin_names;
  for (const auto& p : loaded_.plugins) plugin_names.insert(p.plugin.name);
  if (options_.suite || (!options_.has_benchmark_filter && !options_.lists_benchmark_tests && !options_.list)) {
    suite = find_suite(options_.suite.value_or("smoke"), suite_folders());
    suite->check_plugins(plugin_names);
    if (suite->max_time && !options_.max_time_given) options_.measure.max_time = *suite->max_time;
  }

  std::vector<BenchmarkSpec> all;
  for (const auto& p : loaded_.plugins) {
    auto expanded = expand_plugin(p.plugin, suite ? suite->axes : AxisOverrides{});
    all.insert(all.end(), expanded.begin(), expanded.end());
  }
  if (options_.list) {
    print_list(all);
    return 0;
  }

  Device* device = select_device();
  std::string why_no_gpus;
  const std::vector<Device*> gpu_set = select_gpus(why_no_gpus);

  std::string filter = suite ? suite->combined_filter() : ".";
  for (const auto& a : options_.benchmark_args)
    if (a.rfind("--benchmark_filter=", 0) == 0) filter = a.substr(19);
  std::regex filter_regex;
  bool negate = !filter.empty() && filter[0] == '-';
  try {
    filter_regex = std::regex(negate ? filter.substr(1) : filter, std::regex::extended);
  } catch (const std::regex_error& e) {
    throw UsageError("bad --benchmark_filter '" + filter + "': " + e.what());
  }
  // Google Benchmark matches the filter against the name with the suffix it appends to every
  // benchmark registered with Iterations(1) and UseManualTime(); so do we.
  auto matches = [&](const std::string& name) {
    return std::regex_search(name + kGoogleBenchmarkSuffix, filter_regex) != negate;
  };

  std::vector<NotRun> not_run;
  for (const auto& b : all) {
    const DeviceNeed& need = b.spec->device;
    std::string why;
    std::vector<Device*> ranks;
    if (need.all_selected_gpus) {
      if (device->info().kind != DeviceKind::cuda) why = "needs GPUs; the run is on the CPU";
      else if (static_cast<int>(gpu_set.size()) < need.count)
        why = "needs at least " + std::to_string(need.count) + " GPUs; " + std::to_string(gpu_set.size()) + " selected";
      else ranks = gpu_set;
    } else if (need.kind != device->info().kind) {
      why = need.kind == DeviceKind::cuda ? "needs a CUDA GPU; " + (gpus_.empty() ? why_no_gpu_ : "the run is on the CPU (--device)")
                                          : "a CPU case; the run is on " + device->info().name + " (--device=cpu runs it)";
    } else {
      ranks = {device};
    }
    if (!why.empty()) {
      if (matches(b.name)) not_run.push_back({b.name, why});
      continue;
    }
    selected_.push_back(b);
    ranks_of_.push_back(std::move(ranks));
  }
  // One line per case, not per benchmark, for what cannot run here.
  std::map<std::string, std::pair<std::string, int>> not_run_by_case;
  for (const auto& n : not_run) {
    auto& entry = not_run_by_case[n.benchmark.substr(0, n.benchmark.find('/', n.benchmark.find('/') + 1))];
    entry.first = n.reason;
    ++entry.second;
  }
  for (const auto& [c, why] : not_run_by_case)
    std::cerr << "roofbench: not run: " << c << " (" << why.second << " benchmarks): " << why.first << "\n";

  const bool will_measure = !options_.lists_benchmark_tests &&
                            std::any_of(selected_.begin(), selected_.end(), [&](auto& b) { return matches(b.name); });
  RunContext context;
  context.executable = executable_;
  context.suite = suite ? suite->name : "";
  context.device_name = device->info().name;
  context.device_kind = to_string(device->info().kind);
  context.device_index = device->info().index;
  context.device_key = device->key();
  context.gate = options_.measure.gate;
  context.cold = options_.measure.cold;
  context.datasheet = datasheet_for(device->info().name);
  for (const auto& p : loaded_.plugins) {
    context.plugins.emplace_back(p.plugin.name, p.path);
    context.plugin_case_counts.push_back(p.plugin.cases.size());
  }
  context.load_failures = loaded_.failures;
  for (const auto& [c, why] : not_run_by_case) context.not_run.push_back({c, why.first});
  if (will_measure) {
    const CachedCeilings c = ceilings_for(*device);
    ceilings_ = c.ceilings;
    context.measured = c.ceilings;
    context.measured_at = c.measured_at;
    context.ceilings_how = c.how;
    if (options_.write_results) {
      std::string stamp = utc_timestamp().substr(0, 19);
      std::replace(stamp.begin(), stamp.end(), ':', '-');
      const std::string file = stamp + "-" + (suite ? suite->name : std::string("run")) + ".json";
      results_ = std::make_unique<ResultsFile>((fs::path(options_.results_dir) / file).string(), context);
    }
  }

  for (std::size_t i = 0; i < selected_.size(); ++i) {
    benchmark::RegisterBenchmark(selected_[i].name.c_str(), [this, i](benchmark::State& s) { run_one(s, i); })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond);
  }

  std::vector<std::string> gb_args = options_.benchmark_args;
  if (!options_.has_benchmark_filter) gb_args.push_back("--benchmark_filter=" + filter);
  std::vector<char*> gb_argv;
  for (auto& a : gb_args) gb_argv.push_back(a.data());
  int gb_argc = static_cast<int>(gb_argv.size());
  gb_argv.push_back(nullptr);
  benchmark::Initialize(&gb_argc, gb_argv.data());
  if (benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data())) return 2;

  const std::size_t ran = benchmark::RunSpecifiedBenchmarks();
  save_results(true);
  benchmark::ClearRegisteredBenchmarks();
  benchmark::Shutdown();

  if (ran == 0 && !options_.lists_benchmark_tests) {
    std::cerr << "roofbench: the filter '" << filter << "' matches no benchmark that can run here"
              << (not_run.empty() ? "" : " (" + std::to_string(not_run.size()) + " matching benchmarks need another device)")
              << "\n";
    return 2;
  }
  if (results_) std::cerr << "roofbench: results in " << results_->path() << "\n";
  if (failures_ > 0) {
    std::cerr << "roofbench: " << failures_ << " benchmark(s) failed their gate or errored\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_host(int argc, char** argv) {
  namespace fs = std::filesystem;
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
