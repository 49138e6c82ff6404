#include "results.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include "google_benchmark_flags.hpp"
#include "json_writer.hpp"
#include "roofbench_commit.hpp"
#include "summaries.hpp"

namespace roofbench {

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
  return buf;
}

void check_results_dir_writable(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create the results folder " + dir + ": " + ec.message());
  std::string probe = (fs::path(dir) / ".roofbench-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) throw std::runtime_error("cannot write in the results folder " + dir + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string claim_run_file(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  for (int n = 1;; ++n) {
    const std::string path = (fs::path(dir) / (stem + (n > 1 ? "-" + std::to_string(n) : "") + ".json")).string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      return path;
    }
    if (errno != EEXIST) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  }
}

void ResultsFile::add(Result r, int repetition_index, int repetitions) {
  results_.push_back(std::move(r));
  repetitions_.emplace_back(repetition_index, repetitions);
}

// Per-sample arrays keep at most this many values, evenly spaced over the run.
constexpr std::size_t kSamplesKept = 2000;

static void write_ceilings(JsonWriter& j, const Ceilings& c) {
  j.field("bandwidth_Bps", c.bandwidth);
  if (c.read_bandwidth > 0) j.field("read_bandwidth_Bps", c.read_bandwidth);
  if (c.cache_bandwidth > 0) j.field("cache_bandwidth_Bps", c.cache_bandwidth);
  j.key("flops").begin_object();
  for (Precision p : kAllPrecisions)
    if (c.flops_of(p) > 0) j.field(to_string(p), c.flops_of(p));
  j.end_object();
}

