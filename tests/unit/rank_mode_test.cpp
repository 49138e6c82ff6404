// Rank mode's pure parts: the GPU of a local rank, rank 0's verdict of a round, the combined result of a
// benchmark measured on several ranks, the selection check, and how the per-rank figures cross the wire
// and reach the results file. The processes themselves: tests/e2e/ranks_test.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "options.hpp"
#include "rank_mode.hpp"
#include "results.hpp"
#include "summaries.hpp"
#include "wire.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;

// A result of one rank: passed with the given median time, or failed with `status` and `message`.
Result rank_result(double time_median, Status status = Status::ok, const std::string& message = "") {
  Measurement m;
  m.name = "p/c/n:1";
  m.device = "cuda:0";
  m.stats.median = time_median;
  m.stats.count = 3;
  m.mean_clock_mhz = 1500 + time_median;
  m.status = status;
  m.message = message;
  return result_of(m);
}

TEST(RankMode, EachLocalRankHasItsGpuUnlessTheLauncherLeftOne) {
  EXPECT_EQ(gpu_of_local_rank(3, 8), 3u);
  EXPECT_EQ(gpu_of_local_rank(5, 1), 0u);  // CUDA_VISIBLE_DEVICES narrowed to the rank's own GPU
  EXPECT_THROW(gpu_of_local_rank(2, 2), UsageError);
}

TEST(RankMode, TheSlowestRanksTimeIsTheBenchmarksAndTheSpreadIsAFigure) {
  const Result combined = combine_rank_results({rank_result(2e-3), rank_result(3e-3), rank_result(2.5e-3)}, {"a", "b", "c"});
  EXPECT_TRUE(combined.passed());
  EXPECT_DOUBLE_EQ(combined.figure(fig::time_median), 3e-3);
  EXPECT_DOUBLE_EQ(combined.figure(fig::slowest_rank), 1);
  EXPECT_NEAR(combined.figure(fig::rank_spread_pct), 50, 1e-9);
  ASSERT_EQ(combined.rank_figures.size(), 3u);
  EXPECT_EQ(combined.rank_figures[2].host, "c");
  EXPECT_DOUBLE_EQ(combined.rank_figures[0].time_median, 2e-3);
  EXPECT_DOUBLE_EQ(combined.rank_figures[0].sm_clock_mhz, 1500 + 2e-3);
}

TEST(RankMode, AFailingRankFailsTheBenchmarkNamingIt) {
  const Result combined = combine_rank_results(
      {rank_result(0, Status::error, std::string(kEndedByRank) + "2 (gate_failed)"), rank_result(1e-3),
       rank_result(0, Status::gate_failed, "relative L2 error 0.5")},
      {});
  EXPECT_EQ(combined.status, Status::gate_failed);
  EXPECT_EQ(combined.message, "rank 2: relative L2 error 0.5");
  EXPECT_TRUE(std::isnan(combined.figure(fig::slowest_rank)));
  EXPECT_EQ(combined.rank_figures[1].status, Status::ok);
}

TEST(RankMode, ARankThatCrashedIsNamedBeforeOneThatTimedOutWaitingForIt) {
  const Result combined = combine_rank_results(
      {rank_result(0, Status::timed_out, "ran past its 60 s timeout"), rank_result(0, Status::crashed, "signal 11")}, {});
  EXPECT_EQ(combined.status, Status::crashed);
  EXPECT_EQ(combined.message, "rank 1: signal 11");
}

TEST(RankMode, RanksThatFailAlikeAreNotNamed) {
  const Result combined = combine_rank_results(
      {rank_result(0, Status::not_applicable, "fp8 needs sm_89"), rank_result(0, Status::not_applicable, "fp8 needs sm_89")}, {});
  EXPECT_EQ(combined.status, Status::not_applicable);
  EXPECT_EQ(combined.message, "fp8 needs sm_89");
}

TEST(RankMode, ARoundOfBlobsAnswersEveryBlob) {
  const std::string verdict = decide_round({"Xa", "Xbc"}, {});
  ASSERT_EQ(verdict[0], 'X');
  EXPECT_EQ(wire::read_exchange_reply(verdict.substr(1)), (std::vector<std::string>{"a", "bc"}));
}

// After setup the ranks say whether the case applies: blobs as any other round. A rank that found it not applicable
// while another still exchanged inside its setup (a broadcast) is out of step: the round ends the case on both.
TEST(RankMode, ARankNotApplicableWhileAnotherExchangesInsideItsSetupEndsTheRound) {
  const std::string agreed = decide_round({"Xset up", "Xnot applicable: no fp8"}, {});
  ASSERT_EQ(agreed[0], 'X');
  EXPECT_EQ(wire::read_exchange_reply(agreed.substr(1)), (std::vector<std::string>{"set up", "not applicable: no fp8"}));
  const std::string verdict = decide_round({"Xnccl id", "Xnot applicable: no fp8"}, {});
  ASSERT_EQ(verdict[0], 'E');
  EXPECT_EQ(verdict.substr(1), "ended by rank 1 (not applicable: no fp8, found while another rank exchanged inside its setup)");
}

