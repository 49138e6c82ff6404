#include "session.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "plausibility.hpp"
#include "summaries.hpp"
#include "text.hpp"

namespace roofbench {

void Sweep::add(const std::string& value, double throughput) {
  double best = 0;
  for (const auto& p : points) best = std::max(best, p.second);
  points.emplace_back(value, throughput);
  flat_points = throughput > best * kRise ? 0 : flat_points + 1;
  if (flat_points >= 2) end("throughput stopped rising");
}

void Sweep::end(std::string reason) {
  ended = true;
  end_reason = std::move(reason);
}

std::string Sweep::knee() const {
  double best = 0;
  for (const auto& p : points) best = std::max(best, p.second);
  for (const auto& p : points)
    if (p.second >= kKneeFraction * best) return p.first;
  return {};
}

double sweep_throughput(const Result& r) {
  const std::vector<Summary> summaries = summaries_of(r);
  const Summary* rate = headline_rate(summaries, r);
  return rate ? rate->value : 0;
}

Session::Session(Selection selection, BenchmarkRunner& runner, std::function<CachedCeilings()> ceilings,
                 SessionSettings settings)
    : selection_(std::move(selection)), runner_(runner), ceilings_source_(std::move(ceilings)), settings_(std::move(settings)) {}

const CachedCeilings& Session::ceilings() {
  if (!ceilings_) {
    ceilings_ = ceilings_source_();
    RunContext& c = settings_.context;
    c.measured = ceilings_->ceilings;
    c.measured_at = ceilings_->measured_at;
    c.ceilings_how = ceilings_->how;
    if (settings_.results_dir) {
      std::string stamp = utc_timestamp().substr(0, 19);
      std::replace(stamp.begin(), stamp.end(), ':', '-');
      try {
        const std::string path = claim_run_file(*settings_.results_dir, stamp + "-" + settings_.run_name);
        results_ = std::make_unique<ResultsFile>(path, settings_.context);
      } catch (const std::exception& e) {
        std::cerr << "roofbench: cannot keep results: " << e.what() << "\n";
        results_lost_ = true;
      }
    }
  }
  return *ceilings_;
}

std::optional<std::string> Session::results_path() const {
  if (!results_) return std::nullopt;
  return results_->path();
}

void Session::save(bool complete) {
  if (!results_) return;
  try {
    results_->write(complete);
    // A copy beside it, renamed over latest.json: replaced whole, as the run's file is (a copy in place
    // could be read half written). The temporary is named after this run's file, which no other run has.
    const auto latest = std::filesystem::path(results_->path()).parent_path() / "latest.json";
    const std::filesystem::path temporary = results_->path() + ".latest.tmp";
    std::filesystem::copy_file(results_->path(), temporary, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(temporary, latest);
  } catch (const std::exception& e) {
    if (!results_lost_) std::cerr << "roofbench: cannot write results: " << e.what() << "\n";
    results_lost_ = true;
  }
}

void Session::finish() {
  if (results_) save(true);
}

bool counts_as_failure(const Result& r, bool in_a_sweep) {
  switch (r.status) {
    case Status::ok:
    case Status::not_applicable: return false;
    case Status::out_of_memory: return !in_a_sweep;  // ends the sweep, not the run
    default: return true;  // refused included: not run, but this build cannot measure this GPU
  }
}

// What a plugin said, made safe for a terminal and the report before either sees it.
static void make_printable(Result& r) {
  r.message = printable(r.message, true);
  r.work.item_name = printable(r.work.item_name);
  for (auto& fact : r.case_facts) fact.name = printable(fact.name), fact.value = printable(fact.value);
  for (auto& rate : r.work.rates) rate.name = printable(rate.name);
  for (auto& s : r.summaries)
    if (s.from_plugin) s.name = printable(s.name), s.unit = printable(s.unit), s.description = printable(s.description);
}

// A result faster than the device can go fails (its samples stay in the results file) and may mean the
// ceilings were measured low: the first such result marks them stale.
void Session::judge_plausibility(Result& r) {
  const auto why = implausibility(r, ceilings_->ceilings, settings_.context.datasheet);
  if (!why) return;
  r.status = Status::implausible;
  r.message = *why + (r.message.empty() ? "" : "; " + r.message);
  if (ceilings_marked_stale_ || !settings_.ceilings_beaten) return;
  ceilings_marked_stale_ = true;
  settings_.ceilings_beaten(r.name + ": " + message_prefix(Status::implausible) + *why);
}

Session::Outcome Session::run(std::size_t index) {
  const BenchmarkSpec& b = selection_.benchmarks[index];
  const std::string group = sweep_group(b);
  Outcome out;
  const CachedCeilings& roofs = ceilings();
  if (!group.empty() && sweeps_[group].ended) {
    const Sweep& s = sweeps_[group];
    out.not_run_reason = "the sweep of " + b.spec->sweep_axis + " ended (" + s.end_reason + ")";
    if (results_) results_->add_not_run({b.name, "sweep ended: " + s.end_reason});
    return out;
  }
  // A case's own timeout allows for its own sampling; --energy may lengthen that (default_timeout_seconds).
  const MeasureOptions& m = settings_.measure;
  const double timeout = b.spec->timeout_s > 0 && !settings_.timeout_given
                             ? b.spec->timeout_s + 4 * (longest_sampling_seconds(m) - m.max_time)
                             : settings_.default_timeout_s;
  RunRequest request{b, selection_.ranks[index], roofs, settings_.measure, timeout};
  request.judge_own = [this](Result& own) { judge_plausibility(own); };
  Result r = runner_.run(request);
  make_printable(r);
  // Ranks' combined result: each rank judged its own figures against its own ceilings before rank 0 combined
  // them (RunRequest::judge_own), so a figure impossible on any rank fails the benchmark alike on every rank.
  // Judged again here against this rank's ceilings, the ranks could disagree and their sweeps part.
  if (r.rank_figures.empty()) judge_plausibility(r);
  const int repetition = repetition_counter_[b.name]++;
  if (r.status == Status::not_applicable || r.status == Status::refused) {
    out.not_run_reason = r.message;
    out.counts_as_failure = counts_as_failure(r, !group.empty());
    if (results_) {
      results_->add_not_run({b.name, r.message});
      save(false);
    }
    return out;
  }
  ++measured_;
  if (!group.empty()) {
    Sweep& s = sweeps_[group];
    if (r.status == Status::out_of_memory) s.end("out of memory at " + b.spec->sweep_axis + "=" + b.params.str(b.spec->sweep_axis));
    else if (r.passed()) s.add(b.params.str(b.spec->sweep_axis), sweep_throughput(r));
    if (s.ended && !s.knee().empty()) {
      out.note = "sweep " + group + ": knee at " + b.spec->sweep_axis + "=" + s.knee() + " (" + s.end_reason + ")";
      if (results_) results_->add_note(out.note);
    }
  }
  out.counts_as_failure = counts_as_failure(r, !group.empty());
  out.ran = true;
  if (results_) {
    results_->add(r, repetition, settings_.repetitions);
    save(false);
  }
  out.result = std::move(r);
  return out;
}

}  // namespace roofbench
