#include "kernel_time_observer.hpp"

#include <algorithm>
#include <chrono>

#include "kernel_time.hpp"
#include "profile_observer.hpp"

namespace roofbench {

void KernelTimeObserver::end(Measurement& r, Timer& timer) {
  if (kind_ != DeviceKind::cuda) {
    r.kernel_time.error = "CUPTI records GPU kernels only, and this case ran on the CPU";
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int runs = std::max(r.runs_per_sample, 1);
  r.kernel_time = kernel_time_of(trace_kernels([&] { timer.run_untimed(runs); }, samples_, agree_across(together_)), runs);
  r.phases.profile += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace roofbench
