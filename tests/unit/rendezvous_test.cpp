// The rendezvous with real processes on this machine: N forked ranks meet at 127.0.0.1 on a free port,
// broadcast, gather and hold barriers; a rank that dies, hangs or never comes makes the others fail within the
// timeout with that rank named, and no process is left waiting; between operations rank 0 reads early gathers
// and gives notice, and a rank that dies is seen at once.
#include "rendezvous.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace roofbench {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct RankOutcome {
  int exit_code = -1;  // -1: still running at the limit (killed)
  std::string text;    // what the rank returned, or its error
};

// A port nobody listens on now (the kernel's choice for port 0).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0)
    ADD_FAILURE() << "no free port";
  ::close(fd);
  return ntohs(address.sin_port);
}

// In the forked rank: runs `body`, writes its text (or error) to `out` and ends the process.
[[noreturn]] void run_child(int rank, const std::function<std::string(int)>& body, int out) {
  int code = 0;
  std::string text;
  try {
    text = body(rank);
  } catch (const std::exception& e) {
    text = e.what();
    code = 1;
  }
  ssize_t written = ::write(out, text.data(), text.size());
  ::_exit(written == static_cast<ssize_t>(text.size()) ? code : 3);
}

std::string read_all(int fd) {
  std::string text;
  char chunk[4096];
  for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;) text.append(chunk, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

// Runs body(rank) in one forked process per rank of `world` except those in `absent`; a rank still running
// after `limit` is killed and reported with exit code -1.
std::vector<RankOutcome> run_ranks(int world, const std::function<std::string(int)>& body,
                                   std::set<int> absent = {}, milliseconds limit = milliseconds{20000}) {
  std::vector<pid_t> pids(static_cast<size_t>(world), -1);
  std::vector<int> pipes(static_cast<size_t>(world), -1);
  for (int r = 0; r < world; ++r) {
    if (absent.count(r)) continue;
    int ends[2];
    if (::pipe(ends) != 0) ADD_FAILURE() << "pipe";
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ends[0]);
      run_child(r, body, ends[1]);
    }
    ::close(ends[1]);
    pids[static_cast<size_t>(r)] = pid;
    pipes[static_cast<size_t>(r)] = ends[0];
  }
  std::vector<RankOutcome> out(static_cast<size_t>(world));
  const auto until = Clock::now() + limit;
  for (size_t r = 0; r < pids.size(); ++r) {
    if (pids[r] < 0) continue;
    int status = 0;
    while (::waitpid(pids[r], &status, WNOHANG) == 0) {
      if (Clock::now() < until) {
        std::this_thread::sleep_for(milliseconds{10});
        continue;
      }
      ::kill(pids[r], SIGKILL);
      ::waitpid(pids[r], &status, 0);
      status = -1;
      break;
    }
    out[r].exit_code = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    out[r].text = read_all(pipes[r]);
  }
  return out;
}

RendezvousConfig config(int rank, int world, int port, milliseconds timeout = milliseconds{5000}) {
  return {.rank = rank, .world_size = world, .host = "127.0.0.1", .port = port, .timeout = timeout};
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(Rendezvous, BroadcastGatherAndBarrierAcrossFourProcesses) {
  const int port = free_port();
  const std::string id("\0unique id\xff", 11);  // binary, as NCCL's unique id is
  auto outcomes = run_ranks(4, [&](int rank) {
    Rendezvous rv(config(rank, 4, port));
    std::string got = rv.broadcast(rank == 0 ? id : "ignored");
    if (got != id) return std::string("wrong broadcast");
    rv.barrier();
    std::vector<std::string> all = rv.gather("rank" + std::to_string(rank) + "=" + std::to_string(rv.world_size()));
    rv.barrier();
    std::string joined;
    for (const std::string& one : all) joined += one + ";";
    return joined;
  });
  EXPECT_EQ(outcomes[0].exit_code, 0) << outcomes[0].text;
  EXPECT_EQ(outcomes[0].text, "rank0=4;rank1=4;rank2=4;rank3=4;");
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].exit_code, 0) << outcomes[static_cast<size_t>(r)].text;
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].text, "") << "only rank 0 gathers";
  }
}

