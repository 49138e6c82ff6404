#include "rank_mode.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <sstream>
#include <string_view>

#include "options.hpp"
#include "summaries.hpp"

namespace roofbench {
namespace {

// The first byte of a round's payload (to rank 0) and of its verdict (from rank 0).
constexpr char kExchange = 'X', kFinished = 'R';             // payloads: a blob; a finished Result
constexpr char kBlobs = 'X', kCombined = 'C', kEnded = 'E', kFatal = 'F';  // verdicts

RankFigures figures_of(const Result& r, int rank, const std::vector<std::string>& hosts) {
  RankFigures f;
  f.rank = rank;
  if (static_cast<std::size_t>(rank) < hosts.size()) f.host = hosts[static_cast<std::size_t>(rank)];
  f.device = r.device;
  f.status = r.status;
  if (r.passed()) {
    f.time_median = r.figure(fig::time_median);
    f.sm_clock_mhz = r.figure(fig::sm_clock_mhz);
    f.energy_per_run = r.figure(fig::energy_per_run);
  }
  return f;
}

bool caused_by_another_rank(const Result& r) { return r.message.rfind(kEndedByRank, 0) == 0; }

// Whether a failed Result may leave the ranks that work together waiting for its rank (in a collective it
// never reached). One judged implausible was measured in full, every collective run: no rank waits for it, and
// stopping the others' workers (in their teardown, say) would only lose their figures. One not applicable was
// agreed on by every rank after its setup (measure.cpp): each ends it in step.
bool may_leave_others_waiting(const Result& r) {
  return !r.passed() && r.status != Status::implausible && r.status != Status::not_applicable;
}

// The rank whose failure is the benchmark's: the first that failed of its own accord; else the first that
// timed out (it may have waited in a collective for a rank that failed); else the first that failed.
std::optional<std::size_t> failing_rank(const std::vector<Result>& results) {
  std::optional<std::size_t> first, first_timed_out;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i].passed()) continue;
    const bool timed_out = results[i].status == Status::timed_out;
    if (!caused_by_another_rank(results[i]) && !timed_out) return i;
    if (timed_out && !first_timed_out) first_timed_out = i;
    if (!first) first = i;
  }
  return first_timed_out ? first_timed_out : first;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Why a finished rank ended the benchmark while others still exchanged.
std::string ended_by(std::size_t rank, const Result& r) {
  const std::string how = r.passed() ? "it finished while this rank still exchanged (out of step)"
                                     : std::string(to_string(r.status)) + ": " + r.error_message();
  return kEndedByRank + std::to_string(rank) + " (" + how + ")";
}

RendezvousConfig config_of(const LauncherEnv& env, std::chrono::milliseconds timeout) {
  return {env.rank, env.world_size, env.rendezvous_host, env.rendezvous_port, timeout};
}

void write_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::size_t gpu_of_local_rank(int local_rank, std::size_t gpus_visible) {
  if (gpus_visible == 1) return 0;
  if (local_rank < 0 || static_cast<std::size_t>(local_rank) >= gpus_visible)
    throw UsageError("local rank " + std::to_string(local_rank) + " has no GPU: this process sees " +
                     std::to_string(gpus_visible) + " (one per local rank, or one per process through CUDA_VISIBLE_DEVICES)");
  return static_cast<std::size_t>(local_rank);
}

Result combine_rank_results(const std::vector<Result>& results, const std::vector<std::string>& hosts) {
  std::vector<RankFigures> figures;
  for (std::size_t i = 0; i < results.size(); ++i) figures.push_back(figures_of(results[i], static_cast<int>(i), hosts));
  Result combined;
  if (const auto failed = failing_rank(results)) {
    combined = results[*failed];
    const bool alike = std::all_of(results.begin(), results.end(), [&](const Result& r) {
      return r.status == combined.status && r.message == combined.message;
    });
    if (!alike) combined.message = "rank " + std::to_string(*failed) + ": " + combined.message;
  } else {
    std::size_t slowest = 0;
    for (std::size_t i = 1; i < results.size(); ++i)
      if (results[i].figure(fig::time_median) > results[slowest].figure(fig::time_median)) slowest = i;
    combined = results[slowest];
  }
  combined.rank_figures = std::move(figures);
  add_rank_summaries(combined);
  return combined;
}

// A round of exchanges where a rank gave its verdict after setup (kSetUpBlob, or kNotApplicableBlob and why) while
// another was not at that exchange but in one of its own setup (a plugin's exchanges there differ in number by
// rank, or a rank found the case not applicable before one): why the round ends the case, else nothing. Left to
// go on, the rank inside its setup would take the verdicts for its own exchange's answer, and the others would
// go on to the gate's collective without it.
std::optional<std::string> setup_out_of_step(const std::vector<std::string>& tagged) {
  std::optional<std::size_t> not_applicable, set_up;
  bool other = false;
  for (std::size_t i = 0; i < tagged.size(); ++i) {
    const std::string_view blob = std::string_view(tagged[i]).substr(1);
    if (blob.starts_with(kNotApplicableBlob)) not_applicable = not_applicable.value_or(i);
    else if (blob == kSetUpBlob) set_up = set_up.value_or(i);
    else other = true;
  }
  if (!other) return std::nullopt;
  if (not_applicable)
    return kEndedByRank + std::to_string(*not_applicable) + " (" + tagged[*not_applicable].substr(1) +
           ", found while another rank exchanged inside its setup)";
  if (set_up)
    return kEndedByRank + std::to_string(*set_up) +
           " (it ended its setup while another rank exchanged inside its setup: out of step)";
  return std::nullopt;
}

