#include "thread_team.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace roofbench::kernels::cpu {
namespace {

void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

int threads_wanted() {
  if (const char* text = std::getenv("OMP_NUM_THREADS")) {
    const int wanted = std::atoi(text);
    if (wanted > 0) return wanted;
  }
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Spins for about a millisecond (runs of a sample follow each other far sooner), then lets other
// threads run: on a machine with more runnable threads than cores, a thread spinning for good would
// hold the core the thread it waits for needs.
class Backoff {
 public:
  void wait() {
    if (++spins_ < kSpinsBeforeYield) {
      spin_pause();
    } else {
      spins_ = 0;
      std::this_thread::yield();
    }
  }

 private:
  static constexpr int kSpinsBeforeYield = 1 << 14;
  int spins_ = 0;
};

// One parallel_for: its chunks are claimed one at a time by whichever thread comes first, the caller
// included, so a worker the scheduler has not run yet delays nothing: the caller takes its chunks.
struct Job {
  const std::function<void(int)>* chunk;
  int chunks;
  std::atomic<int> next{0};
  std::atomic<int> done{0};

  // Runs chunks until none is left unclaimed.
  void take_chunks() {
    for (int c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      (*chunk)(c);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

class Team {
 public:
  explicit Team(int size) : size_(size) {
    for (int index = 1; index < size_; ++index) workers_.emplace_back([this] { work(); });
  }
  ~Team() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  int size() const { return size_; }

  void keep_awake(int delta) { awake_.fetch_add(delta, std::memory_order_relaxed); }

  void run(int chunks, const std::function<void(int)>& chunk) {
    std::unique_lock<std::mutex> one_at_a_time(submit_, std::try_to_lock);
    if (chunks <= 1 || in_team_ || !one_at_a_time.owns_lock()) {
      for (int c = 0; c < chunks; ++c) chunk(c);
      return;
    }
    // A worker still holding an earlier job finds nothing left to claim in it, and never runs this
    // job's chunks twice: each job is its own object.
    auto job = std::make_shared<Job>();
    job->chunk = &chunk;
    job->chunks = chunks;
    job_.store(job, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    // Always: a worker may have seen no KeepAwake and be going to sleep just as one was made. The
    // standard library skips the system call when nobody waits.
    generation_.notify_all();
    job->take_chunks();
    for (Backoff backoff; job->done.load(std::memory_order_acquire) < chunks;) backoff.wait();
  }

 private:
  void work() {
    in_team_ = true;
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t current;
      for (Backoff backoff; (current = generation_.load(std::memory_order_acquire)) == seen;) {
        if (awake_.load(std::memory_order_relaxed) > 0)
          backoff.wait();
        else
          generation_.wait(seen, std::memory_order_acquire);
      }
      seen = current;
      if (stop_.load()) return;
      if (const std::shared_ptr<Job> job = job_.load(std::memory_order_acquire)) job->take_chunks();
    }
  }

  const int size_;
  std::vector<std::thread> workers_;
  std::mutex submit_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::shared_ptr<Job>> job_;
  std::atomic<int> awake_{0};
  std::atomic<bool> stop_{false};
  static thread_local bool in_team_;
};

thread_local bool Team::in_team_ = false;

Team& team() {
  static Team instance(threads_wanted());
  return instance;
}

}  // namespace

KeepAwake::KeepAwake() { team().keep_awake(+1); }
KeepAwake::~KeepAwake() { team().keep_awake(-1); }

int team_size() { return team().size(); }

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t begin, std::int64_t end, int thread)>& body) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const int threads = static_cast<int>(std::min<std::int64_t>(team_size(), std::max<std::int64_t>(1, n / grain)));
  const std::int64_t base = n / threads, extra = n % threads;
  // The first `extra` chunks take one iteration more, as OpenMP's static schedule does; `thread` is the
  // chunk's index, unique among the chunks running at once (what per-thread scratch needs).
  team().run(threads, [&](int t) {
    const std::int64_t begin = t * base + std::min<std::int64_t>(t, extra);
    body(begin, begin + base + (t < extra ? 1 : 0), t);
  });
}

}  // namespace roofbench::kernels::cpu
