// Compiled for sm_90a alone (roofbench_hopper_sm90a): whether its machine code loads on a device says
// whether this build can run the Hopper path there.
#include <cuda_runtime_api.h>

namespace roofbench::hopper::detail {

namespace {
__global__ void sm90a_probe_kernel() {}
}  // namespace

// True when the sm_90a image of this library loads on `device` (the current device is restored).
bool sm90a_code_loads(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return false;
  if (cudaSetDevice(device) != cudaSuccess) return false;
  cudaFuncAttributes attributes{};
  const bool loads = cudaFuncGetAttributes(&attributes, sm90a_probe_kernel) == cudaSuccess;
  (void)cudaGetLastError();  // a failed load must not surface as the next launch's error
  return cudaSetDevice(previous) == cudaSuccess && loads;
}

}  // namespace roofbench::hopper::detail
