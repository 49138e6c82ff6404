// Test plugin `ranks`: CPU cases for roofbench started as several processes (tests/e2e/ranks_test.py).
//   sum    every process's vector summed through Context::exchange (DeviceNeed::cpu_ranks): its gate holds
//          only when every rank's vector arrived, and when every rank drew other values
//   scale  y = 2x on each rank alone (a case that is not a collective)
//   nap    a run sleeps a millisecond: a benchmark that lasts while a test ends a rank
//   stall  y = 2x on ranks that work together, one of which a test stops mid-timing (StallCase)
//   fits   y = 2x on ranks that work together at n = 1024, 2048 and 4096, saying every rank's worker process
//          (the fact worker_pids); ROOFBENCH_TEST_NOT_APPLICABLE_RANK=r makes rank r find n:2048 not applicable
// Test switches, read from the environment: ROOFBENCH_TEST_FAIL_RANK=r makes rank r's gates fail;
// ROOFBENCH_TEST_KILL_RANK=r makes rank r's nap kill its own roofbench process (the worker's parent);
// ROOFBENCH_TEST_CRASH_RANK=r makes rank r's sum crash its worker in its first run (the gate's);
// ROOFBENCH_TEST_IMPLAUSIBLE_RANK=r makes rank r's scale and stall claim 1e9 times the work they do (faster than
// the CPU); ROOFBENCH_TEST_SLOW_TEARDOWN_RANK=r makes rank r's stall take a second over its teardown.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <roofbench/case_support/process_sum.hpp>

#include "../scale_case.hpp"

namespace {

using namespace roofbench;

bool switch_names_this_rank(const char* variable, const Context& ctx) {
  const char* value = std::getenv(variable);
  return value && *value && std::atoi(value) == ctx.first_rank();
}

class SumCase final : public Case {
 public:
  explicit SumCase(std::size_t n) : n_(n) {}
  void setup(Context& ctx) override {
    mine_.resize(n_);
    ctx.fill_random(mine_.data(), n_, ElementType::f32);  // every rank draws its own values
  }
  void run(Context& ctx) override {
    if (switch_names_this_rank("ROOFBENCH_TEST_CRASH_RANK", ctx)) ::raise(SIGSEGV);
    sum_ = case_support::sum_over_processes(ctx, mine_);
  }
  Work work() const override { return {.bytes = static_cast<double>(n_ * sizeof(float)), .items = 1, .item_name = "exchanges"}; }
  // The reference sums every rank's values in fp64, in rank order, as each rank sent them; two ranks that drew
  // the same values fail the gate (a contribution missing or counted twice would then go unseen).
  Check check(Context& ctx) override {
    if (sum_.size() != n_) throw Error("check() before run()");
    const std::vector<std::string> all = ctx.exchange(std::string(reinterpret_cast<const char*>(mine_.data()), n_ * sizeof(float)));
    const double wrong = switch_names_this_rank("ROOFBENCH_TEST_FAIL_RANK", ctx) ? 1.5 : 1.0;
    std::vector<double> reference(n_, 0.0);
    std::vector<float> theirs(n_);
    Check check;
    for (std::size_t p = 0; p < all.size(); ++p) {
      if (all[p].size() != n_ * sizeof(float)) throw Error("rank " + std::to_string(p) + " sent another size");
      std::memcpy(theirs.data(), all[p].data(), all[p].size());
      for (std::size_t i = 0; i < n_; ++i) reference[i] += wrong * static_cast<double>(theirs[i]);
      if (p > 0 && all[p] == all[0]) {
        check.passed_extra = false;
        check.detail = "rank " + std::to_string(p) + " drew the same values as rank 0";
      }
    }
    check.rel_l2_error = relative_l2_error(sum_.data(), reference.data(), n_);
    return check;
  }

 private:
  std::size_t n_;
  std::vector<float> mine_, sum_;  // on the CPU the host's memory is plain memory
};

// A ScaleCase whose work() claims 1e9 times what its run() does on the rank ROOFBENCH_TEST_IMPLAUSIBLE_RANK
// names (claim_if_named, in setup): an impossible figure on that rank only.
class ClaimingScaleCase : public test_plugins::ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  Work work() const override {
    Work w = ScaleCase::work();
    w.flops *= claimed_;
    w.bytes *= claimed_;
    w.bytes_read *= claimed_;
    return w;
  }

 protected:
  void claim_if_named(Context& ctx) {
    if (switch_names_this_rank("ROOFBENCH_TEST_IMPLAUSIBLE_RANK", ctx)) claimed_ = 1e9;
  }

 private:
  double claimed_ = 1;  // how much more work() claims than run() does
};

