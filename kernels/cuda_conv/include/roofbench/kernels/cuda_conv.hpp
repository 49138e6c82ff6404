// Hand-written implicit-GEMM convolutions for CUDA in the llm.c spirit, bf16 in and out, fp32 accumulation on
// tensor cores, to set beside cuDNN on the same shapes: one through WMMA for any GPU, one on Hopper's wgmma.
//
// The convolution is the GEMM Y (M x K) = A (M x RSC) B (RSC x K) with M = N Ho Wo, where row m of A is
// the receptive field of output pixel m gathered from x on the fly (never materialised) and B is the
// filter. x is NHWC, w is KRSC (cuDNN's NHWC filter format), y is NHWC.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <string>

#include "roofbench/kernels/conv_reference.hpp"

namespace roofbench::kernels {

// Only enqueues on `stream` (graph-capturable); throws roofbench::Error when the launch is rejected or
// an index would overflow. Any shape works: C % 8 == 0 (every ResNet-50 layer but the 3-channel stem)
// takes 16-byte asynchronous copies, other shapes an element-wise gather.
void launch_conv2d_implicit_gemm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                      const ConvShape& shape, cudaStream_t stream);

// Which tile configuration the launch picks for `shape`, for the results (e.g. "wmma 128x64x32, 3 stages, cp.async").
std::string conv2d_implicit_gemm_bf16_variant(const ConvShape& shape);

// The same convolution on Hopper's warp-group MMA (wgmma, sm_90a code), on a persistent grid: a producer warp
// group brings slabs of 64 reduction elements of x and w into a ring of swizzled tiles (64 channels of a tap by
// cp.async and w by TMA where C % 64 == 0, both by TMA for a 1x1 convolution at stride 1, element by element for
// any other C with R S C <= 2048, the stem's 3 channels), two consumer warp groups multiply them. It takes
// K % 8 == 0 and 16-byte aligned tensors.
// Only enqueues on `stream`; throws roofbench::Error when it cannot run (the reason as below).
void launch_conv2d_implicit_gemm_wgmma_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                            const ConvShape& shape, cudaStream_t stream);

// The longest reduction R S C the wgmma kernel's element gather (C % 64 != 0) takes: its table of taps keeps
// two ints of shared memory per reduction index.
inline constexpr std::int64_t kWgmmaMaxElementReduction = 2048;

// Why the wgmma kernel cannot compute `shape`, or "" when it can (shape limits only, not the device).
std::string conv2d_implicit_gemm_wgmma_unsupported(const ConvShape& shape);

// Whether `device` runs the wgmma kernel: compute capability 9.0 and a build with sm_90a code
// (roofbench::hopper::hopper_path_available). Never throws.
bool conv2d_implicit_gemm_wgmma_available(int device);

// The wgmma kernel's tile configuration for `shape`, for the results.
std::string conv2d_implicit_gemm_wgmma_bf16_variant(const ConvShape& shape);

}  // namespace roofbench::kernels