TEST(Rendezvous, LargeBlobsArriveWhole) {
  const int port = free_port();
  const std::string big(3 << 20, 'x');
  auto outcomes = run_ranks(3, [&](int rank) {
    Rendezvous rv(config(rank, 3, port));
    std::string got = rv.broadcast(rank == 0 ? big : "");
    std::vector<std::string> all = rv.gather(std::string(static_cast<size_t>(rank + 1) << 20, 'y'));
    std::string sizes = std::to_string(got.size());
    for (const std::string& one : all) sizes += " " + std::to_string(one.size());
    return sizes;
  });
  EXPECT_EQ(outcomes[0].text, std::to_string(big.size()) + " 1048576 2097152 3145728");
  EXPECT_EQ(outcomes[1].text, std::to_string(big.size()));
  EXPECT_EQ(outcomes[2].exit_code, 0);
}

TEST(Rendezvous, OneRankNeedsNoSocket) {
  Rendezvous rv(config(0, 1, 0));
  EXPECT_EQ(rv.broadcast("x"), "x");
  EXPECT_EQ(rv.gather("y"), std::vector<std::string>{"y"});
  rv.barrier();
}

TEST(Rendezvous, RankOutsideTheWorldIsRefused) {
  EXPECT_THROW(Rendezvous(config(2, 2, 1)), RendezvousError);
  EXPECT_THROW(Rendezvous(config(0, 0, 1)), RendezvousError);
}

TEST(Rendezvous, RankThatDiesIsNamedOnEveryRank) {
  const int port = free_port();
  const auto start = Clock::now();
  auto outcomes = run_ranks(4, [&](int rank) {
    Rendezvous rv(config(rank, 4, port));
    if (rank == 2) ::_exit(7);  // crashes after the meeting
    rv.gather("figures");
    rv.barrier();
    return std::string("finished");
  });
  EXPECT_LT(seconds_since(start), 5.0) << "the end of a rank is seen at once, not at the timeout";
  EXPECT_EQ(outcomes[2].exit_code, 7);
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].exit_code, 1) << r;
    EXPECT_THAT(outcomes[static_cast<size_t>(r)].text, HasSubstr("rank 2 closed its connection")) << r;
  }
}

TEST(Rendezvous, RankThatNeverComesIsNamedWithinTheTimeout) {
  const int port = free_port();
  const auto start = Clock::now();
  auto outcomes = run_ranks(
      4, [&](int rank) { Rendezvous rv(config(rank, 4, port, milliseconds{1000})); return std::string("met"); },
      {2, 3});
  EXPECT_LT(seconds_since(start), 1.0 + 1.0 + 2.0) << "timeout, grace and slack";
  for (int r : {0, 1}) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].exit_code, 1) << r;
    EXPECT_THAT(outcomes[static_cast<size_t>(r)].text, HasSubstr("ranks 2, 3 did not arrive within 1 s")) << r;
  }
}

TEST(Rendezvous, RankZeroThatNeverComesIsNamed) {
  const int port = free_port();
  auto outcomes = run_ranks(
      2, [&](int rank) { Rendezvous rv(config(rank, 2, port, milliseconds{500})); return std::string("met"); }, {0});
  EXPECT_EQ(outcomes[1].exit_code, 1);
  EXPECT_THAT(outcomes[1].text, HasSubstr("rank 0 did not open 127.0.0.1:" + std::to_string(port) + " within 0.5 s"));
}

TEST(Rendezvous, RankThatHangsIsNamedAtTheTimeout) {
  const int port = free_port();
  const auto start = Clock::now();
  auto outcomes = run_ranks(3, [&](int rank) {
    Rendezvous rv(config(rank, 3, port, milliseconds{1000}));
    if (rank == 1) std::this_thread::sleep_for(milliseconds{2500});  // alive, but never reaches the gather
    rv.gather("figures");
    return std::string("finished");
  });
  EXPECT_LT(seconds_since(start), 2.5 + 2.0);
  EXPECT_EQ(outcomes[0].exit_code, 1);
  EXPECT_THAT(outcomes[0].text, HasSubstr("rank 1 did not arrive within 1 s during a gather"));
}