class RankScaleCase final : public ClaimingScaleCase {
 public:
  using ClaimingScaleCase::ClaimingScaleCase;
  void setup(Context& ctx) override {
    if (switch_names_this_rank("ROOFBENCH_TEST_FAIL_RANK", ctx)) factor_ = 3.0f;
    claim_if_named(ctx);
    ScaleCase::setup(ctx);
  }
};

class NapCase final : public test_plugins::ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void setup(Context& ctx) override {
    if (switch_names_this_rank("ROOFBENCH_TEST_KILL_RANK", ctx)) ::kill(::getppid(), SIGKILL);
    ScaleCase::setup(ctx);
  }
  void run(Context& ctx) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ScaleCase::run(ctx);
  }
};

// Its ranks work together; its fifth run (in the warm-up) stops on one rank: ROOFBENCH_TEST_THROW_RANK=r throws
// there, ROOFBENCH_TEST_DIE_RANK=r kills its roofbench there. The other ranks then wait for it as in a
// collective on a GPU: a minute's sleep inside the run, outside any exchange.
class StallCase final : public ClaimingScaleCase {
 public:
  using ClaimingScaleCase::ClaimingScaleCase;
  void setup(Context& ctx) override {
    claim_if_named(ctx);
    slow_teardown_ = switch_names_this_rank("ROOFBENCH_TEST_SLOW_TEARDOWN_RANK", ctx);
    ScaleCase::setup(ctx);
  }
  void teardown(Context&) override {
    if (slow_teardown_) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  void run(Context& ctx) override {
    if (++runs_ == 5) {
      if (switch_names_this_rank("ROOFBENCH_TEST_THROW_RANK", ctx)) throw Error("this rank failed mid-timing");
      if (switch_names_this_rank("ROOFBENCH_TEST_DIE_RANK", ctx)) ::kill(::getppid(), SIGKILL);
      if (std::getenv("ROOFBENCH_TEST_THROW_RANK") || std::getenv("ROOFBENCH_TEST_DIE_RANK"))
        std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    ScaleCase::run(ctx);
  }

 private:
  int runs_ = 0;
  bool slow_teardown_ = false;
};

// Its ranks work together; each says its worker's process id through the exchange, so that a test sees whether
// any rank's worker was started again between two benchmarks.
class FitsCase final : public test_plugins::ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void setup(Context& ctx) override {
    if (n_ == 2048 && switch_names_this_rank("ROOFBENCH_TEST_NOT_APPLICABLE_RANK", ctx))
      throw NotApplicable("n:2048 does not apply to this rank's device");
    ScaleCase::setup(ctx);
  }
  Check check(Context& ctx) override {
    pids_.clear();
    for (const std::string& pid : ctx.exchange(std::to_string(::getpid()))) pids_ += (pids_.empty() ? "" : ",") + pid;
    return ScaleCase::check(ctx);
  }
  std::vector<Figure> figures() const override { return {Figure("worker_pids", pids_)}; }

 private:
  std::string pids_;
};

void describe(Plugin& plugin) {
  plugin.name = "ranks";
  plugin.description = "test plugin: cases for ranks in several processes";
  CaseSpec sum = test_plugins::scale_spec("sum", "every rank's vector summed through Context::exchange",
                                          {Axis::ints("n", {1024})}, [](std::size_t n) { return std::make_unique<SumCase>(n); });
  sum.device = DeviceNeed::cpu_ranks(2);
  plugin.add(std::move(sum));
  plugin.add(test_plugins::scale_spec("scale", "y = 2x on each rank", {Axis::ints("n", {1024})},
                                      [](std::size_t n) { return std::make_unique<RankScaleCase>(n, 2.0f); }));
  plugin.add(test_plugins::scale_spec("nap", "y = 2x after a millisecond's sleep", {Axis::ints("n", {1024})},
                                      [](std::size_t n) { return std::make_unique<NapCase>(n, 2.0f); }));
  CaseSpec stall = test_plugins::scale_spec("stall", "y = 2x on ranks that work together; a test stops one mid-timing",
                                            {Axis::ints("n", {1024})}, [](std::size_t n) { return std::make_unique<StallCase>(n, 2.0f); });
  stall.device = DeviceNeed::cpu_ranks(2);
  plugin.add(std::move(stall));
  CaseSpec fits = test_plugins::scale_spec("fits", "y = 2x on ranks that work together; n:2048 may not apply on one",
                                           {Axis::ints("n", {1024, 2048, 4096})},
                                           [](std::size_t n) { return std::make_unique<FitsCase>(n, 2.0f); });
  fits.device = DeviceNeed::cpu_ranks(2);
  plugin.add(std::move(fits));
}

}  // namespace

ROOFBENCH_PLUGIN("ranks", describe)
