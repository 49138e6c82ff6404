#include "profile_observer.hpp"

#include <algorithm>
#include <chrono>

#include "kernel_profile.hpp"

namespace roofbench {

void KernelProfileObserver::end(Measurement& r, Timer& timer) {
  const auto start = std::chrono::steady_clock::now();
  const int launches = std::max(r.runs_per_sample, 1);
  r.profile = profile_kernels([&] { timer.run_untimed(launches); }, passes_);
  scale_per_run(r.profile, 1.0 / launches);
  r.phases.profile += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace roofbench
