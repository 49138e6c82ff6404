#include "sample_steps.hpp"

namespace roofbench {

SamplePlan plan_sample(const TimingOptions& options, int runs, bool timed) {
  using enum SampleStep;
  const std::vector<SampleStep> the_runs(static_cast<std::size_t>(runs > 0 ? runs : 0), run);
  auto framed = [&](bool with_flush) {
    std::vector<SampleStep> steps;
    if (with_flush) steps.push_back(flush);
    steps.push_back(start);
    steps.insert(steps.end(), the_runs.begin(), the_runs.end());
    steps.push_back(stop);
    return steps;
  };
  SamplePlan plan;
  if (!timed) (options.graph ? plan.in_graph : plan.before_graph) = the_runs;
  else if (!options.graph) plan.before_graph = framed(options.cold);
  else if (options.cold) plan.in_graph = framed(true);
  else plan = {.before_graph = {start}, .in_graph = the_runs, .after_graph = {stop}};
  return plan;
}

}  // namespace roofbench
