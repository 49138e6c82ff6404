#include "sample_steps.hpp"

#include <gtest/gtest.h>

namespace roofbench {
namespace {

using enum SampleStep;
using Steps = std::vector<SampleStep>;

TEST(SamplePlan, HotStreamSamplesTimeTheRunsBetweenEventsOnTheStream) {
  const SamplePlan p = plan_sample({.cold = false, .graph = false}, 3, true);
  EXPECT_EQ(p.before_graph, (Steps{start, run, run, run, stop}));
  EXPECT_TRUE(p.in_graph.empty());
  EXPECT_TRUE(p.after_graph.empty());
}

TEST(SamplePlan, HotGraphSamplesKeepTheEventsOutsideTheGraphAsBefore) {
  const SamplePlan p = plan_sample({.cold = false, .graph = true}, 2, true);
  EXPECT_EQ(p.before_graph, (Steps{start}));
  EXPECT_EQ(p.in_graph, (Steps{run, run}));
  EXPECT_EQ(p.after_graph, (Steps{stop}));
}

TEST(SamplePlan, ColdStreamSamplesFlushBeforeTheStartEvent) {
  const SamplePlan p = plan_sample({.cold = true, .graph = false}, 1, true);
  EXPECT_EQ(p.before_graph, (Steps{flush, start, run, stop}));
  EXPECT_TRUE(p.in_graph.empty());
}

// The graph's launch cost is spent before its flush, outside the timed span; the flush itself is outside it too.
TEST(SamplePlan, ColdGraphSamplesCaptureTheFlushAndTheEventsIntoTheGraph) {
  const SamplePlan p = plan_sample({.cold = true, .graph = true}, 1, true);
  EXPECT_TRUE(p.before_graph.empty());
  EXPECT_EQ(p.in_graph, (Steps{flush, start, run, stop}));
  EXPECT_TRUE(p.after_graph.empty());
}

TEST(SamplePlan, UntimedLaunchesAreTheRunsAloneOnTheSameLaunchPath) {
  for (const bool cold : {false, true}) {
    const SamplePlan stream = plan_sample({.cold = cold, .graph = false}, 2, false);
    EXPECT_EQ(stream.before_graph, (Steps{run, run}));
    EXPECT_TRUE(stream.in_graph.empty());
    const SamplePlan graph = plan_sample({.cold = cold, .graph = true}, 2, false);
    EXPECT_TRUE(graph.before_graph.empty());
    EXPECT_EQ(graph.in_graph, (Steps{run, run}));
    EXPECT_TRUE(graph.after_graph.empty());
  }
}

}  // namespace
}  // namespace roofbench
