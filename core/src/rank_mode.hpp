// Rank mode: roofbench started by torchrun, srun or mpirun, one process per GPU (launcher_env.hpp reads
// which rank this process is). The processes meet at a rendezvous (rendezvous.hpp), check that they
// selected the same benchmarks in the same order, and line up before each benchmark. Each measures it on
// its own device; rank 0 gathers every rank's Result and combines them: the benchmark's time is the
// slowest rank's, the spread across ranks is a figure, and each rank's own figures are kept beside it.
// Only rank 0 prints the table and writes the results file; the others print only their errors.
//
// Every exchange during a benchmark is a round: each rank sends rank 0 a tagged payload (its blob for
// Context::exchange, or its finished Result) and rank 0 answers every rank with one verdict: the blobs,
// the combined Result, or that a rank ended the benchmark while others were still exchanging (they fail
// the benchmark naming it, and the finished ranks send their Result again). A rank that ends or stops
// answering ends the run on every rank within the rendezvous timeout (beyond the benchmark's own).
//
// A case whose ranks work together may leave the others waiting outside any round (in a collective on the
// GPU) when one rank fails or dies. While their workers measure, the parents watch the rendezvous: rank 0
// reads the Results other ranks send early and sees a closed connection at once; where a rank failed or
// ended, rank 0 kills its own worker, gives notice to the ranks still measuring, and they kill theirs. The
// benchmark then fails on every rank naming the rank where it began. A Result judged implausible stops no
// one: its rank ran every collective.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher_env.hpp"
#include "rendezvous.hpp"
#include "worker.hpp"

namespace roofbench {

// Which of the GPUs this process sees the process of `local_rank` uses: the only one where the launcher
// narrowed CUDA_VISIBLE_DEVICES to one GPU per process, else the local rank's. Throws UsageError when there
// are fewer GPUs than that.
std::size_t gpu_of_local_rank(int local_rank, std::size_t gpus_visible);

// Rank 0's verdict of one round from every rank's tagged payload (rank order); `hosts` name the ranks' hosts.
std::string decide_round(const std::vector<std::string>& tagged, const std::vector<std::string>& hosts);

// One benchmark's result from every rank's (rank order): the first rank's failure where one failed (named
// in the message, unless every rank failed alike; a rank that timed out or that another rank's end stopped
// is named only where no other failed), else the slowest rank's result with the figures
// slowest_rank and rank_spread_pct; each rank's own time, clock and energy in rank_figures.
Result combine_rank_results(const std::vector<Result>& results, const std::vector<std::string>& hosts);

// Every rank's selection (one name a line) against rank 0's: empty when all match, else a one-line error
// naming the first rank that differs and its first benchmark that differs.
std::string selection_mismatch(const std::vector<std::string>& selections);

// How long the ranks wait, beyond the rendezvous timeout, for a rank that measures its device's ceilings
// (RankLink::calibrate): their rounds take minutes on a GPU.
inline constexpr std::chrono::seconds kCalibrationWait{1800};

// The rendezvous of the run and what the ranks know of each other.
class RankLink {
 public:
  // Meets every rank (the rendezvous host and port from the launcher) and gathers their host names.
  RankLink(const LauncherEnv& env, std::chrono::milliseconds timeout);
  int rank() const { return rendezvous_.rank(); }
  int world_size() const { return rendezvous_.world_size(); }
  const std::vector<std::string>& hosts() const { return hosts_; }  // at rank 0: every rank's, in rank order
  // Throws UsageError on every rank when the ranks selected different benchmarks (selection_mismatch).
  void check_same_selection(const std::string& selection);
  // Before the first line-up: `calibrate` reads or measures this rank's ceilings. Where a rank must measure them
  // (`measures`: none cached, or --recalibrate), every rank waits for it up to kCalibrationWait beyond the
  // rendezvous timeout, so that no rank's measuring reaches the others as a timeout.
  void calibrate(bool measures, const std::function<void()>& calibrate);
  // The rendezvous failed (a rank ended or stopped answering): why; the link is then spent.
  const std::optional<std::string>& lost() const { return lost_; }

  // Before a benchmark: every rank arrives at the benchmark `name` (another name ends the run: out of step).
  // The rounds of a benchmark that may run `timeout_s` (0: no limit of its own) wait that much longer than
  // the rendezvous timeout.
  void line_up(const std::string& name, double timeout_s);
  // A round of Context::exchange: every process's blob; throws Error when the round fails.
  std::vector<std::string> exchange(const std::string& blob);
  // While this rank's worker measures a case whose ranks work together (RankWorld::watch), without waiting:
  // why it must stop now, or nothing. At rank 0: another rank sent a failed Result other than an implausible
  // one (ended_by names it) or closed its connection; elsewhere: rank 0's notice of that, or rank 0 closed or
  // gave up.
  std::optional<std::string> watch();
  // Rounds with this rank's finished Result until rank 0 answers with the combined one. `together`: the
  // ranks work together; where rank 0's own result failed (other than as implausible), it first gives notice
  // to the ranks still measuring, whose watch() ends their measurement (they may be waiting in a collective
  // for it).
  Result finish(const Result& own, bool together = false);

 private:
  std::string round(char tag, const std::string& payload);
  void give_notice(const Result& own);
  Rendezvous rendezvous_;
  std::chrono::milliseconds timeout_;
  std::vector<std::string> hosts_;
  std::optional<std::string> lost_;
};

// The runner of rank mode: lines the ranks up, measures with the inner runner (its exchanges go through the
// link; a case whose ranks work together is watched, RankLink::watch), judges this rank's own result
// (RunRequest::judge_own) and returns the combined result. Once the link is lost, a benchmark fails with the reason.
class RankedRunner final : public BenchmarkRunner {
 public:
  RankedRunner(std::unique_ptr<BenchmarkRunner> inner, RankLink& link) : inner_(std::move(inner)), link_(link) {}
  Result run(const RunRequest& request) override;

 private:
  Result link_lost(const RunRequest& request) const;
  std::unique_ptr<BenchmarkRunner> inner_;
  RankLink& link_;
};

// While it lives, every line written to stderr (by this process and its workers) starts with `prefix`:
// "[rank 3] ". Its end waits until what was written has gone out.
class StderrPrefix {
 public:
  explicit StderrPrefix(std::string prefix);
  ~StderrPrefix();
  StderrPrefix(const StderrPrefix&) = delete;
  StderrPrefix& operator=(const StderrPrefix&) = delete;

 private:
  int original_ = -1;
  std::thread copier_;
};

// The prefix for this process when a launcher started it as a rank other than 0; none otherwise (also when
// the launcher's variables cannot be read: the run says why later).
std::unique_ptr<StderrPrefix> prefix_stderr_of_other_ranks(const Environment& env);

}  // namespace roofbench
