#include "profile_observer.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>


namespace roofbench {

PassAgreement agree_across(const RankWorld* together) {
  if (!together) return {};
  return [together](const std::string& own) {
    const std::vector<std::string> all = together->exchange(own);
    if (!own.empty()) return own;
    for (std::size_t p = 0; p < all.size(); ++p)
      if (!all[p].empty()) return "rank " + std::to_string(p) + ": " + all[p];
    return std::string();
  };
}

void KernelProfileObserver::end(Measurement& r, Timer& timer) {
  const auto start = std::chrono::steady_clock::now();
  const int launches = std::max(r.runs_per_sample, 1);
  r.profile = profile_kernels([&] { timer.run_untimed(launches); }, passes_, agree_across(together_));
  scale_per_run(r.profile, 1.0 / launches);
  r.phases.profile += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace roofbench
