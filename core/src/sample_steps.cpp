#include "sample_steps.hpp"

namespace roofbench {

SamplePlan plan_sample(const TimingOptions& options, int runs, bool timed) {
  using enum SampleStep;
  auto the_runs = [&](std::vector<SampleStep> steps) {
    for (int i = 0; i < runs; ++i) steps.push_back(run);
    return steps;
  };
  auto framed = [&](bool with_flush) {
    std::vector<SampleStep> steps = the_runs(with_flush ? std::vector<SampleStep>{flush, start}
                                                        : std::vector<SampleStep>{start});
    steps.push_back(stop);
    return steps;
  };
  SamplePlan plan;
  if (!timed) (options.graph ? plan.in_graph : plan.before_graph) = the_runs({});
  else if (!options.graph) plan.before_graph = framed(options.cold);
  else if (options.cold) plan.in_graph = framed(true);
  else plan = {.before_graph = {start}, .in_graph = the_runs({}), .after_graph = {stop}};
  return plan;
}

}  // namespace roofbench
