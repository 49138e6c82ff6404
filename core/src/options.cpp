#include "options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "console.hpp"
#include "energy.hpp"
#include "roofbench/case_support/algorithm_choice.hpp"

namespace roofbench {

void apply_suite_sampling(Options& o, std::optional<double> max_time, std::optional<double> energy_seconds) {
  if (max_time && !o.max_time_given) o.measure.max_time = *max_time;
  if (energy_seconds && !o.energy_given) o.measure.energy_seconds = *energy_seconds;
}

double default_timeout_seconds(const MeasureOptions& m) {
  return 60 + 4 * longest_sampling_seconds(m) + m.warmup_max;
}

namespace {

constexpr int kDefaultProfileRuns = 3;

double parse_number(const std::string& flag, const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used != text.size() || !(v >= 0) || !std::isfinite(v)) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    throw UsageError(flag + " needs a finite non-negative number, got '" + text + "'");
  }
}

// "0.01", "5", "0.05": a default as a person writes it.
std::string number_text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

// One function per option: what its value means. `value` is empty for a flag that takes none (or an
// optional value not given).
using Value = std::optional<std::string>;

void set_help(Options& o, const std::string&, const Value&) { o.help = true; }
void set_help_markdown(Options& o, const std::string&, const Value&) { o.help_markdown = true; }
void set_list(Options& o, const std::string&, const Value&) { o.list = true; }
void set_recalibrate(Options& o, const std::string&, const Value&) { o.recalibrate = true; }
void set_cold(Options& o, const std::string&, const Value&) { o.measure.cold = true; }
void set_counters(Options& o, const std::string& flag, const Value& v) {
  o.measure.counters = true;
  if (!v) return;
  const std::optional<CounterReplay> replay = counter_replay_from(*v);
  if (!replay) throw UsageError(flag + " takes auto, kernel or run, got '" + *v + "'");
  o.measure.counter_replay = *replay;
}
void set_no_results(Options& o, const std::string&, const Value&) { o.write_results = false; }
void set_suite(Options& o, const std::string&, const Value& v) { o.suite = *v; }
void set_suite_dir(Options& o, const std::string&, const Value& v) { o.suite_dirs.push_back(*v); }
void set_results_dir(Options& o, const std::string&, const Value& v) { o.results_dir = *v; }
void set_timeout(Options& o, const std::string& flag, const Value& v) { o.timeout_s = parse_number(flag, *v); }
void set_rendezvous_timeout(Options& o, const std::string& flag, const Value& v) {
  o.rendezvous_timeout_s = parse_number(flag, *v);
  if (!(o.rendezvous_timeout_s > 0)) throw UsageError(flag + " needs seconds above 0, got '" + *v + "'");
}
void set_noise(Options& o, const std::string& flag, const Value& v) { o.measure.noise_bound = parse_number(flag, *v); }

void set_max_time(Options& o, const std::string& flag, const Value& v) {
  o.measure.max_time = parse_number(flag, *v);
  o.max_time_given = true;
}

void set_min_time(Options& o, const std::string& flag, const Value& v) {
  o.measure.min_time = parse_number(flag, *v);
  o.min_time_given = true;
}

// --profile=N and --kernel-time=N: a whole number of samples from 1 to 1000, checked before it becomes an
// int; `fallback` when the flag has no value.
int sample_count(const std::string& flag, const Value& v, int fallback, const char* counted) {
  if (!v) return fallback;
  const double n = parse_number(flag, *v);
  if (n < 1 || n > 1000 || n != std::floor(n))
    throw UsageError(flag + " needs a whole number of " + counted + " from 1 to 1000, got '" + *v + "'");
  return static_cast<int>(n);
}

void set_profile(Options& o, const std::string& flag, const Value& v) {
  o.measure.profile_runs = sample_count(flag, v, kDefaultProfileRuns, "runs");
}

void set_kernel_time(Options& o, const std::string& flag, const Value& v) {
  o.measure.kernel_time_samples = sample_count(flag, v, kDefaultKernelTimeSamples, "samples");
}

void set_energy(Options& o, const std::string& flag, const Value& v) {
  o.measure.energy_seconds = v ? parse_number(flag, *v) : kEnergyLeastSeconds;
  o.energy_given = true;
  if (!std::isfinite(o.measure.energy_seconds) ||
      (o.measure.energy_seconds != 0 && o.measure.energy_seconds < kEnergyLeastSeconds))
    throw UsageError("--energy needs at least 1 s of samples, and a finite number (0: off)");
}

