#include "selection.hpp"

#include <map>

#include "options.hpp"
#include "text.hpp"

namespace roofbench {

void check_filter_length(const std::string& filter, const std::string& source) {
  if (filter.size() > kMaxFilterLength)
    throw UsageError(source + " is " + std::to_string(filter.size()) + " characters long; at most " +
                     std::to_string(kMaxFilterLength) + " are accepted");
}

NameFilter::NameFilter(std::string filter, const std::string& source) : text_(std::move(filter)) {
  check_filter_length(text_, source);
  std::string pattern = text_;
  if (!pattern.empty() && pattern[0] == '-') negate_ = true, pattern.erase(0, 1);
  if (pattern.empty() || pattern == "all") pattern = ".";
  if (const int error = ::regcomp(&regex_, pattern.c_str(), REG_EXTENDED | REG_NOSUB); error != 0) {
    char message[256];
    ::regerror(error, &regex_, message, sizeof message);
    throw UsageError("bad " + source + " '" + excerpt(text_) + "': " + message);
  }
}

NameFilter::~NameFilter() { ::regfree(&regex_); }

bool NameFilter::matches(const std::string& name) const {
  const std::string full = name + kGoogleBenchmarkSuffix;
  const bool found = ::regexec(&regex_, name.c_str(), 0, nullptr, 0) == 0 || ::regexec(&regex_, full.c_str(), 0, nullptr, 0) == 0;
  return found != negate_;
}

// Why a case of ranks that work together cannot run with one rank in each of `world_size` processes (empty: it can).
static std::string ranks_across_processes(const DeviceNeed& need, DeviceKind run_kind, int world_size) {
  if (need.kind != run_kind)
    return need.kind == DeviceKind::cuda ? "needs GPUs; the run is on the CPU" : "needs CPU ranks; the run is on a GPU";
  if (world_size < need.count)
    return "needs at least " + std::to_string(need.count) + " ranks; the launcher started " + std::to_string(world_size);
  return "";
}

Selection select_benchmarks(const std::vector<BenchmarkSpec>& all, const DeviceChoice& choice, const NameFilter& filter) {
  Selection s;
  const DeviceKind run_kind = choice.device->info().kind;
  for (const auto& b : all) {
    const DeviceNeed& need = b.spec->device;
    std::string why;
    std::vector<Device*> ranks;
    if (need.all_selected_gpus && choice.world_size > 1) {
      why = ranks_across_processes(need, run_kind, choice.world_size);
      if (why.empty()) ranks = {choice.device};
    } else if (need.all_selected_gpus && need.kind == DeviceKind::cpu) {
      why = "needs ranks in several processes: roofbench started by torchrun, srun or mpirun";
    } else if (need.all_selected_gpus) {
      if (run_kind != DeviceKind::cuda) why = "needs GPUs; the run is on the CPU";
      else if (static_cast<int>(choice.gpus.size()) < need.count)
        why = "needs at least " + std::to_string(need.count) + " GPUs; " + std::to_string(choice.gpus.size()) + " selected";
      else ranks = choice.gpus;
    } else if (need.kind != run_kind) {
      why = need.kind == DeviceKind::cuda
                ? "needs a CUDA GPU; " + (choice.have_gpus ? std::string("the run is on the CPU (--device)") : choice.why_no_gpu)
                : "a CPU case; the run is on " + choice.device->info().name + " (--device=cpu runs it)";
    } else {
      ranks = {choice.device};
    }
    if (!why.empty()) {
      if (filter.matches(b.name)) s.not_run.push_back({b.name, why});
      continue;
    }
    s.benchmarks.push_back(b);
    s.ranks.push_back(std::move(ranks));
  }
  std::map<std::string, std::pair<std::string, int>> by_case;
  for (const auto& n : s.not_run) {
    auto& entry = by_case[n.benchmark.substr(0, n.benchmark.find('/', n.benchmark.find('/') + 1))];
    entry.first = n.reason;
    ++entry.second;
  }
  for (const auto& [c, why] : by_case) s.not_run_by_case.push_back({{c, why.first}, why.second});
  return s;
}

}  // namespace roofbench