namespace {

void write_device(JsonWriter& j, const RunContext& c) {
  j.key("device").begin_object();
  j.field("kind", c.device_kind).field("index", c.device_index);
  j.field("name", c.device_name).field("key", c.device_key);
  if (c.llc_level > 0) j.field("llc_level", c.llc_level).field("llc_bytes", c.llc_bytes);
  if (!c.driver.empty()) j.field("driver", c.driver);
  j.end_object();
}

void write_run_ceilings(JsonWriter& j, const RunContext& c) {
  j.key("ceilings").begin_object();
  j.key("measured").begin_object();
  write_ceilings(j, c.measured);
  j.field("measured_at", c.measured_at);
  j.key("how").begin_array();
  for (const auto& h : c.ceilings_how) j.value(h);
  j.end_array();
  j.end_object();
  if (c.datasheet) {
    j.key("datasheet").begin_object();
    j.field("name", c.datasheet->name);
    write_ceilings(j, c.datasheet->ceilings);
    j.end_object();
  } else {
    j.key("datasheet").null();
  }
  j.end_object();
}

// The run's lists: plugins, load failures, what was not run, notes.
void write_run_lists(JsonWriter& j, const RunContext& c) {
  j.key("plugins").begin_array();
  for (std::size_t i = 0; i < c.plugins.size(); ++i) {
    j.begin_object().field("name", c.plugins[i].first).field("path", c.plugins[i].second);
    j.field("cases", static_cast<std::int64_t>(c.plugin_case_counts[i])).end_object();
  }
  j.end_array();
  j.key("load_failures").begin_array();
  for (const auto& f : c.load_failures) j.begin_object().field("path", f.path).field("reason", f.reason).end_object();
  j.end_array();
  j.key("not_run").begin_array();
  for (const auto& n : c.not_run) j.begin_object().field("case", n.benchmark).field("reason", n.reason).end_object();
  j.end_array();
  j.key("notes").begin_array();
  for (const auto& n : c.notes) j.value(n);
  j.end_array();
}

// Under a launcher: the world's ranks and their hosts (absent from a run of one process).
void write_run_ranks(JsonWriter& j, const RunContext& c) {
  if (c.rank_hosts.empty()) return;
  j.key("ranks").begin_object();
  j.field("launcher", c.launcher).field("world_size", static_cast<std::int64_t>(c.rank_hosts.size()));
  j.key("hosts").begin_array();
  for (const auto& h : c.rank_hosts) j.value(h);
  j.end_array();
  j.end_object();
}

void write_context(JsonWriter& j, const RunContext& c, bool complete) {
  j.key("context").begin_object();
  j.field("date", utc_timestamp());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  j.field("host_name", std::string(host));
  j.field("executable", c.executable);
  static const GoogleBenchmarkContext library = google_benchmark_context();
  j.field("num_cpus", library.num_cpus);
  j.field("mhz_per_cpu", library.mhz_per_cpu);
  j.field("library_build_type", library.library_build_type);
  j.key("roofbench").begin_object();
  j.field("version", ROOFBENCH_VERSION);
  if (*ROOFBENCH_COMMIT) j.field("commit", ROOFBENCH_COMMIT);
  j.field("abi_version", static_cast<std::int64_t>(kAbiVersion));
  j.field("suite", c.suite);
  j.field("complete", complete);
  j.field("gate", c.gate ? "on" : "off");
  j.field("mode", c.cold ? "cold" : "hot");
  j.field("isolation", c.isolation);
  write_device(j, c);
  write_run_ceilings(j, c);
  write_run_lists(j, c);
  write_run_ranks(j, c);
  j.end_object();  // roofbench
  j.end_object();  // context
}

// The entry's figures, each a key of its own (Google Benchmark's counters), and what each is under
// roofbench.summaries: both from the one list, summaries_of.
void write_figures(JsonWriter& j, const std::vector<Summary>& summaries) {
  for (const auto& s : summaries) {
    if (!(s.written & written::results_file)) continue;
    if (s.integer()) j.field(s.name, static_cast<std::int64_t>(s.value));
    else j.field(s.name, s.value);
  }
}

void write_summaries(JsonWriter& j, const std::vector<Summary>& summaries) {
  j.key("summaries").begin_object();
  for (const auto& s : summaries) {
    if (!(s.written & written::results_file)) continue;
    j.key(s.name).begin_object().field("unit", s.unit).field("description", s.description);
    if (s.from_plugin) j.field("from_plugin", true);
    j.end_object();
  }
  j.end_object();
}

void write_facts(JsonWriter& j, const std::vector<Fact>& facts) {
  if (facts.empty()) return;
  j.key("facts").begin_object();
  std::set<std::string> fact_names;  // a fact named twice keeps both, the second renamed
  for (const auto& f : facts) {
    std::string name = f.name;
    for (int n = 2; !fact_names.insert(name).second; ++n) name = f.name + "." + std::to_string(n);
    j.field(name, f.value);
  }
  j.end_object();
}

// What the case is and how it ran: identity, work, facts, memory, timing mode, quality.
void write_case(JsonWriter& j, const Result& r, bool gate_enabled) {
  const bool failed = r.status != Status::ok;
  j.field("plugin", r.plugin).field("case", r.case_name);
  j.key("params").begin_object();
  for (const auto& [k, v] : r.params.items()) j.field(k, v);
  j.end_object();
  j.field("precision", to_string(r.precision));
  j.field("bound", failed ? "" : to_string(r.bound));
  j.field("gate", r.gate_word(gate_enabled, GateView::entry));
  j.field("status", to_string(r.status));
  j.field("ladder", r.ladder).field("device", r.device);
  if (!r.sweep_axis.empty()) j.field("sweep_axis", r.sweep_axis);
  j.field("flops", r.work.flops).field("bytes", r.work.bytes).field("items", r.work.items);
  j.field("item_name", r.work.item_name);
  if (r.work.bytes_read > 0) j.field("bytes_read", r.work.bytes_read);
  if (r.work.read_dominated) j.field("read_dominated", true);
  write_facts(j, r.case_facts);
  j.field("attainable_flops", r.attainable_flops);
  if (!failed && r.memory_roof.bytes_per_s > 0)
    j.field("memory_roof", r.memory_roof.name).field("memory_roof_Bps", r.memory_roof.bytes_per_s);
  j.key("memory").begin_object();
  j.field("allocated", r.memory.allocated).field("peak", r.memory.peak);
  j.field("reserved", r.memory.reserved).field("driver_used", r.memory.driver_used);
  if (r.memory.leaked > 0) j.field("leaked", r.memory.leaked);
  j.end_object();
  j.field("timing", r.graph ? "graph" : "stream");
  if (r.cache_resident) j.field("cache_resident", true);
  if (r.noisy()) j.field("quality", "noisy").field("quality_reason", r.quality_reason);
  if (!r.energy_note.empty()) j.field("energy_note", r.energy_note);
}

// --counters: why there are none, or the per-kernel table (the totals are figures).
void write_counters(JsonWriter& j, const CounterProfile& c) {
  if (c.error.empty() && c.kernels.empty()) return;
  j.key("counters").begin_object();
  if (!c.error.empty()) j.field("error", c.error);
  if (!c.replay.empty()) j.field("replay", c.replay).field("replay_runs", static_cast<std::int64_t>(c.replay_runs));
  if (!c.run_replay_failure.empty()) j.field("run_replay_failure", c.run_replay_failure);
  j.key("kernels").begin_array();
  for (const auto& k : c.kernels) {
    j.begin_object().field("name", k.name).field("launches_per_run", k.launches_per_run);
    j.field("dram_read", k.dram_read).field("dram_write", k.dram_write).field("l2_bytes", k.l2_bytes);
    j.field("flops", k.flops()).field("flops_tensor", k.flops_tensor).end_object();
  }
  j.end_array();
  j.end_object();
}

// Each rank's own figures, when processes of several ranks measured the benchmark (its figures are the
// slowest rank's); a figure a rank did not make is left out.
void write_rank_figures(JsonWriter& j, const std::vector<RankFigures>& ranks) {
  if (ranks.empty()) return;
  j.key("ranks").begin_array();
  for (const auto& k : ranks) {
    j.begin_object().field("rank", static_cast<std::int64_t>(k.rank)).field("host", k.host).field("device", k.device);
    j.field("status", to_string(k.status));
    if (std::isfinite(k.time_median)) j.field("time_median", k.time_median);
    if (std::isfinite(k.sm_clock_mhz)) j.field("sm_clock_mhz", k.sm_clock_mhz);
    if (std::isfinite(k.energy_per_run)) j.field("energy_per_run", k.energy_per_run);
    j.end_object();
  }
  j.end_array();
}

// The structured parts that are not figures: the kernel profile, the counters, the phases, the samples.
void write_details(JsonWriter& j, const Result& r) {
  write_rank_figures(j, r.rank_figures);
  if (!r.profile.kernels.empty() || !r.profile.error.empty()) {
    j.key("profile").begin_object();
    j.field("kernel_seconds_per_run", r.profile.kernel_seconds_per_run);
    j.field("span_seconds_per_run", r.profile.span_seconds_per_run);
    j.field("idle_seconds_per_run", r.profile.idle_seconds_per_run);
    if (!r.profile.error.empty()) j.field("error", r.profile.error);
    j.key("kernels").begin_array();
    for (const auto& k : r.profile.kernels)
      j.begin_object().field("name", k.name).field("seconds_per_run", k.seconds_per_run).field("launches_per_run", k.launches_per_run).end_object();
    j.end_array();
    j.end_object();
  }
  write_counters(j, r.counters);
  j.key("phases_s").begin_object();
  j.field("setup", r.phases.setup).field("gate", r.phases.gate).field("warmup", r.phases.warmup);
  j.field("sampling", r.phases.sampling).field("profile", r.phases.profile).field("total", r.phases.total);
  j.end_object();
  j.key("samples_s").begin_array();
  for (double s : thin(r.samples, kSamplesKept)) j.value(s);
  j.end_array();
  if (!r.sample_clocks_mhz.empty()) {
    j.key("sample_clocks_mhz").begin_array();  // thinned at the same indices as samples_s
    for (double c : thin(r.sample_clocks_mhz, kSamplesKept)) j.value(c);
    j.end_array();
  }
}

}  // namespace

