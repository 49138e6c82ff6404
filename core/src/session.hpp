// One run of the selected benchmarks, whatever front end drives it: owns the device's ceilings (measured
// or read from the cache at the first benchmark that needs them), the results file, the sweeps and the
// outcomes' failure flags. Measuring is the runner's job (in this process or in a worker process).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ceilings_cache.hpp"
#include "results.hpp"
#include "selection.hpp"
#include "worker.hpp"

namespace roofbench {

// Along a sweep axis throughput is expected to rise; the sweep ends when it stops rising (two points
// in a row under +5%) or memory runs out. The knee is the first point within 10% of the best.
struct Sweep {
  std::vector<std::pair<std::string, double>> points;  // axis value, throughput
  int flat_points = 0;
  bool ended = false;
  std::string end_reason;
  static constexpr double kRise = 1.05, kKneeFraction = 0.9;

  void add(const std::string& value, double throughput);
  void end(std::string reason);
  std::string knee() const;
};

// What a sweep compares: items/s when the case counts items, else FLOP/s, else bytes/s.
double sweep_throughput(const Result& r);

struct SessionSettings {
  MeasureOptions measure;
  double default_timeout_s = 0;           // 0: none
  // --timeout was given: it bounds every benchmark, a case's own timeout_s included (0: none at all).
  bool timeout_given = false;
  std::optional<std::string> results_dir;  // none: no results file
  std::string run_name = "run";            // the results file is <date>-<run_name>.json
  int repetitions = 1;                     // of each benchmark (--benchmark_repetitions)
  RunContext context;                      // its ceilings are filled in when measured
  // Called once, with the reason, when a result beats the ceilings by more than its plausible factor:
  // the ceilings may be stale (measured while the machine was busy), so the next run measures again.
  std::function<void(const std::string&)> ceilings_beaten;
};

// Whether `r` fails the run (the exit code; the console's tally counts exactly these): every status but
// ok and not_applicable, except running out of memory in a sweep, which ends the sweep.
bool counts_as_failure(const Result& r, bool in_a_sweep);

class Session {
 public:
  Session(Selection selection, BenchmarkRunner& runner, std::function<CachedCeilings()> ceilings, SessionSettings settings);

  struct Outcome {
    bool ran = false;
    std::string not_run_reason;  // when !ran
    Result result;               // when ran
    bool counts_as_failure = false;
    std::string note;            // e.g. a sweep's knee, when one was found
  };
  Outcome run(std::size_t index);
  // The run ended normally: the results file says complete.
  void finish();

  const Selection& selection() const { return selection_; }
  int measured() const { return measured_; }
  // The results file could not be written at some point: the run cannot claim what it measured.
  bool results_lost() const { return results_lost_; }
  std::optional<std::string> results_path() const;

 private:
  const CachedCeilings& ceilings();
  void save(bool complete);

  Selection selection_;
  BenchmarkRunner& runner_;
  std::function<CachedCeilings()> ceilings_source_;
  SessionSettings settings_;
  std::optional<CachedCeilings> ceilings_;
  std::unique_ptr<ResultsFile> results_;
  std::map<std::string, int> repetition_counter_;
  std::map<std::string, Sweep> sweeps_;
  void judge_plausibility(Result& r);

  int measured_ = 0;
  bool ceilings_marked_stale_ = false;
  bool results_lost_ = false;
};

}  // namespace roofbench