// A GPU index as --device and --gpus take it: digits, few enough to be an int.
bool is_gpu_index(const std::string& text) {
  return !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
}

void set_device(Options& o, const std::string&, const Value& v) {
  const std::string& d = *v;
  const bool cuda_digits = d.starts_with("cuda:") && d.size() > 5 && d.find_first_not_of("0123456789", 5) == std::string::npos;
  if (cuda_digits && !is_gpu_index(d.substr(5))) throw UsageError("--device " + d + ": no GPU has an index that large");
  if (d != "cpu" && !cuda_digits) throw UsageError("--device must be cpu or cuda:N, got '" + d + "'");
  o.device = d;
}

void set_gpus(Options& o, const std::string&, const Value& v) {
  const std::string& g = *v;
  if (g.empty()) throw UsageError("--gpus needs 'all' or a list like 0,1");
  if (g == "all") return;
  std::vector<int> list;
  std::stringstream in(g);
  for (std::string item; std::getline(in, item, ',');) {
    if (!is_gpu_index(item)) throw UsageError("--gpus must be 'all' or a list like 0,1, got '" + g + "'");
    list.push_back(std::stoi(item));
  }
  o.gpus = list;
}

void set_plugin_dir(Options& o, const std::string&, const Value& v) {
  std::error_code ec;
  if (!std::filesystem::is_directory(*v, ec)) throw UsageError("--plugin-dir: no such folder '" + *v + "'");
  o.plugin_dirs.push_back(*v);
}

void set_isolation(Options& o, const std::string&, const Value& v) {
  if (*v == "process") o.isolation = Isolation::process;
  else if (*v == "none") o.isolation = Isolation::none;
  else throw UsageError("--isolation must be process or none, got '" + *v + "'");
}

void set_gate(Options& o, const std::string&, const Value& v) {
  if (*v != "on" && *v != "off") throw UsageError("--gate must be on or off, got '" + *v + "'");
  o.measure.gate = *v == "on";
}

void set_graph(Options& o, const std::string&, const Value& v) {
  if (*v == "auto") o.measure.graph = GraphMode::automatic;
  else if (*v == "on") o.measure.graph = GraphMode::on;
  else if (*v == "off") o.measure.graph = GraphMode::off;
  else throw UsageError("--graph must be auto, on or off, got '" + *v + "'");
}

void set_runs_per_sample(Options& o, const std::string& flag, const Value& v) {
  const double n = parse_number(flag, *v);
  if (n < 1 || n > 100000 || n != static_cast<int>(n))
    throw UsageError("--runs-per-sample needs a whole number from 1 to 100000");
  o.measure.runs_per_sample = static_cast<int>(n);
}

// What runs, and where.
std::vector<OptionSpec> selection_options() {
  using enum Takes;
  return {
      {"--list", "", nothing, "", "plugins, cases, axes, suites and devices found; runs nothing", set_list},
      {"--suite", "NAME|FILE", value, "smoke unless --benchmark_filter is given", "run a suite (suites/NAME.suite)",
       set_suite},
      {"--suite-dir", "DIR", value, "", "also look for suites in DIR (repeatable)", set_suite_dir},
      {"--device", "cpu|cuda:N", value, "the first GPU, else the CPU", "the device single-device cases run on",
       set_device},
      {"--gpus", "all|I,J,...", value, "all", "the GPUs multi-GPU cases use", set_gpus},
      {"--plugin-dir", "DIR", value, "", "also load plugins from DIR (repeatable; also ROOFBENCH_PLUGIN_PATH)",
       set_plugin_dir},
      {"--gate", "on|off", value, "on", "correctness gates (off is said in every label)", set_gate},
  };
}

// How each benchmark is timed.
std::vector<OptionSpec> measurement_options(const MeasureOptions& m) {
  using enum Takes;
  return {
      {"--cold", "", nothing, "hot",
       "time every run with its data in main memory: over copies of the inputs that together exceed twice the "
       "L2, for cases that offer them, else by a cache flush before every sample (fact cold_mode)",
       set_cold},
      {"--graph", "auto|on|off", value, "auto", "CUDA-graph timing for graphable cases (auto: runs under 20 us)",
       set_graph},
      {"--noise", "X", value, number_text(m.noise_bound), "stop sampling once stdev/mean < X", set_noise},
      {"--max-time", "S", value, number_text(m.max_time), "at most S seconds of sampling per benchmark", set_max_time},
      {"--min-time", "S", value, number_text(m.min_time), "at least S seconds of sampling per benchmark (at most --max-time)",
       set_min_time},
      {"--runs-per-sample", "N", value, "enough for 2 ms, 1 ms in a graph",
       "runs in each timed sample; with --graph on, the launches each replayed graph holds", set_runs_per_sample},
  };
}

