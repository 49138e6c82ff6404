// Worker processes (--isolation=process, the default): plugins are loaded and benchmarks measured in a
// child process, the same executable started afresh (fork + exec, never a bare fork of a process that
// may hold a CUDA context). A plugin that crashes, exits, hangs or wrecks its device then costs the
// benchmark it was in: the parent records it as crashed or timed_out and starts a fresh worker (a fresh
// CUDA context) for the next one. The parent keeps everything that must survive: sweeps, failure counts,
// the results file and Google Benchmark's reporting.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "benchmark_set.hpp"
#include "ceilings_cache.hpp"
#include "measure.hpp"
#include "plugin_loader.hpp"
#include "wire.hpp"

namespace roofbench {

// The hidden first argument that makes roofbench a worker: roofbench --roofbench-worker describe|run.
inline constexpr const char* kWorkerFlag = "--roofbench-worker";

// The worker's main (fd 0: frames from the parent, fd 3: frames to it, stdout and stderr: its log).
int worker_main(int argc, char** argv);

// What the measuring side needs for one benchmark.
struct RunRequest {
  const BenchmarkSpec& benchmark;
  const std::vector<Device*>& ranks;
  const CachedCeilings& ceilings;
  const MeasureOptions& options;
  double timeout_s = 0;  // 0: none
  // The processes this one measures with (rank_mode.hpp); its exchange is called in this process, for the
  // worker's Context::exchange too.
  RankWorld world = {};
  // Judges this process's own result where ranks combine theirs (RankedRunner), before it leaves for rank 0:
  // each rank holds its own figures against its own device's ceilings (Session's plausibility check).
  std::function<void(Result&)> judge_own = {};
};

class BenchmarkRunner {
 public:
  virtual ~BenchmarkRunner() = default;
  virtual Result run(const RunRequest& request) = 0;
};

// --isolation=none: measure() in this process, as roofbench always did. No timeout can be enforced.
class InProcessRunner final : public BenchmarkRunner {
 public:
  Result run(const RunRequest& request) override;
};

// One child process and the pipes to it. Its stderr (and stdout) is copied to ours as it arrives; the
// last few kilobytes are kept for the record of a crash.
class WorkerProcess {
 public:
  WorkerProcess(const std::string& executable, const std::string& mode);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  using Deadline = std::optional<std::chrono::steady_clock::time_point>;
  struct Event {
    enum Kind { frame, died, timed_out, stopped } kind = frame;
    wire::Frame message{};
    std::string death;  // "killed by signal 11 (Segmentation fault)", "exited with code 0"; stopped: why
  };
  // How often `stop` is asked while the worker runs.
  static constexpr int kStopPollMs = 50;
  // The next frame from the worker, or its death, or the deadline, or `stop`'s reason (asked every
  // kStopPollMs; the worker is killed at the deadline and where stop gives a reason).
  Event next(Deadline deadline, const std::function<std::optional<std::string>()>& stop = {});
  // False when the worker is gone (its death is then reported by the next call of next()).
  bool send(wire::FrameType type, const std::string& payload);
  void kill_now();
  // The last lines the worker wrote to stderr since clear_log_tail(), on one line.
  std::string log_tail() const;
  void clear_log_tail() { tail_.clear(); }

 private:
  void pump(int timeout_ms);
  std::string reap(bool kill_first);
  pid_t pid_ = -1;
  int to_worker_ = -1, from_worker_ = -1, log_ = -1;
  wire::FrameBuffer frames_;
  std::string tail_;
  bool messages_closed_ = false;
  std::optional<std::string> death_;
};

// Describes every plugin file in worker processes: a plugin that kills its worker while loading (a
// static constructor, describe() crashing or exiting) is reported once, by path, as a load failure,
// and a fresh worker goes on with the files after it. The plugins returned hold descriptions only
// (their cases have no make function): they run in ProcessRunner's workers.
LoadResult describe_plugins_in_workers(const std::vector<std::string>& files, const std::string& executable,
                                       double timeout_s);

class ProcessRunner final : public BenchmarkRunner {
 public:
  // `plugin_files`: the files whose plugins described themselves without trouble.
  ProcessRunner(std::string executable, std::vector<std::string> plugin_files);
  Result run(const RunRequest& request) override;
  int workers_started() const { return workers_started_; }

 private:
  Result lost(const RunRequest& request, Status status, const std::string& why);
  std::string executable_;
  std::vector<std::string> plugin_files_;
  std::unique_ptr<WorkerProcess> worker_;
  int workers_started_ = 0;
};

}  // namespace roofbench
