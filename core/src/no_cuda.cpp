// The host built without CUDA: no GPUs, and it says why.
#include "device.hpp"

namespace roofbench {

std::vector<std::unique_ptr<Device>> make_cuda_devices(std::string& why_none) {
  why_none = "this roofbench was built without CUDA";
  return {};
}

int cuda_runtime_major_built() { return 0; }

std::unique_ptr<Timer> make_cuda_timer(const std::vector<Device*>&, std::function<void()>, const TimingOptions&) {
  throw Error("this roofbench was built without CUDA");
}

}  // namespace roofbench
