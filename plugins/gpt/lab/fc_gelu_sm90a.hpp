// lab_fc_gelu_bf16 v5-v27: the MLP's fc layer as one sm_90a kernel, a wgmma GEMM whose epilogue writes both of the
// layer's outputs, so that no GELU pass reads the GEMM's output back (fc_gelu_sm90a.cu says how). v5 launches a block a
// 128 x 128 tile; v6 as many blocks as the GPU holds at once, each walking tiles; v7 walks 128 x 256 tiles on one block
// an SM with a deeper ring; v8 is v7 storing 16 bytes a thread; v9 gives each warp group every other 128 x 128 tile
// whole (ping-pong); v10 and v11 are v6 and v9 with a batched epilogue, v12 v11 on a wider table, v13 v12 with x's row
// blocks resident, v14 v12 storing through shared memory by TMA, v15 both, v16 v15 on pairs of blocks sharing each
// stage of w, v17 v14 with double-buffered staging, v18 v14 on v16's pairs, v19 v18 on a deeper ring, v20 v14 on
// clusters of four sharing x and w, v21 v14 asking for its bias before its products, v22 v14 on a five-stage ring,
// v23 v14 with GELU's lookups in the producer group's idle warps, v24 v23 with a staging box a half, v25 v14
// computing GELU by erff, v26 v14 with each warp storing its own rows, v27 v26 on two pairs of warp groups. Built
// for sm_90a alone where ROOFBENCH_HOPPER_90A is on; fc_gelu_sm90a_absent.cpp stands in otherwise, and every call
// then throws NotApplicable.
#pragma once

#include <cuda_runtime.h>

#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {

// Checks the device (NotApplicable off sm_90a or without sm_90a code), before the first fc_gelu_sm90a. Each
// version's kernel is configured (its shared memory, its register split checked) at its first launch, which must be
// outside any graph capture.
void fc_gelu_sm90a_configure();

// xw = x w^T (bf16, without the bias, as R2-R4's GEMM writes it) and gelu = GELU(bf16(xw + bias)) with the bits of
// gelu_forward_add_bias: x [rows, in], w [out, in], bias [out], xw and gelu [rows, out], all bf16. in a multiple of
// 64, out of 8; x, w, xw and gelu 16-byte aligned; else throws. v6-v27 give the same bits.
// `version` 5 to 27 (kFirstFcGeluSm90a..kLastFcGeluSm90a); another throws. v13, v15 and v16 take in <= 512.
inline constexpr int kFirstFcGeluSm90a = 5, kLastFcGeluSm90a = 27;
void fc_gelu_sm90a(int version, bf16* xw, bf16* gelu, const bf16* x, const bf16* w, const bf16* bias, int rows, int in,
                   int out, cudaStream_t stream);

// lab_fc_gelu_backward_bf16's sm_90a versions, 2, 3 (v2 on pairs of blocks sharing each stage of w), 4 (on clusters
// of four sharing dy and w) and 5 (its bias asked for before its products), 6 (v3 with GELU' computed, not looked
// up), 7 (v3 asking for xw early), 8 (the keeper, fc_gelu_backward_sm90a in layers.hpp: v3 on a packed table) and 9
// (v7 and v8), with the keeper's arguments and bits; another version throws.
inline constexpr int kFirstFcGeluBackwardSm90a = 2, kLastFcGeluBackwardSm90a = 9;
void fc_gelu_backward_sm90a(int version, bf16* dz, float* dbias, float* partials, const bf16* dy, const bf16* w,
                            const bf16* xw, const bf16* bias, int rows, int in, int out, cudaStream_t stream);

}  // namespace roofbench::gpt::cuda::lab
