// The threads the CPU kernels split their loops over (one per CPU the process may run on, or
// OMP_NUM_THREADS). Between loops the workers spin while any KeepAwake exists, so that a timed run
// never waits for a sleeping thread to be woken: with OpenMP's default wait policy a 1 us add on a
// loaded 2-core machine took 4.7-6.7 ms (a scheduler tick) in 5 runs of 8. Without a KeepAwake the
// workers sleep between loops (the host's ceilings, tests).
#pragma once

#include <cstdint>
#include <functional>

namespace roofbench::kernels::cpu {

// Held by a case from setup() to teardown(): its runs find the workers spinning.
class KeepAwake {
 public:
  KeepAwake();
  ~KeepAwake();
  KeepAwake(const KeepAwake&) = delete;
  KeepAwake& operator=(const KeepAwake&) = delete;
};

// Threads a loop may use, the calling one included.
int team_size();

// body(begin, end, thread) over [0, n) in contiguous chunks, at most one per thread, each of at least
// `grain` iterations (so a small loop runs on fewer threads, or on the caller alone); returns when every
// chunk is done. `thread` numbers the chunks from 0 (per-thread scratch). Chunks go to whichever thread
// claims them first, the caller included, so a worker the scheduler has not run yet costs nothing. A
// call made while another is in flight (from a worker, or from a second thread) runs serially on its
// caller.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t begin, std::int64_t end, int thread)>& body);

}  // namespace roofbench::kernels::cpu