std::string decide_round(const std::vector<std::string>& tagged, const std::vector<std::string>& hosts) {
  bool all_exchange = true, all_finished = true;
  std::optional<std::size_t> first_finished;
  for (std::size_t i = 0; i < tagged.size(); ++i) {
    const char tag = tagged[i].empty() ? '\0' : tagged[i][0];
    all_exchange = all_exchange && tag == kExchange;
    all_finished = all_finished && tag == kFinished;
    if (tag == kFinished && !first_finished) first_finished = i;
  }
  try {
    if (all_exchange) {
      if (const auto why = setup_out_of_step(tagged)) return kEnded + *why;
      std::vector<std::string> blobs;
      for (const auto& t : tagged) blobs.push_back(t.substr(1));
      return kBlobs + wire::exchange_reply(blobs);
    }
    std::vector<Result> results;
    for (const auto& t : tagged)
      if (t[0] == kFinished) results.push_back(wire::result_from_bytes(t.substr(1)));
    if (all_finished) return kCombined + wire::result_bytes(combine_rank_results(results, hosts));
    if (!first_finished) return kFatal + std::string("rendezvous: a round of unknown payloads");
    return kEnded + ended_by(*first_finished, results.front());
  } catch (const std::exception& e) {
    return kFatal + std::string("rendezvous: rank 0 could not read a rank's payload: ") + e.what();
  }
}

std::string selection_mismatch(const std::vector<std::string>& selections) {
  const std::vector<std::string> first = lines_of(selections.front());
  for (std::size_t r = 1; r < selections.size(); ++r) {
    if (selections[r] == selections.front()) continue;
    const std::vector<std::string> other = lines_of(selections[r]);
    std::size_t i = 0;
    while (i < first.size() && i < other.size() && first[i] == other[i]) ++i;
    auto at = [i](const std::vector<std::string>& names) { return i < names.size() ? names[i] : std::string("nothing"); };
    return "rank " + std::to_string(r) + " selected other benchmarks than rank 0: " + at(other) + " where rank 0 has " +
           at(first) + " (benchmark " + std::to_string(i + 1) + "; " + std::to_string(other.size()) + " against " +
           std::to_string(first.size()) + " in all); every rank must be given the same selection";
  }
  return "";
}

RankLink::RankLink(const LauncherEnv& env, std::chrono::milliseconds timeout)
    : rendezvous_(config_of(env, timeout)), timeout_(timeout) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  hosts_ = rendezvous_.gather(name);
}

void RankLink::check_same_selection(const std::string& selection) {
  const std::vector<std::string> all = rendezvous_.gather(selection);
  const std::string verdict = rendezvous_.broadcast(rank() == 0 ? selection_mismatch(all) : std::string());
  if (!verdict.empty()) throw UsageError(verdict);
}

void RankLink::calibrate(bool measures, const std::function<void()>& calibrate) {
  const std::vector<std::string> all = rendezvous_.gather(measures ? "measures" : "");
  const bool any = std::any_of(all.begin(), all.end(), [](const std::string& s) { return !s.empty(); });
  const std::string wait = rendezvous_.broadcast(any ? "wait" : "");
  calibrate();
  if (!wait.empty()) rendezvous_.set_timeout(timeout_ + kCalibrationWait);
  rendezvous_.barrier();
  rendezvous_.set_timeout(timeout_);
}

void RankLink::line_up(const std::string& name, double timeout_s) {
  if (lost_) throw RendezvousError(*lost_);
  rendezvous_.set_timeout(timeout_);
  std::string verdict;
  try {
    const std::vector<std::string> names = rendezvous_.gather(name);
    std::string out_of_step;
    for (std::size_t r = 1; r < names.size() && out_of_step.empty(); ++r)
      if (names[r] != name)
        out_of_step = "rank " + std::to_string(r) + " is at " + names[r] + " while rank 0 is at " + name + ": out of step";
    verdict = rendezvous_.broadcast(out_of_step);
  } catch (const RendezvousError& e) {
    lost_ = e.what();
    throw;
  }
  if (!verdict.empty()) {
    lost_ = verdict;
    throw RendezvousError(verdict);
  }
  rendezvous_.set_timeout(timeout_ + std::chrono::milliseconds(static_cast<long long>(std::max(0.0, timeout_s) * 1000)));
}