// Passes and observers beside the timed samples.
std::vector<OptionSpec> pass_options() {
  using enum Takes;
  return {
      {"--profile", "[=N]", optional_inline_value, number_text(kDefaultProfileRuns),
       "after timing each GPU case, a CUPTI pass over N samples' worth of launches, through the same launch path "
       "(a graph stays a graph): time per kernel, torn down before the next case is timed",
       set_profile},
      {"--kernel-time", "[=N]", optional_inline_value, number_text(kDefaultKernelTimeSamples),
       "after timing each GPU case, a CUPTI trace of N samples like the timed ones, through the same launch path: "
       "kernel_time (the union of the kernels' own intervals per run, median over the samples) beside the event "
       "time, and event_minus_kernel. Where CUPTI cannot trace, the case keeps its timing and says why",
       set_kernel_time},
      {"--counters", "[=MODE]", optional_inline_value, "off; auto when given",
       "after timing each single-GPU case, a pass that reads the hardware's counters (CUPTI's Range Profiler): DRAM "
       "and L2 bytes and the FLOPs executed by one run from clean caches, beside the modelled ones (measured_bytes, "
       "measured_flops, measured_ai and their ratios), torn down before the next case is timed. MODE, how every "
       "counter is read: run (the run repeated once per pass, each after the clean), kernel (each kernel replayed, "
       "its memory restored: DRAM bytes not a clean run's) or auto (run, each kernel replayed where run replay fails)",
       set_counters},
      {"--energy", "[=S]", optional_inline_value, number_text(kEnergyLeastSeconds) + ", the least",
       "where the device has an energy counter (NVML on a GPU), poll it beside the samples and sample for at least "
       "S seconds: energy_per_run (J) and power (W) over a window of the samples; at the power limit, energy per "
       "run is what sets the time. Not with --cold. --energy=0: off, whatever the suite says",
       set_energy},
  };
}

// The run itself: ceilings, isolation, results, help.
std::vector<OptionSpec> run_options(const Options& defaults) {
  using enum Takes;
  return {
      {"--recalibrate", "", nothing, "", "measure the device's ceilings again instead of using the cached ones",
       set_recalibrate},
      {"--isolation", "process|none", value, "process",
       "process: plugins load and run in a worker process; a benchmark that crashes or times out is recorded as "
       "crashed or timed_out and a fresh worker goes on with the next. none: everything in this process (no timeouts; "
       "refused under a launcher)",
       set_isolation},
      {"--timeout", "S", value, "60 plus 4 x --max-time",
       "seconds one benchmark may take in all, setup to teardown (a case may declare its own); 0: none. Needs "
       "process isolation",
       set_timeout},
      {"--rendezvous-timeout", "S", value, number_text(defaults.rendezvous_timeout_s),
       "under torchrun, srun or mpirun (one roofbench per GPU): seconds the ranks wait for each other at the "
       "meeting and before each benchmark, and after a benchmark beyond its timeout; a rank that ends or stops "
       "answering ends the run on every rank within it. A rank that measures its ceilings first (none cached, or "
       "--recalibrate) is waited for up to 1800 s more",
       set_rendezvous_timeout},
      {"--results-dir", "DIR", value, defaults.results_dir, "where the results JSON goes", set_results_dir},
      {"--no-results", "", nothing, "", "write no results file", set_no_results},
      {"--help", "", nothing, "", "this text (also -h)", set_help},
      {"--help-markdown", "", nothing, "", "this text as the Markdown of docs/cli.md", set_help_markdown, true},
  };
}

std::vector<OptionSpec> make_option_table() {
  const Options defaults;
  std::vector<OptionSpec> table = selection_options();
  for (auto part : {measurement_options(defaults.measure), pass_options(), run_options(defaults)})
    table.insert(table.end(), part.begin(), part.end());
  return table;
}

const OptionSpec* find_option(const std::string& flag) {
  const std::string name = flag == "-h" ? "--help" : flag;
  for (const OptionSpec& spec : option_table())
    if (spec.flag == name) return &spec;
  return nullptr;
}

constexpr const char* kSummary =
    "Runs benchmark plugins under Google Benchmark, times them on the device, places every result on the "
    "device's roofline and gates it against a reference. With no arguments it runs the default suite (smoke) "
    "on the default device (the first GPU, else the CPU).";
