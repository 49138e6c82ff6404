#include "options.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "energy.hpp"

namespace roofbench {

void apply_suite_sampling(Options& o, std::optional<double> max_time, std::optional<double> energy_seconds) {
  if (max_time && !o.max_time_given) o.measure.max_time = *max_time;
  if (energy_seconds && !o.energy_given) o.measure.energy_seconds = *energy_seconds;
}

std::string usage_text() {
  return R"(usage: roofbench [options] [--benchmark_* flags]

Runs benchmark plugins under Google Benchmark, times them on the device, places every result on the
device's roofline and gates it against a reference. With no arguments it runs the default suite (smoke)
on the default device (the first GPU, else the CPU).

  --list                 plugins, cases, axes, suites and devices found; runs nothing
  --suite NAME|FILE      run a suite (suites/NAME.suite); default: smoke unless --benchmark_filter is given
  --suite-dir DIR        also look for suites in DIR (repeatable)
  --device cpu|cuda:N    the device single-device cases run on
  --gpus all|I,J,...     the GPUs multi-GPU cases use (default: all)
  --plugin-dir DIR       also load plugins from DIR (repeatable; also ROOFBENCH_PLUGIN_PATH)
  --gate on|off          correctness gates (default on; off is said in every label)
  --cold                 flush the caches before every sample (default: hot)
  --graph auto|on|off    CUDA-graph timing for graphable cases (auto: runs under 20 us)
  --noise X              stop sampling once stdev/mean < X (default 0.01)
  --max-time S           at most S seconds of sampling per benchmark (default 5)
  --min-time S           at least S seconds of sampling per benchmark (default 0.05; at most --max-time)
  --runs-per-sample N    runs in each timed sample (default: enough for 2 ms, 1 ms in a graph); with
                         --graph on, the launches each replayed graph holds
  --profile[=N]          after timing each GPU case, a CUPTI pass over N samples' worth of launches
                         (default 3), through the same launch path (a graph stays a graph): time per
                         kernel, torn down before the next case is timed
  --energy[=S]           where the device has an energy counter (NVML on a GPU), poll it beside the samples
                         and sample for at least S seconds (default and least 1): energy_per_run (J) and
                         power (W) over a window of the samples; at the power limit, energy per run is
                         what sets the time. Not with --cold. --energy=0: off, whatever the suite says
  --recalibrate          measure the device's ceilings again instead of using the cached ones
  --isolation process|none
                         process (default): plugins load and run in a worker process; a benchmark that
                         crashes or times out is recorded as crashed or timed_out and a fresh worker
                         goes on with the next. none: everything in this process (no timeouts)
  --timeout S            seconds one benchmark may take in all, setup to teardown (default: 60 plus
                         4 x --max-time; a case may declare its own); 0: none. Needs process isolation
  --results-dir DIR      where the results JSON goes (default ./roofbench-results)
  --no-results           write no results file
  --help                 this text

Google Benchmark's flags work as documented: --benchmark_filter, --benchmark_list_tests,
--benchmark_repetitions, --benchmark_out, --benchmark_out_format, ... roofbench decides how many
samples each benchmark takes (--noise, --min-time, --max-time), so --benchmark_min_time has no effect.

Exit codes: 0 all selected benchmarks ran and passed; 1 a gate failed, a benchmark errored, crashed
or timed out, or the results could not be written (checked before anything is measured); 2 usage
error (unknown flag or suite, a filter that matches nothing or is too long, a missing plugin folder).
)";
}

static double parse_number(const std::string& flag, const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used != text.size() || !(v >= 0) || !std::isfinite(v)) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    throw UsageError(flag + " needs a finite non-negative number, got '" + text + "'");
  }
}

// A GPU index as --device and --gpus take it: digits, few enough to be an int.
static bool is_gpu_index(const std::string& text) {
  return !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
}

static void check_device(const std::string& d) {
  if (d == "cpu" || (d.starts_with("cuda:") && is_gpu_index(d.substr(5)))) return;
  if (d.starts_with("cuda:") && d.find_first_not_of("0123456789", 5) == std::string::npos && d.size() > 5)
    throw UsageError("--device " + d + ": no GPU has an index that large");
  throw UsageError("--device must be cpu or cuda:N, got '" + d + "'");
}

// --profile=N: a whole number of samples' worth of launches, checked before it becomes an int.
static int profile_runs(const std::string& text) {
  const double n = parse_number("--profile", text);
  if (n < 1 || n > 1000 || n != std::floor(n))
    throw UsageError("--profile needs a whole number of runs from 1 to 1000, got '" + text + "'");
  return static_cast<int>(n);
}