TEST(Rendezvous, RanksOutOfStepAreNamed) {
  const int port = free_port();
  auto outcomes = run_ranks(2, [&](int rank) {
    Rendezvous rv(config(rank, 2, port, milliseconds{2000}));
    if (rank == 0) rv.barrier();
    else rv.gather("figures");
    rv.barrier();
    return std::string("finished");
  });
  EXPECT_THAT(outcomes[0].text, HasSubstr("rank 1 is in a gather during a barrier: out of step"));
  EXPECT_THAT(outcomes[1].text, HasSubstr("rank 1 is in a gather during a barrier: out of step"));
}

TEST(Rendezvous, DisagreeingWorldSizesAreNamed) {
  const int port = free_port();
  auto outcomes = run_ranks(2, [&](int rank) {
    Rendezvous rv(config(rank, rank == 0 ? 2 : 3, port, milliseconds{2000}));
    return std::string("met");
  });
  EXPECT_THAT(outcomes[0].text, HasSubstr("rank 1 says the world has 3 ranks, rank 0 says 2"));
  EXPECT_THAT(outcomes[1].text, HasSubstr("rank 1 says the world has 3 ranks"));
}

// Between operations, while the ranks measure: rank 0 reads a gather that came early (and the next gather uses
// it), and its notice reaches a rank still measuring, whose notice() returns it.
TEST(Rendezvous, AnEarlyGatherIsReadAndANoticeReachesARankStillMeasuring) {
  const int port = free_port();
  auto outcomes = run_ranks(3, [&](int rank) {
    Rendezvous rv(config(rank, 3, port));
    const auto until = Clock::now() + milliseconds{3000};
    if (rank == 1) {
      rv.gather("early");
      return std::string("sent");
    }
    if (rank == 2) {
      std::optional<std::string> notice;
      while (!(notice = rv.notice()) && Clock::now() < until) std::this_thread::sleep_for(milliseconds{5});
      rv.gather("late");
      return notice.value_or("no notice");
    }
    std::vector<std::optional<std::string>> early;
    while (!(early = rv.early_gathers())[1] && Clock::now() < until) std::this_thread::sleep_for(milliseconds{5});
    if (early[2]) return std::string("rank 2 gathered before its notice");
    for (int r : {1, 2}) rv.notify(r, "stop: rank 1 failed");
    std::string joined = early[1].value_or("nothing early") + "|";
    for (const std::string& one : rv.gather("zero")) joined += one + ";";
    return joined;
  });
  EXPECT_EQ(outcomes[0].text, "early|zero;early;late;");
  EXPECT_EQ(outcomes[1].text, "sent");
  EXPECT_EQ(outcomes[2].text, "stop: rank 1 failed");
}

TEST(Rendezvous, ANoticeThatCrossesAnOperationIsDropped) {
  const int port = free_port();
  auto outcomes = run_ranks(2, [&](int rank) {
    Rendezvous rv(config(rank, 2, port));
    if (rank == 0) rv.notify(1, "a notice");
    return rv.broadcast(rank == 0 ? "the answer" : "");
  });
  EXPECT_EQ(outcomes[1].exit_code, 0) << outcomes[1].text;
  EXPECT_EQ(outcomes[1].text, "the answer");
}

TEST(Rendezvous, ARankThatDiesWhileTheOthersMeasureIsNamedAtOnce) {
  const int port = free_port();
  const auto start = Clock::now();
  auto outcomes = run_ranks(3, [&](int rank) {
    Rendezvous rv(config(rank, 3, port, milliseconds{10000}));
    if (rank == 2) ::_exit(7);
    for (const auto until = Clock::now() + milliseconds{8000}; Clock::now() < until;) {
      if (rank == 0) rv.early_gathers();
      else rv.notice();
      std::this_thread::sleep_for(milliseconds{5});
    }
    return std::string("nothing seen");
  });
  EXPECT_LT(seconds_since(start), 5.0) << "seen at once, not at the timeout";
  for (int r : {0, 1}) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].exit_code, 1) << r;
    EXPECT_THAT(outcomes[static_cast<size_t>(r)].text, HasSubstr("rank 2 closed its connection")) << r;
  }
}

}  // namespace
}  // namespace roofbench
