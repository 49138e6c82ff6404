// The arithmetic of launch_timing (CPU): group sizes, skipping, the median and the fastest candidate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/case_support/launch_timing_testing.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::case_support {
namespace {

using case_support::testing::skipped;
using case_support::testing::timed;

TEST(LaunchTiming, GroupsAreSizedFromOneLaunch) {
  const TimingPlan plan;
  EXPECT_EQ(plan.launches_per_group(0.010), 50);  // a 10 us kernel: capped
  EXPECT_EQ(plan.launches_per_group(0.1), 10);
  EXPECT_EQ(plan.launches_per_group(0.3), 4);
  EXPECT_EQ(plan.launches_per_group(5.0), 1);  // longer than a group: one launch
  EXPECT_EQ(plan.launches_per_group(0), 50);   // an unmeasurably short launch
}

TEST(LaunchTiming, OnlyClearlySlowerCandidatesAreSkipped) {
  const TimingPlan plan;
  const double none = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(plan.skip(100.0, none));  // the first candidate is always timed
  EXPECT_TRUE(plan.skip(5.0, 1.0));
  EXPECT_FALSE(plan.skip(3.9, 1.0));
  // An overhead-bound single launch of a short kernel (0.15 ms for a 0.02 ms best) is timed, not skipped.
  EXPECT_FALSE(plan.skip(0.12, 0.02));
  EXPECT_TRUE(plan.skip(0.2, 0.02));
}

TEST(LaunchTiming, MedianOfGroups) {
  std::vector<double> odd{3, 1, 2, 100, 0.5};
  EXPECT_DOUBLE_EQ(median(odd), 2);
  std::vector<double> even{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(median(even), 2.5);
  std::vector<double> none;
  EXPECT_TRUE(std::isnan(median(none)));
}

TEST(LaunchTiming, FastestTimedCandidateWinsAndTiesKeepCudnnsOrder) {
  const std::vector<CandidateTiming> timings{timed(0.018), skipped(2.0), timed(0.010), timed(0.010)};
  EXPECT_EQ(fastest(timings), 2u);
  EXPECT_EQ(fastest(std::vector<CandidateTiming>{skipped(0.1), timed(0.5)}), 1u);
  EXPECT_THROW(fastest(std::vector<CandidateTiming>{skipped(0.1)}), Error);
  EXPECT_THROW(fastest(std::vector<CandidateTiming>{}), Error);
}

TEST(LaunchTiming, AFailedCandidateSaysWhyAndCannotWin) {
  CandidateTiming failed;
  failed.skipped = true;
  failed.failed = "cuDNN error 3000 (CUDNN_STATUS_NOT_SUPPORTED) in cudnnBackendExecute";
  EXPECT_EQ(failed.text(), "failed (cuDNN error 3000 (CUDNN_STATUS_NOT_SUPPORTED) in cudnnBackendExecute)");
  EXPECT_EQ(fastest(std::vector<CandidateTiming>{failed, timed(0.5)}), 1u);
  const std::vector<std::string> labels{"A", "B"};
  EXPECT_EQ(describe_timings(labels, std::vector<CandidateTiming>{timed(0.25), failed}, 5),
            "timed per launch (median of 5 groups of up to 50 launches, CUDA graph): A 0.25 ms, B " + failed.text());
  EXPECT_THROW(describe_timings(labels, std::vector<CandidateTiming>{failed}, 5), Error);
  try {
    fastest(std::vector<CandidateTiming>{skipped(2.0), failed}, labels);
    ADD_FAILURE() << "no candidate was timed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("A skipped (one launch 2 ms), B failed (cuDNN error 3000"), std::string::npos)
        << e.what();
  }
}

// ROOFBENCH_ALGORITHM_CHOICE: timed unless it says first; any other value is an error that names it.
TEST(LaunchTiming, TheAlgorithmChoiceComesFromTheEnvironment) {
  unsetenv("ROOFBENCH_ALGORITHM_CHOICE");
  EXPECT_FALSE(first_candidate_only());
  setenv("ROOFBENCH_ALGORITHM_CHOICE", "timed", 1);
  EXPECT_FALSE(first_candidate_only());
  setenv("ROOFBENCH_ALGORITHM_CHOICE", "", 1);
  EXPECT_FALSE(first_candidate_only());
  setenv("ROOFBENCH_ALGORITHM_CHOICE", "first", 1);
  EXPECT_TRUE(first_candidate_only());
  setenv("ROOFBENCH_ALGORITHM_CHOICE", "fastest", 1);
  try {
    first_candidate_only();
    ADD_FAILURE() << "an unknown choice was taken";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "ROOFBENCH_ALGORITHM_CHOICE=fastest: expected timed or first");
  }
  unsetenv("ROOFBENCH_ALGORITHM_CHOICE");
  const CandidateTiming untimed{.skipped = true, .untimed = true};
  EXPECT_EQ(untimed.text(), "not timed (ROOFBENCH_ALGORITHM_CHOICE=first)");
  EXPECT_EQ(fastest(std::vector<CandidateTiming>{timed(0.5), untimed}), 0u);
}

}  // namespace
}  // namespace roofbench::case_support