double default_timeout_seconds(const MeasureOptions& m) {
  return 60 + 4 * longest_sampling_seconds(m) + m.warmup_max;
}

Options parse_options(int argc, const char* const* argv) {
  Options o;
  o.benchmark_args.push_back(argc > 0 ? argv[0] : "roofbench");
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_inline_value = false;
    if (flag.rfind("--benchmark_", 0) == 0 || flag.rfind("--v=", 0) == 0) {
      o.benchmark_args.push_back(flag);  // Google Benchmark parses its own flags (host.cpp reads them back)
      continue;
    }
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline_value = true;
    }
    auto take_value = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
      return args[++i];
    };
    auto no_value = [&] {
      if (has_inline_value) throw UsageError(flag + " takes no value");
    };
    if (flag == "--help" || flag == "-h") no_value(), o.help = true;
    else if (flag == "--list") no_value(), o.list = true;
    else if (flag == "--recalibrate") no_value(), o.recalibrate = true;
    else if (flag == "--profile") {
      o.measure.profile_runs = has_inline_value ? profile_runs(value) : 3;
    }
    else if (flag == "--energy") {
      o.measure.energy_seconds = has_inline_value ? parse_number(flag, value) : kEnergyLeastSeconds;
      o.energy_given = true;
      if (!std::isfinite(o.measure.energy_seconds) ||
          (o.measure.energy_seconds != 0 && o.measure.energy_seconds < kEnergyLeastSeconds))
        throw UsageError("--energy needs at least 1 s of samples, and a finite number (0: off)");
    }
    else if (flag == "--cold") no_value(), o.measure.cold = true;
    else if (flag == "--no-results") no_value(), o.write_results = false;
    else if (flag == "--device") {
      const std::string d = take_value();
      check_device(d);
      o.device = d;
    } else if (flag == "--gpus") {
      const std::string g = take_value();
      if (g.empty()) throw UsageError("--gpus needs 'all' or a list like 0,1");
      if (g != "all") {
        std::vector<int> list;
        std::stringstream in(g);
        for (std::string item; std::getline(in, item, ',');) {
          if (!is_gpu_index(item))
            throw UsageError("--gpus must be 'all' or a list like 0,1, got '" + g + "'");
          list.push_back(std::stoi(item));
        }
        o.gpus = list;
      }
    } else if (flag == "--plugin-dir") {
      const std::string dir = take_value();
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec)) throw UsageError("--plugin-dir: no such folder '" + dir + "'");
      o.plugin_dirs.push_back(dir);
    } else if (flag == "--suite-dir") o.suite_dirs.push_back(take_value());
    else if (flag == "--suite") o.suite = take_value();
    else if (flag == "--results-dir") o.results_dir = take_value();
    else if (flag == "--isolation") {
      const std::string v = take_value();
      if (v == "process") o.isolation = Isolation::process;
      else if (v == "none") o.isolation = Isolation::none;
      else throw UsageError("--isolation must be process or none, got '" + v + "'");
    } else if (flag == "--timeout") o.timeout_s = parse_number(flag, take_value());
    else if (flag == "--gate") {
      const std::string g = take_value();
      if (g != "on" && g != "off") throw UsageError("--gate must be on or off, got '" + g + "'");
      o.measure.gate = g == "on";
    } else if (flag == "--graph") {
      const std::string g = take_value();
      if (g == "auto") o.measure.graph = GraphMode::automatic;
      else if (g == "on") o.measure.graph = GraphMode::on;
      else if (g == "off") o.measure.graph = GraphMode::off;
      else throw UsageError("--graph must be auto, on or off, got '" + g + "'");
    } else if (flag == "--noise") o.measure.noise_bound = parse_number(flag, take_value());
    else if (flag == "--max-time") o.measure.max_time = parse_number(flag, take_value()), o.max_time_given = true;
    else if (flag == "--min-time") o.measure.min_time = parse_number(flag, take_value()), o.min_time_given = true;
    else if (flag == "--runs-per-sample") {
      const double n = parse_number(flag, take_value());
      if (n < 1 || n > 100000 || n != static_cast<int>(n))
        throw UsageError("--runs-per-sample needs a whole number from 1 to 100000");
      o.measure.runs_per_sample = static_cast<int>(n);
    }
    else throw UsageError("unknown flag '" + args[i] + "' (see --help)");
  }
  return o;
}

}  // namespace roofbench
