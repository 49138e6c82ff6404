#include "thread_team.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

namespace roofbench::kernels::cpu {
namespace {

std::vector<int> visits_of(std::int64_t n, std::int64_t grain) {
  std::vector<int> visits(static_cast<std::size_t>(n));
  parallel_for(n, grain, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t i = begin; i < end; ++i) ++visits[static_cast<std::size_t>(i)];
  });
  return visits;
}

TEST(ThreadTeam, EveryIterationRunsOnceWithWorkersAsleepOrAwake) {
  for (std::int64_t n : {1, 2, 7, 1000, 100003}) {
    EXPECT_EQ(visits_of(n, 1), std::vector<int>(static_cast<std::size_t>(n), 1)) << n;
    KeepAwake awake;
    EXPECT_EQ(visits_of(n, 1), std::vector<int>(static_cast<std::size_t>(n), 1)) << n;
  }
  EXPECT_TRUE(visits_of(0, 1).empty());
}

TEST(ThreadTeam, ChunksAreContiguousAndAtLeastTheGrain) {
  std::mutex lock;
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
  std::set<int> threads;
  parallel_for(100, 30, [&](std::int64_t begin, std::int64_t end, int thread) {
    std::lock_guard<std::mutex> hold(lock);
    chunks.emplace_back(begin, end);
    threads.insert(thread);
  });
  const std::size_t expected = static_cast<std::size_t>(std::min(team_size(), 3));  // 100 / 30
  EXPECT_EQ(chunks.size(), expected);
  EXPECT_EQ(threads.size(), expected);
  for (const auto& [begin, end] : chunks) EXPECT_GE(end - begin, 30);
}

TEST(ThreadTeam, ALoopSmallerThanTheGrainRunsOnTheCaller) {
  std::set<int> threads;
  parallel_for(4096, 8192, [&](std::int64_t, std::int64_t, int thread) { threads.insert(thread); });
  EXPECT_EQ(threads, std::set<int>{0});
}

TEST(ThreadTeam, ANestedLoopRunsSeriallyInsideItsChunk) {
  std::atomic<std::int64_t> total{0};
  {
    KeepAwake awake;
    parallel_for(8, 1, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t i = begin; i < end; ++i)
        parallel_for(10, 1, [&](std::int64_t b, std::int64_t e, int) { total += e - b; });
    });
  }
  EXPECT_EQ(total.load(), 80);
}

}  // namespace
}  // namespace roofbench::kernels::cpu
