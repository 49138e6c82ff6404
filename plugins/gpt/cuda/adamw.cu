// torch.optim.AdamW over a range of the flat parameter array. The eager path launches it once per
// parameter tensor (PyTorch's per-tensor loop); the fused path once over all 18.9M parameters.
#include "common.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda {
namespace {

// The bias corrections depend on the step, which lives on the device (a replayed graph must see it
// advance), so each block computes them once in double from the counter.
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, std::size_t n, AdamW opt,
                             const unsigned long long* step_counter) {
  __shared__ double corrections[2];  // a plain array: __shared__ forbids the struct's initialisers
  if (threadIdx.x == 0) {
    const double t = static_cast<double>(*step_counter);
    corrections[0] = 1 - pow(opt.beta1, t);
    corrections[1] = 1 - pow(opt.beta2, t);
  }
  __syncthreads();
  AdamWBiasCorrection local;
  local.first = corrections[0];
  local.second = corrections[1];
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    float p = params[i], mi = m[i], vi = v[i];
    adamw_update<float>(p, grads[i], mi, vi, opt, local);
    params[i] = p;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void adamw(float* params, const float* grads, float* m, float* v, std::size_t n, const AdamW& opt,
           const unsigned long long* step_counter, cudaStream_t stream) {
  adamw_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(params, grads, m, v, n, opt,
                                                                          step_counter);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