void write_entry(JsonWriter& j, const Result& r, int repetition_index, int repetitions, bool gate_enabled) {
  const bool failed = r.status != Status::ok;
  j.begin_object();
  j.field("name", r.name).field("run_name", r.name).field("run_type", "iteration");
  j.field("repetitions", repetitions).field("repetition_index", repetition_index);
  j.field("threads", 1).field("iterations", 1);
  // Nanoseconds, as the --benchmark_out file: compare.py shows whole numbers of the unit.
  j.field("real_time", failed ? 0.0 : r.figure(fig::time_median) * 1e9).field("cpu_time", failed ? 0.0 : r.figure(fig::time_median) * 1e9);
  j.field("time_unit", "ns");
  j.field("label", r.label(gate_enabled));
  j.field("error_occurred", failed).field("error_message", r.error_message());
  const std::vector<Summary> summaries = summaries_of(r);
  write_figures(j, summaries);
  if (r.hold_abandoned) j.field("hold_abandoned", true);
  j.key("roofbench").begin_object();
  write_summaries(j, summaries);
  write_case(j, r, gate_enabled);
  write_details(j, r);
  j.end_object();
  j.end_object();
}

std::string ResultsFile::to_json(bool complete) const {
  JsonWriter j;
  j.begin_object();
  write_context(j, context_, complete);
  j.key("benchmarks").begin_array();
  for (std::size_t i = 0; i < results_.size(); ++i)
    write_entry(j, results_[i], repetitions_[i].first, repetitions_[i].second, context_.gate);
  j.end_array();
  j.end_object();
  return j.str() + "\n";
}

void ResultsFile::write(bool complete) const {
  namespace fs = std::filesystem;
  const fs::path target(path_);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const fs::path temporary = target.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << to_json(complete);
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + temporary.string());
  }
  fs::rename(temporary, target);
}

}  // namespace roofbench
