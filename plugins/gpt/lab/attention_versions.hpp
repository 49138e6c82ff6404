// The fused attention's versions the kernel lab keeps, as rows of one table per precision: the lab's own (v1 on fp32
// tensors, attention_v1.cu; on bf16 ones v7, attention_v7.cu; v9, the bf16 keeper's kernels off the sm_90a path; v10
// and v11, attention_v10.cu, sm_90a forwards with v9's backward; v12, v11's forward with an sm_90a backward of its own,
// attention_v12.cu; v13, v9's forward with v12's backward; v14, v9's forward with an sm_90a backward a head a warp
// group, attention_v14.cu; v15, an sm_90a forward a head a warp group, attention_v15.cu, with v12's backward; v16,
// v15's forward (v9's where a batch's heads are too few for its grid) with v14's backward; v17, the same forward with
// v14's backward loading the next head's v and dout a phase earlier, attention_v17.cu; v18, the same forward with v17's
// backward scaling the head's lse once its boxes have landed, attention_v18.cu; v19, v15's forward with its loads
// moved, attention_v19.cu, and v17's backward; v20, v19's forward with v18's backward; v21, v18 with its backward
// fetching dq's RoPE factors under the dq product, attention_v21.cu; v22, v18's kernels with the preparation's bias and
// RoPE factors fetched by 16-byte loads, attention_v22.cu; v23 and v24, v22 with its forward at four blocks an SM,
// attention_v23.cu; v25, v22 with its backward storing dq from the registers, attention_v25.cu; v26, v22's kernels
// without the L2 prefetch of the next head's boxes, attention_v26.cu; v27, v26 with its backward asking the L1 for the
// RoPE factors that rotate dk and dq back, and v28, v27 with the next head's boxes asked of the L2 half a head ahead,
// attention_v27.cu; v30, v29 with its backward loading the next head's out half a phase earlier, and v31, v30 without a
// block barrier for it, attention_v30.cu; v32, v29 with its backward loading each head's q a head ahead into a tile of
// its own, v33, v32 with both query halves' dq products issued at once, v34, v29 with both query halves' dq products
// issued at once, v35, v34 with key half 1's scores issued before key half 0's gradients are stored, v36, v34 with dq
// staged in dS^T's first tile and the next head's q loaded with its v and dout, v37, v34 with dk's and dq's RoPE
// factors fetched under their products, v38, v37 with them from the table's lane-ordered copy, v39, v34 with a masked
// chunk's exponents dropped by a select, v40, v38 and v39 together, v41, v40 with dk's factors fetched as v37's, and
// v42, v38 with that select in key half 1 alone, attention_v32.cu; v43, v38 with delta from the scores, out unread,
// v45, v44 with a head's rows landing in two parts, v46, v44 with a branch on whether a chunk is masked, and v47, v45
// and v46 together, attention_v43.cu; v29, the keeper's forward with v26's backward, attention_v26.cu) and the keepers
// the trainers run (v8 and v44, layers.hpp's fused_attention_forward and _backward: v44's forward is v29's, v26's
// loading each head's q a head ahead into a tile of its own, its backward v43's with v39's select; v44's row refuses
// devices without the sm_90a path). sm_90a code runs on compute capability 9.0 alone; a row that needs it refuses other
// devices. Every row has the keepers' contract (layers.hpp): forward writes out and lse, backward dqkv; configure runs
// once, outside any capture. plugins/gpt/README.md keeps the retired versions' figures.
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>

#include "layers.hpp"

