#include "thread_team.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
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

class Team {
 public:
  explicit Team(int size) : size_(size) {
    for (int index = 1; index < size_; ++index) workers_.emplace_back([this, index] { work(index); });
  }
  ~Team() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  int size() const { return size_; }

  void keep_awake(int delta) { awake_.fetch_add(delta, std::memory_order_relaxed); }

  void run(int threads, const std::function<void(int)>& chunk) {
    std::unique_lock<std::mutex> one_at_a_time(submit_, std::try_to_lock);
    if (threads <= 1 || in_team_ || !one_at_a_time.owns_lock()) {
      for (int t = 0; t < threads; ++t) chunk(t);
      return;
    }
    job_ = &chunk;
    job_threads_ = threads;
    // Every worker answers, those without a chunk too: one still looking at the previous job could
    // otherwise read this job's fields and run it twice.
    pending_.store(size_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    // Always: a worker may have seen no KeepAwake and be going to sleep just as one was made. The
    // standard library skips the system call when nobody waits.
    generation_.notify_all();
    chunk(0);
    while (pending_.load(std::memory_order_acquire) != 0) spin_pause();
  }

 private:
  void work(int index) {
    in_team_ = true;
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t current;
      while ((current = generation_.load(std::memory_order_acquire)) == seen) {
        if (awake_.load(std::memory_order_relaxed) > 0)
          spin_pause();
        else
          generation_.wait(seen, std::memory_order_acquire);
      }
      seen = current;
      if (stop_.load()) return;
      if (index < job_threads_) (*job_)(index);
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  const int size_;
  std::vector<std::thread> workers_;
  std::mutex submit_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> awake_{0};
  std::atomic<bool> stop_{false};
  // Written by run() before generation_ is bumped (release), read by workers after they see it (acquire).
  const std::function<void(int)>* job_ = nullptr;
  int job_threads_ = 0;
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
  // The first `extra` chunks take one iteration more, as OpenMP's static schedule does.
  team().run(threads, [&](int t) {
    const std::int64_t begin = t * base + std::min<std::int64_t>(t, extra);
    body(begin, begin + base + (t < extra ? 1 : 0), t);
  });
}

}  // namespace roofbench::kernels::cpu
