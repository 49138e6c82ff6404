// The bookkeeping of the engine-plan search (CPU): one candidate per distinct engine and knob choices,
// the counts' text, and the text of a timed choice.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "roofbench/case_support/launch_timing_testing.hpp"
#include "roofbench/cudnn_backend/engine_plans.hpp"

namespace roofbench::cudnn_backend {
namespace {

EngineConfig config(std::int64_t index, std::vector<std::pair<std::int64_t, std::int64_t>> knobs, std::string modes) {
  return {index, std::move(knobs), std::move(modes)};
}

TEST(CudnnBackendPlans, RepeatsAcrossModesAreOneCandidateNamingEveryMode) {
  std::vector<EngineConfig> configs = {
      config(12, {{3, 1}, {5, 0}}, "A"), config(12, {{3, 2}, {5, 0}}, "A"), config(7, {}, "A"),
      config(12, {{3, 1}, {5, 0}}, "B"), config(7, {}, "fallback"),     config(12, {{3, 1}, {5, 0}}, "B"),
      config(9, {}, "fallback"),
  };
  const std::vector<std::size_t> kept = distinct_configs(configs);
  EXPECT_EQ(kept, (std::vector<std::size_t>{0, 1, 2, 6}));
  EXPECT_EQ(configs[0].modes, "A+B");  // a second B repeat adds nothing
  EXPECT_EQ(configs[1].modes, "A");    // other knob values: another candidate
  EXPECT_EQ(configs[2].modes, "A+fallback");
  EXPECT_EQ(configs[6].modes, "fallback");
  std::vector<EngineConfig> none;
  EXPECT_TRUE(distinct_configs(none).empty());
}

TEST(CudnnBackendPlans, LabelsNameTheEngineAndItsKnobs) {
  EXPECT_EQ(config(12, {{3, 1}, {5, 0}}, "A").label(), "engine 12 (knobs 3=1 5=0)");
  EXPECT_EQ(config(7, {}, "A").label(), "engine 7");
}

TEST(CudnnBackendPlans, CountsSayWhatBecameOfEveryConfiguration) {
  PlanCounts counts;
  counts.per_mode = {{"A", 24}, {"B", -1}, {"fallback", 4}};
  counts.failed_modes = "B: CUDNN_STATUS_NOT_SUPPORTED";
  counts.distinct = 26;
  counts.excluded_notes = 3;
  counts.refused = 2;
  counts.finalized = 16;
  counts.beyond_limit = 5;
  EXPECT_EQ(counts.text(16),
            "heuristics A 24, B failed, fallback 4 configurations (B: CUDNN_STATUS_NOT_SUPPORTED); 26 distinct; 3 left "
            "out for their numerical notes; 2 refused by cuDNN at finalize; 16 plans finalized (limit 16, 5 more not "
            "tried)");
  PlanCounts plain;
  plain.per_mode = {{"A", 2}};
  plain.distinct = 2;
  plain.runtime_compilation = 1;
  plain.too_much_workspace = 1;
  EXPECT_EQ(plain.text(16),
            "heuristics A 2 configurations; 2 distinct; 1 left out for runtime compilation; 1 need more workspace than "
            "allowed; 0 plans finalized (limit 16)");
}

TEST(CudnnBackendPlans, TheChoiceNamesWhatWasTimedAndChosen) {
  std::vector<EnginePlan> plans(3);
  plans[0].engine = config(12, {{3, 1}}, "A+B");
  plans[1].engine = config(7, {}, "A");
  plans[2].engine = config(40, {}, "fallback");
  plans[1].workspace_bytes = 4096;
  const std::vector<case_support::CandidateTiming> timings = {
      case_support::testing::timed(0.02), case_support::testing::timed(0.0125), case_support::testing::skipped(1.5)};
  EXPECT_EQ(case_support::fastest(timings), 1u);
  EXPECT_EQ(plan_choice_text(plans, timings, 1, 5, "counts"),
            "timed per launch (median of 5 groups of up to 50 launches, CUDA graph): engine 12 (knobs 3=1) [A+B] 0.02 "
            "ms, engine 7 [A] 0.0125 ms, engine 40 [fallback] skipped (one launch 1.5 ms); chose engine 7 (workspace "
            "4096 B); counts");
}

}  // namespace
}  // namespace roofbench::cudnn_backend
