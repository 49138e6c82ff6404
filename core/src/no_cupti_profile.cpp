#include "kernel_profile.hpp"

namespace roofbench {

KernelProfile profile_kernels(const std::function<void()>&, int) {
  return {{}, 0, "this roofbench was built without CUPTI"};
}

}  // namespace roofbench
