// Test plugin `ranks`: CPU cases for roofbench started as several processes (tests/e2e/ranks_test.py).
//   sum    every process's vector summed through Context::exchange (DeviceNeed::cpu_ranks): its gate holds
//          only when every rank's vector arrived
//   scale  y = 2x on each rank alone (a case that is not a collective)
//   nap    a run sleeps a millisecond: a benchmark that lasts while a test ends a rank
// Test switches, read from the environment: ROOFBENCH_TEST_FAIL_RANK=r makes rank r's gates fail;
// ROOFBENCH_TEST_KILL_RANK=r makes rank r's nap kill its own roofbench process (the worker's parent).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

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
    unit_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::input));
    mine_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::input));
    sum_ = static_cast<float*>(ctx.alloc(n_ * sizeof(float), BufferRole::output));
    ctx.fill_random(unit_, n_, ElementType::f32);  // the same on every rank: the seed is the benchmark's
    const float weight = static_cast<float>(ctx.first_rank() + 1);
    for (std::size_t i = 0; i < n_; ++i) mine_[i] = weight * unit_[i];
  }
  void run(Context& ctx) override {
    const std::vector<std::string> all = ctx.exchange(std::string(reinterpret_cast<const char*>(mine_), n_ * sizeof(float)));
    std::fill(sum_, sum_ + n_, 0.0f);
    for (const std::string& blob : all) {
      if (blob.size() != n_ * sizeof(float)) throw Error("a rank sent " + std::to_string(blob.size()) + " bytes");
      std::vector<float> theirs(n_);
      std::memcpy(theirs.data(), blob.data(), blob.size());
      for (std::size_t i = 0; i < n_; ++i) sum_[i] += theirs[i];
    }
  }
  Work work() const override { return {.bytes = static_cast<double>(n_ * sizeof(float)), .items = 1, .item_name = "exchanges"}; }
  Check check(Context& ctx) override {
    const double world = ctx.world_size();
    const double wrong = switch_names_this_rank("ROOFBENCH_TEST_FAIL_RANK", ctx) ? 1.5 : 1.0;
    std::vector<double> reference(n_);
    for (std::size_t i = 0; i < n_; ++i) reference[i] = wrong * world * (world + 1) / 2 * static_cast<double>(unit_[i]);
    return {.rel_l2_error = relative_l2_error(sum_, reference.data(), n_)};
  }

 private:
  std::size_t n_;
  float *unit_ = nullptr, *mine_ = nullptr, *sum_ = nullptr;
};

class RankScaleCase final : public test_plugins::ScaleCase {
 public:
  using ScaleCase::ScaleCase;
  void setup(Context& ctx) override {
    if (switch_names_this_rank("ROOFBENCH_TEST_FAIL_RANK", ctx)) factor_ = 3.0f;
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
}

}  // namespace

ROOFBENCH_PLUGIN("ranks", describe)