namespace roofbench::gpt::cuda::lab {

// A lab row's configure (the attention versions' and lab_attention_qkv_bias_bf16's): each step in order, the
// sm_90a ones first, so that off sm_90a the refusal names the first kernel the row cannot run.
template <void (*... kSteps)()>
void configure_in_order() {
  (kSteps(), ...);
}

template <typename Elem>
struct AttentionVersion {
  const char* name;    // the lab's axis value, "v1"
  const char* kernel;  // the benchmark's "kernel" fact
  bool keeper;         // run by a rung
  void (*configure)();
  AttentionForward<Elem>* forward;
  AttentionBackward<Elem>* backward;
};

// lab_attention's rows (v1, v8) and lab_attention_bf16's (v7, v9 .. v44), in the axis's order.
std::span<const AttentionVersion<float>> fp32_attention_versions();
std::span<const AttentionVersion<bf16>> bf16_attention_versions();
// The row named `name` ("v7"); throws roofbench::Error naming the table's versions when there is none.
const AttentionVersion<float>& fp32_attention_version(const std::string& name);
const AttentionVersion<bf16>& bf16_attention_version(const std::string& name);

// The lab's own versions' launchers.
void attention_v1_configure();
AttentionForward<float> attention_v1_forward;
AttentionBackward<float> attention_v1_backward;
void attention_v7_configure();
AttentionForward<bf16> attention_v7_forward;
AttentionBackward<bf16> attention_v7_backward;

// v10 (attention_v10.cu, sm_90a): the forward on TMA and wgmma, the backward v9's. configure throws
// NotApplicable unless the device runs this build's sm_90a code (hopper_path_available).
void attention_v10_configure();
AttentionForward<bf16> attention_v10_forward;
// v11 (attention_v10.cu too): v10's forward persistent, a producer warp group's TMA loads filling a ring of two
// head stages while two consumer warp groups compute; the backward v9's. configure as v10's.
void attention_v11_configure();
AttentionForward<bf16> attention_v11_forward;
// v12's backward (attention_v12.cu, sm_90a): persistent on TMA and wgmma, one block of two warp groups an SM
// computing a whole head while the next head's rows land; rows v12, v13 and v15 run it. configure (this backward
// alone) as v10's.
void attention_v12_backward_configure();
AttentionBackward<bf16> attention_v12_backward;
// v14's backward (attention_v14.cu, sm_90a): v12's steps with a whole head in one warp group, two blocks an SM,
// each walking its own heads; rows v14 (on v9's forward) and v16 (on v15's or v9's) run it. configure (this
// backward alone) as v10's.
void attention_v14_backward_configure();
AttentionBackward<bf16> attention_v14_backward;
// v15's forward (attention_v15.cu, sm_90a): v10's arithmetic with a whole head in one warp group, three blocks an
// SM, each walking its own heads; row v15 runs it at any batch. attention_v15_or_v9_forward runs it where a batch's
// heads number at least kSm90aForwardMinRounds per block of its grid and v9's forward below (the keeper's forward
// until v22; rows v16, v17, v18 and v21): configure that with fused_attention_v9_configure too. configure (this
// forward alone) as v10's.
void attention_v15_forward_configure();
AttentionForward<bf16> attention_v15_forward;
AttentionForward<bf16> attention_v15_or_v9_forward;
// v17's backward (attention_v17.cu, sm_90a): v14's with the next head's v and dout loaded during this head's
// query phase; rows v17 (on v15's or v9's forward) and v19 (on v19's) run it. configure (this backward alone) as
// v10's.
void attention_v17_backward_configure();
AttentionBackward<bf16> attention_v17_backward;
// v18's backward (attention_v18.cu, sm_90a): v17's with the head's lse held across the wait for its boxes and the
// next head's lse asked of the L2 with them; rows v18 (on v15's or v9's forward) and v20 (on v19's) run it.
// configure (this backward alone) as v10's.
void attention_v18_backward_configure();
AttentionBackward<bf16> attention_v18_backward;

// v19's forward (attention_v19.cu, sm_90a): v15's with a head's q and k loaded during the head before's half 1
// and its v landing during half 0's scores; rows v19 (with v17's backward) and v20 (with v18's) run it.
// configure (this forward alone) as v10's.
void attention_v19_forward_configure();
AttentionForward<bf16> attention_v19_forward;

// v21's backward (attention_v21.cu, sm_90a): v18's with each query half's RoPE factors, which rotate dq back,
// fetched while the tensor cores compute dq; row v21 runs it on v15's or v9's forward. configure (this backward
// alone) as v10's.
void attention_v21_backward_configure();
AttentionBackward<bf16> attention_v21_backward;

// v22 (attention_v22.cu, sm_90a): v18's kernels with each thread's bias and RoPE factors fetched by 16-byte loads
// (the keeper's until v26); its forward v9's where a batch's heads are too few for its grid, as the keeper
// chooses. Rows v23 and v24 run its backward, row v25 its forward. configure sets up both kernels and v9's.
void attention_v22_configure();
AttentionForward<bf16> attention_v22_forward;
AttentionBackward<bf16> attention_v22_backward;

// v23 and v24 (attention_v23.cu, sm_90a): v22's forward at four blocks an SM, v24's fetching the bias and RoPE
// factors once the boxes have landed, with v9's forward where v22's would be; rows v23 and v24 run them with
// v22's backward (attention_v22_backward). configure sets up the forward, v22's kernels and v9's.
void attention_v23_configure();
void attention_v24_configure();
AttentionForward<bf16> attention_v23_forward;
AttentionForward<bf16> attention_v24_forward;

// v25's backward (attention_v25.cu, sm_90a): v22's with dq stored from the registers, so the next head's q loads
// with its v and dout during the query phase; row v25 runs it on v22's forward. configure (this backward alone) as
// v10's.
void attention_v25_backward_configure();
AttentionBackward<bf16> attention_v25_backward;

// v27's backward (attention_v27.cu, sm_90a): v26's with the RoPE factors that rotate dk and dq back asked of the
// L1 ahead of their loads; row v27 runs it on v26's forward. configure (this backward alone) as v10's.
void attention_v27_backward_configure();
AttentionBackward<bf16> attention_v27_backward;

// v28 (attention_v27.cu, sm_90a): v27's backward and v26's forward, each asking the L2 for the next head's boxes
// half a head ahead of their loads; its forward v9's where a batch's heads are too few for its grid, as the
// keeper chooses. configure sets up both kernels and v9's.
void attention_v28_configure();
AttentionForward<bf16> attention_v28_forward;
AttentionBackward<bf16> attention_v28_backward;

// v30's backward (attention_v30.cu, sm_90a): v26's with the next head's out loaded as soon as query half 0 has
// read its tile, with the early boxes instead of the late ones; row v30 runs it on the keeper's forward (v29's).
// configure (this backward alone) as v10's.
void attention_v30_backward_configure();
AttentionBackward<bf16> attention_v30_backward;
// v31's backward (attention_v30.cu, sm_90a): v30's with that load issued once query half 0's dq product has
// completed, with no block barrier between the halves; row v31 runs it on the keeper's forward. configure as
// v30's.
void attention_v31_backward_configure();
AttentionBackward<bf16> attention_v31_backward;

// v32's backward (attention_v32.cu, sm_90a): v26's with each head's q loaded a head ahead into a tile of its own;
// row v32 runs it on the keeper's forward (v29's). Each configure below sets up its version's backward alone.
void attention_v32_backward_configure();
AttentionBackward<bf16> attention_v32_backward;

// v33's backward (attention_v32.cu, sm_90a): v32's with both query halves' dq products issued at once; row v33 runs
// it on the keeper's forward.
void attention_v33_backward_configure();
AttentionBackward<bf16> attention_v33_backward;

// v34's backward (attention_v32.cu, sm_90a; the keeper's until v38): v26's with both query halves' dq products issued
// at once; row v34 runs it on the keeper's forward. The same summing dqkv's columns (lab_attention_qkv_bias_bf16's
// v3). configure sets up both.
void attention_v34_backward_configure();
AttentionBackward<bf16> attention_v34_backward;
AttentionBackwardAndBiasGradient attention_v34_backward_and_bias_gradient;

// v35's backward (attention_v32.cu, sm_90a): v34's with key half 1's scores issued before key half
// 0's dv and dk are stored; row v35 runs it on the keeper's forward.
void attention_v35_backward_configure();
AttentionBackward<bf16> attention_v35_backward;

// v36's backward (attention_v32.cu, sm_90a): v34's with dq staged in dS^T's first tile, so the next head's q loads
// with its v and dout; row v36 runs it on the keeper's forward.
void attention_v36_backward_configure();
AttentionBackward<bf16> attention_v36_backward;

// v37's backward (attention_v32.cu, sm_90a): v34's with dk's and dq's RoPE factors fetched while the tensor cores
// compute dk and dq; row v37 runs it on the keeper's forward. The same summing dqkv's columns as it stores them,
// then column_finish (lab_attention_qkv_bias_bf16's v4). configure sets up both.
void attention_v37_backward_configure();
AttentionBackward<bf16> attention_v37_backward;

AttentionBackwardAndBiasGradient attention_v37_backward_and_bias_gradient;

// v38's backward (attention_v32.cu, sm_90a; the keeper's until v44): v37's with those factors from the RoPE table's
// lane-ordered copy, which rope must have (else an Error); row v38 runs it on the keeper's forward. The same summing
// dqkv's columns (lab_attention_qkv_bias_bf16's v5). configure sets up both.
void attention_v38_backward_configure();
AttentionBackward<bf16> attention_v38_backward;
AttentionBackwardAndBiasGradient attention_v38_backward_and_bias_gradient;

// v39's backward (attention_v32.cu, sm_90a): v34's with a masked chunk's exponents computed for every pair and the
// masked ones dropped by a select, not branched around; row v39 runs it on the keeper's forward. The same summing
// dqkv's columns (lab_attention_qkv_bias_bf16's v6). configure sets up both.
void attention_v39_backward_configure();
AttentionBackward<bf16> attention_v39_backward;
AttentionBackwardAndBiasGradient attention_v39_backward_and_bias_gradient;

// v40's backward (attention_v32.cu, sm_90a): v38's and v39's changes together, and v41's, v40's with dk's factors
// fetched as v37's; both need rope's lane-ordered copy (else an Error); rows v40 and v41 run them on the keeper's
// forward. The same summing dqkv's columns (lab_attention_qkv_bias_bf16's v7 and v8). Each configure sets up both of
// its kernels.
void attention_v40_backward_configure();
AttentionBackward<bf16> attention_v40_backward;
AttentionBackwardAndBiasGradient attention_v40_backward_and_bias_gradient;
void attention_v41_backward_configure();
AttentionBackward<bf16> attention_v41_backward;
AttentionBackwardAndBiasGradient attention_v41_backward_and_bias_gradient;

// v42's backward (attention_v32.cu, sm_90a): v38's with v39's select in key half 1 alone; it needs rope's lane-ordered
// copy (else an Error); row v42 runs it on the keeper's forward. The same summing dqkv's columns
// (lab_attention_qkv_bias_bf16's v9). Its configure sets up both of its kernels.
void attention_v42_backward_configure();
AttentionBackward<bf16> attention_v42_backward;
AttentionBackwardAndBiasGradient attention_v42_backward_and_bias_gradient;

// v43's backward (attention_v43.cu, sm_90a): v38's with each row's delta taken from its scores (rowsum(P dP), in a
// query phase run first that also makes dq), so out is never read; it needs rope's lane-ordered copy (else an Error);
// row v43 runs it on the keeper's forward. The keeper's backward, v44's, is this walk with the key phase's masked
// exponents dropped by a select.
void attention_v43_backward_configure();
AttentionBackward<bf16> attention_v43_backward;

// v45's backward (attention_v43.cu, sm_90a): the keeper's, v44's, with a head's q, k and v landing in two parts, rows
// 0 .. 63 (all that query half 0 reads) loaded once the head before has ended its key half 0; it needs rope's
// lane-ordered copy (else an Error); row v45 runs it on the keeper's forward. The same summing dqkv's columns
// (lab_attention_qkv_bias_bf16's v11). configure sets up both.
void attention_v45_backward_configure();
AttentionBackward<bf16> attention_v45_backward;
AttentionBackwardAndBiasGradient attention_v45_backward_and_bias_gradient;

// v46's backward (attention_v43.cu, sm_90a): the keeper's, v44's, with each key-phase chunk's element-wise step chosen
// by a branch on whether the chunk is masked (no compare in the unmasked ones); it needs rope's lane-ordered copy (else
// an Error); row v46 runs it on the keeper's forward. The same summing dqkv's columns (lab_attention_qkv_bias_bf16's
// v12). configure sets up both.
void attention_v46_backward_configure();
AttentionBackward<bf16> attention_v46_backward;
AttentionBackwardAndBiasGradient attention_v46_backward_and_bias_gradient;

// v47's backward (attention_v43.cu, sm_90a): v45's two-part loads with v46's branch on whether a chunk is masked; it
// needs rope's lane-ordered copy (else an Error); row v47 runs it on the keeper's forward. The same summing dqkv's
// columns (lab_attention_qkv_bias_bf16's v13). configure sets up both.
void attention_v47_backward_configure();
AttentionBackward<bf16> attention_v47_backward;
AttentionBackwardAndBiasGradient attention_v47_backward_and_bias_gradient;

// v26's forward (attention_v26.cu, sm_90a; the keeper's until v29): v22's without the L2 prefetch of the next
// head's boxes; rows v26 and v27 run it, on v26's backward and v27's. Its forward v9's where a batch's heads are
// too few for its grid, as the keeper chooses; configure sets up this forward and v9's.
void attention_v26_forward_configure();
AttentionForward<bf16> attention_v26_forward;

// v26's backward (attention_v26.cu, sm_90a; the keeper's until v34): rows v26 and v29 run it; and the same summing
// dqkv's columns as it stores them, then column_finish (lab_attention_qkv_bias_bf16's v2; partials as the keeper's
// fused_attention_backward_and_bias_gradient takes them). configure sets up both.
void attention_v26_backward_configure();
AttentionBackward<bf16> attention_v26_backward;
AttentionBackwardAndBiasGradient attention_v26_backward_and_bias_gradient;

}  // namespace roofbench::gpt::cuda::lab