constexpr const char* kGoogleBenchmarkFlags =
    "Google Benchmark's flags work as documented: --benchmark_filter, --benchmark_list_tests, "
    "--benchmark_repetitions, --benchmark_out, --benchmark_out_format, ... roofbench decides how many samples "
    "each benchmark takes (--noise, --min-time, --max-time), so --benchmark_min_time has no effect.";
constexpr const char* kExitCodes =
    "Exit codes: 0 all selected benchmarks ran and passed; 1 a gate failed, a benchmark errored, crashed, timed "
    "out or reported a figure beyond the device's ceilings, a plugin failed to load, or the results could not be "
    "written (checked before anything is measured); 2 usage error (unknown or bad flag, unknown or bad suite, a "
    "filter that matches nothing or is too long, a missing plugin folder, a ROOFBENCH_ALGORITHM_CHOICE other than timed or "
    "first). See docs/errors.md.";

std::string wrapped(const std::string& text, std::size_t width, const std::string& first, const std::string& rest) {
  return wrap_text(text, width, first, rest) + "\n";
}

std::string spelled(const OptionSpec& spec) {
  if (spec.argument.empty()) return std::string(spec.flag);
  return std::string(spec.flag) + (spec.takes == Takes::optional_inline_value ? "" : " ") + std::string(spec.argument);
}

std::string help_with_default(const OptionSpec& spec) {
  return spec.help + (spec.default_text.empty() ? "" : " (default: " + spec.default_text + ")");
}

// A Markdown table cell: '|' would end it.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = make_option_table();
  return table;
}

std::string usage_text() {
  constexpr std::size_t kWidth = 110, kFlagColumn = 25;
  std::string out = "usage: roofbench [options] [--benchmark_* flags]\n\n" + wrapped(kSummary, kWidth, "", "") + "\n";
  for (const OptionSpec& spec : option_table()) {
    if (spec.hidden) continue;
    const std::string flag = "  " + spelled(spec);
    const std::string indent(kFlagColumn, ' ');
    if (flag.size() + 1 < kFlagColumn) out += wrapped(help_with_default(spec), kWidth, flag + std::string(kFlagColumn - flag.size(), ' '), indent);
    else out += flag + "\n" + wrapped(help_with_default(spec), kWidth, indent, indent);
  }
  return out + "\n" + wrapped(kGoogleBenchmarkFlags, kWidth, "", "") + "\n" + wrapped(kExitCodes, kWidth, "", "");
}

std::string usage_markdown() {
  std::string out = "# roofbench command line\n\n<!-- Generated by `roofbench --help-markdown > docs/cli.md` from the "
                    "options table the parser uses (core/src/options.cpp); a test fails when they differ. -->\n\n";
  out += "`roofbench [options] [--benchmark_* flags]`\n\n" + std::string(kSummary) + "\n\n";
  out += "| Option | Default | Meaning |\n|---|---|---|\n";
  for (const OptionSpec& spec : option_table()) {
    if (spec.hidden) continue;
    out += "| `" + cell(spelled(spec)) + "` | " + cell(spec.default_text.empty() ? "" : spec.default_text) + " | " +
           cell(spec.help) + " |\n";
  }
  return out + "\n" + kGoogleBenchmarkFlags + "\n\n" + kExitCodes + "\n";
}

Options parse_options(int argc, const char* const* argv) {
  Options o;
  o.benchmark_args.push_back(argc > 0 ? argv[0] : "roofbench");
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    Value value;
    if (flag.rfind("--benchmark_", 0) == 0 || flag.rfind("--v=", 0) == 0) {
      o.benchmark_args.push_back(flag);  // Google Benchmark parses its own flags (host.cpp reads them back)
      continue;
    }
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    const OptionSpec* spec = find_option(flag);
    if (!spec) throw UsageError("unknown flag '" + args[i] + "' (see --help)");
    if (spec->takes == Takes::nothing && value) throw UsageError(flag + " takes no value");
    if (spec->takes == Takes::value && !value) {
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
      value = args[++i];
    }
    spec->apply(o, flag, value);
  }
  // Read by the plugins' setup (case_support::first_candidate_only, docs/user-guide.md): a wrong value is the
  // command line's error, said once, not every case's (--help and --list set up no case).
  const char* choice = std::getenv(case_support::kAlgorithmChoiceVariable);
  if (!o.help && !o.help_markdown && !o.list && !case_support::algorithm_choice_is_first(choice))
    throw UsageError(std::string(case_support::kAlgorithmChoiceVariable) + " must be timed or first, got '" + choice + "'");
  return o;
}

}  // namespace roofbench