// A rank at the end of its setup while another still exchanges inside its own (its setup exchanges once more):
// the one inside would take "set up" for its exchange's answer; the round ends the case on both instead.
TEST(RankMode, ARankAtTheEndOfItsSetupWhileAnotherExchangesInsideItsSetupEndsTheRound) {
  const std::string verdict = decide_round({"Xnccl id", "Xset up", "Xset up"}, {});
  ASSERT_EQ(verdict[0], 'E');
  EXPECT_EQ(verdict.substr(1), "ended by rank 1 (it ended its setup while another rank exchanged inside its setup: out of step)");
  EXPECT_EQ(decide_round({"Xset up", "Xset up"}, {})[0], 'X');
  EXPECT_EQ(decide_round({"Xnccl id", "Xnccl id"}, {})[0], 'X');
}

TEST(RankMode, ARoundOfResultsAnswersTheCombinedOne) {
  const std::string verdict = decide_round({"R" + wire::result_bytes(rank_result(1e-3)), "R" + wire::result_bytes(rank_result(4e-3))}, {});
  ASSERT_EQ(verdict[0], 'C');
  EXPECT_DOUBLE_EQ(wire::result_from_bytes(verdict.substr(1)).figure(fig::time_median), 4e-3);
}

TEST(RankMode, ARankThatFinishedWhileOthersExchangedEndsTheirRound) {
  const std::string verdict = decide_round({"Xa", "R" + wire::result_bytes(rank_result(0, Status::crashed, "signal 11"))}, {});
  ASSERT_EQ(verdict[0], 'E');
  EXPECT_THAT(verdict, HasSubstr(std::string(kEndedByRank) + "1 (crashed: crashed: signal 11)"));
}

TEST(RankMode, APayloadRankZeroCannotReadEndsTheRun) {
  EXPECT_EQ(decide_round({"Xa", "Rnot a result"}, {})[0], 'F');
}

TEST(RankMode, DifferentSelectionsNameTheRankAndTheFirstDifference) {
  EXPECT_EQ(selection_mismatch({"a\nb\n", "a\nb\n"}), "");
  const std::string why = selection_mismatch({"a\nb\nc\n", "a\nb\nc\n", "a\nx\n"});
  EXPECT_THAT(why, HasSubstr("rank 2 selected other benchmarks than rank 0: x where rank 0 has b"));
  EXPECT_THAT(selection_mismatch({"a\nb\n", "a\n"}), HasSubstr("nothing where rank 0 has b"));
}

TEST(RankMode, EachRanksFiguresCrossTheWireAndReachTheResultsFile) {
  const Result combined = combine_rank_results({rank_result(2e-3), rank_result(3e-3)}, {"node1", "node2"});
  const Result out = wire::result_from_bytes(wire::result_bytes(combined));
  ASSERT_EQ(out.rank_figures.size(), 2u);
  EXPECT_EQ(out.rank_figures[1].host, "node2");
  EXPECT_DOUBLE_EQ(out.rank_figures[1].time_median, 3e-3);
  ResultsFile file("f", {});
  file.add(out, 0, 1);
  const std::string json = file.to_json(true);
  EXPECT_THAT(json, HasSubstr("\"slowest_rank\": 1"));
  EXPECT_THAT(json, HasSubstr("\"rank_spread_pct\": 50"));
  EXPECT_THAT(json, HasSubstr("\"ranks\": ["));
  EXPECT_THAT(json, HasSubstr("\"host\": \"node1\""));
  EXPECT_THAT(json, HasSubstr("\"time_median\": 0.002,"));
}

TEST(RankMode, AResultOfOneProcessHasNoRankFigures) {
  ResultsFile file("f", {});
  file.add(rank_result(1e-3), 0, 1);
  const std::string json = file.to_json(true);
  EXPECT_THAT(json, ::testing::Not(HasSubstr("slowest_rank")));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\"ranks\"")));
}

// --rendezvous-timeout's help names how long the ranks wait for one that measures its ceilings.
TEST(RankMode, TheHelpSaysHowLongTheRanksWaitForACalibration) {
  EXPECT_THAT(usage_text(), HasSubstr("up to " + std::to_string(kCalibrationWait.count()) + " s more"));
}

}  // namespace
}  // namespace roofbench
