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
// v45, v44 with a head's rows landing in two parts, v46, v44 with a branch on whether a chunk is masked, v47, v45 and
// v46 together, and v48, v46's branch in key half 1 alone, attention_v43.cu; v49, v44's steps by two warp groups a
// block sharing a ring of three head slots, and v52, v49 with v46's branch, attention_v49.cu; v50, v44 with its
// forward's steps by three warp groups a block sharing a ring of four head slots, attention_v50.cu, and v51, v50's
// forward with v49's backward; v29, the keeper's forward with v26's backward, attention_v26.cu) and the keepers the
// trainers run (v8 and v44, layers.hpp's fused_attention_forward and _backward: v44's forward is v29's, v26's loading
// each head's q a head ahead into a tile of its own, its backward v43's with v39's select; v44's row refuses devices
// without the sm_90a path). sm_90a code runs on compute capability 9.0 alone; a row that needs it refuses other
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

// lab_attention's rows (v1, v8) and lab_attention_bf16's (v7, v9 .. v52), in the axis's order.
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
// v15's forward (attention_v15.cu, sm_90a): v10's arithmetic with a whole head in one warp group, three blocks an
// SM, each walking its own heads; row v15 runs it at any batch. attention_v15_or_v9_forward runs it where a batch's
// heads number at least kSm90aForwardMinRounds per block of its grid and v9's forward below (the keeper's forward
// until v22; rows v16, v17, v18 and v21): configure that with fused_attention_v9_configure too. configure (this
// forward alone) as v10's.
void attention_v15_forward_configure();
AttentionForward<bf16> attention_v15_forward;
AttentionForward<bf16> attention_v15_or_v9_forward;

// v19's forward (attention_v19.cu, sm_90a): v15's with a head's q and k loaded during the head before's half 1
// and its v landing during half 0's scores; rows v19 (with v17's backward) and v20 (with v18's) run it.
// configure (this forward alone) as v10's.
void attention_v19_forward_configure();
AttentionForward<bf16> attention_v19_forward;

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

// v28 (attention_v27.cu, sm_90a): v27's backward and v26's forward, each asking the L2 for the next head's boxes
// half a head ahead of their loads; its forward v9's where a batch's heads are too few for its grid, as the
// keeper chooses. configure sets up both kernels and v9's.
void attention_v28_configure();
AttentionForward<bf16> attention_v28_forward;
AttentionBackward<bf16> attention_v28_backward;

// v26's forward (attention_v26.cu, sm_90a; the keeper's until v29): v22's without the L2 prefetch of the next
// head's boxes; rows v26 and v27 run it, on v26's backward and v27's. Its forward v9's where a batch's heads are
// too few for its grid, as the keeper chooses; configure sets up this forward and v9's.
void attention_v26_forward_configure();
AttentionForward<bf16> attention_v26_forward;

// v50's forward (attention_v50.cu, sm_90a): the keeper's forward steps walked by three warp groups of one block an SM
// sharing a ring of four head slots; rows v50 and v51 run it, on the keeper's backward and v49's. Its forward v9's
// where a batch's heads are too few for its warp groups, as the keeper chooses; configure sets up this forward and
// v9's.
void attention_v50_forward_configure();
AttentionForward<bf16> attention_v50_forward;

// The backwards that are walks of the training library's sm_90a templates (cuda/attention_backward_walk_sm90a.cuh and,
// from v43, cuda/attention_backward_query_first_sm90a.cuh), by version: v14 (attention_v14.cu), v17, v18, v21, v25,
// v26, v27 (each in its own file, v27's beside v28), v30 and v31 (attention_v30.cu), v32 to v42 (attention_v32.cu),
// v43 and v45 to v48 (attention_v43.cu), v49 and v52 (attention_v49.cu); each file's head comment says what its
// versions change and why.
// configure_backward_walk sets up the version's walk and, where it has one, the same walk summing dqkv's columns as it
// stores them (v26, v34, v37 to v42, v45 to v49, v52: lab_attention_qkv_bias_bf16's rows), and runs once before either
// launcher; from v38 the walks read the RoPE table's lane-ordered copy (else an Error). A version without a walk is an
// Error, and in a build without sm_90a code every version is NotApplicable.
void configure_backward_walk(int version);
void launch_backward_walk(int version, bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                          const bf16* qkv, const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                          cudaStream_t stream);
void launch_backward_walk_and_bias_gradient(int version, bf16* dqkv, float* dbias, float* partials, const bf16* dout,
                                            const bf16* out, const float* lse, const bf16* qkv,
                                            const float* qkv_bias, RopeTable rope, const AttentionShape& s,
                                            cudaStream_t stream);

// Those walks as a lab row's configure and backward (walk_configure<38>, walk_backward<38>) and as
// lab_attention_qkv_bias_bf16's (walk_backward_and_bias_gradient<38>).
template <int kVersion>
void walk_configure() {
  configure_backward_walk(kVersion);
}
template <int kVersion>
void walk_backward(bf16* dqkv, float*, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                   const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  launch_backward_walk(kVersion, dqkv, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}
template <int kVersion>
void walk_backward_and_bias_gradient(bf16* dqkv, float* dbias, float* partials, float*, const bf16* dout,
                                     const bf16* out, const float* lse, const bf16* qkv, const float* qkv_bias,
                                     RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  launch_backward_walk_and_bias_gradient(kVersion, dqkv, dbias, partials, dout, out, lse, qkv, qkv_bias, rope, s,
                                         stream);
}

}  // namespace roofbench::gpt::cuda::lab
