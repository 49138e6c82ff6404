// The wgmma kernel's entry points in a build without sm_90a code (ROOFBENCH_HOPPER_90A off): cuda_conv_sm90a.cu
// is not compiled, conv2d_implicit_gemm_wgmma_available is false on every device, and a launch says why.
#include "roofbench/kernels/cuda_conv.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::kernels {

std::string conv2d_implicit_gemm_wgmma_bf16_variant(const ConvShape&) { return "absent (no sm_90a code)"; }

void launch_conv2d_implicit_gemm_wgmma_bf16(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, const ConvShape&,
                                            cudaStream_t) {
  throw Error("cuda_conv: the wgmma kernel needs sm_90a code, which this build leaves out (ROOFBENCH_HOPPER_90A=OFF)");
}

}  // namespace roofbench::kernels