std::string RankLink::round(char tag, const std::string& payload) {
  if (lost_) throw RendezvousError(*lost_);
  std::string verdict;
  try {
    const std::vector<std::string> gathered = rendezvous_.gather(tag + payload);
    verdict = rendezvous_.broadcast(rank() == 0 ? decide_round(gathered, hosts_) : std::string());
  } catch (const RendezvousError& e) {
    lost_ = e.what();
    throw;
  }
  if (verdict.empty() || verdict[0] == kFatal) {
    lost_ = verdict.empty() ? "rendezvous: rank 0 sent an empty verdict" : verdict.substr(1);
    throw RendezvousError(*lost_);
  }
  return verdict;
}

std::vector<std::string> RankLink::exchange(const std::string& blob) {
  std::string verdict;
  try {
    verdict = round(kExchange, blob);
  } catch (const RendezvousError& e) {
    throw Error(e.what());
  }
  if (verdict[0] == kBlobs) return wire::read_exchange_reply(verdict.substr(1));
  throw Error(verdict.substr(1));
}

std::optional<std::string> RankLink::watch() {
  if (lost_) return "the ranks lost each other: " + *lost_;
  try {
    if (rank() != 0) return rendezvous_.notice();
    const std::vector<std::optional<std::string>> early = rendezvous_.early_gathers();
    for (std::size_t r = 1; r < early.size(); ++r) {
      if (!early[r] || early[r]->empty() || early[r]->front() != kFinished) continue;
      const Result theirs = wire::result_from_bytes(early[r]->substr(1));
      if (may_leave_others_waiting(theirs)) return ended_by(r, theirs);
    }
  } catch (const RendezvousError& e) {
    lost_ = e.what();
    return "the ranks lost each other: " + *lost_;
  } catch (const std::exception&) {
    // a Result rank 0 cannot read: the finishing round says so (decide_round)
  }
  return std::nullopt;
}

// At rank 0, whose own result failed a benchmark whose ranks work together: the ranks still measuring may
// wait for it in a collective; a notice ends their measurement (watch()). A rank whose Result came already
// gets none.
void RankLink::give_notice(const Result& own) {
  const std::string why = caused_by_another_rank(own) ? own.message : ended_by(0, own);
  try {
    for (int r = 1; r < world_size(); ++r) rendezvous_.notify(r, why);
  } catch (const RendezvousError& e) {
    lost_ = e.what();
    throw;
  }
}

Result RankLink::finish(const Result& own, bool together) {
  if (lost_) throw RendezvousError(*lost_);
  if (together && rank() == 0 && may_leave_others_waiting(own)) give_notice(own);
  const std::string payload = wire::result_bytes(own);
  while (true) {
    const std::string verdict = round(kFinished, payload);
    if (verdict[0] == kCombined) return wire::result_from_bytes(verdict.substr(1));
    // kEnded: others were still exchanging; they fail the benchmark and finish in a later round.
  }
}

Result RankedRunner::link_lost(const RunRequest& q) const {
  Result r = unmeasured_result(q.benchmark, q.ranks);
  r.status = Status::error;
  r.message = "the ranks lost each other: " + link_.lost().value_or("the rendezvous failed");
  return r;
}

Result RankedRunner::run(const RunRequest& q) {
  try {
    link_.line_up(q.benchmark.name, q.timeout_s);
  } catch (const RendezvousError&) {
    return link_lost(q);
  }
  RunRequest mine = q;
  mine.world = {link_.world_size(), link_.rank(), [this](const std::string& blob) { return link_.exchange(blob); }};
  const bool together = q.benchmark.spec->device.all_selected_gpus;
  if (together) mine.world.watch = [this] { return link_.watch(); };
  Result own = inner_->run(mine);
  if (q.judge_own) q.judge_own(own);
  try {
    return link_.finish(own, together);
  } catch (const RendezvousError&) {
    return link_lost(q);
  }
}

StderrPrefix::StderrPrefix(std::string prefix) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  std::cerr.flush();
  original_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
  ::dup2(fds[1], 2);
  ::close(fds[1]);
  copier_ = std::thread([from = fds[0], to = original_, prefix = std::move(prefix)] {
    bool line_start = true;
    char buffer[4096];
    for (ssize_t n; (n = ::read(from, buffer, sizeof buffer)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      std::string out;
      for (ssize_t i = 0; i < n; ++i) {
        if (line_start) out += prefix;
        out += buffer[i];
        line_start = buffer[i] == '\n';
      }
      write_all(to, out);
    }
    ::close(from);
  });
}

StderrPrefix::~StderrPrefix() {
  if (original_ < 0) return;
  std::cerr.flush();
  ::dup2(original_, 2);  // the pipe's last writer closes: the copier reads to its end
  if (copier_.joinable()) copier_.join();
  ::close(original_);
}

std::unique_ptr<StderrPrefix> prefix_stderr_of_other_ranks(const Environment& env) {
  try {
    const LauncherEnv launcher = detect_launcher(env);
    if (launcher.world_size > 1 && launcher.rank != 0)
      return std::make_unique<StderrPrefix>("[rank " + std::to_string(launcher.rank) + "] ");
  } catch (const std::exception&) {
    // the run reads the variables again and says what is wrong with them
  }
  return nullptr;
}

}  // namespace roofbench
