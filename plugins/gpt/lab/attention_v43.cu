// Fused causal attention with RoPE, versions 43's and 45's to 48's backwards (bf16, the kernel lab's
// lab_attention_bf16 rows v43 and v45 to v48, on the keeper's forward, v29's):
//   - v43: v38's backward with each row's delta taken from its scores instead of from out, so out is never read
//     (attention_backward_query_first_sm90a.cuh's walk_backward_heads_query_first, whose query phase runs first and
//     computes S, dP, delta, dS and dq; then v38's key phase on that delta, storing no dS^T). The keeper's backward,
//     v44's (attention_v44.cu in the training library), is this walk with the key phase's masked exponents dropped
//     by a select.
//   - v45: v44 with a head's q, k and v landing in two parts (the walk's V45Smem): rows 0 .. 63, all that query
//     half 0 reads, loaded as soon as the head before has ended its key half 0, rows 64 .. 127 at its end; and the
//     same summing dqkv's columns as it stores them (V45QkvBiasSmem, lab_attention_qkv_bias_bf16's v11).
//   - v46: v44 with each 32-query chunk of the key phase's element-wise step chosen by a branch on whether it is
//     masked (KeyPhase::branch_on_masked): the unmasked chunks' without a compare, the masked ones' with the causal
//     and T masks; and the same summing dqkv's columns (lab_attention_qkv_bias_bf16's v12).
//   - v47: v45's two-part loads and v46's branch together; and the same summing dqkv's columns
//     (lab_attention_qkv_bias_bf16's v13).
//   - v48: v46's branch in key half 1 alone (KeyHalves::half_1), so that the form summing dqkv's columns
//     (lab_attention_qkv_bias_bf16's v14) holds 248 registers without spilling, where v46's with the sums (v12) spills
//     12 bytes and its 1.3% on v44's backward (H100, batch 512) does not carry over to the sums.
// Why: at batch 512 v38's layer moves its 1.21 GB at about the H100's measured read roof (3.2 TB/s), and out's box is
// 16 KB of the backward's 128 KB a head. Alone v43 lost to v38 (383 against 376 us a layer, H100, batch 512): S and dP
// computed twice and the exponents twice cost more than out's box saves; with v39's select (v44) it won. In v44's
// backward 12.4% of the warp samples wait at a head's start for its q, k and v (Nsight Compute, H100, batch 512), and
// 10.5% of its instructions build and read the key phase's masks: ptxas computes every pair's mask while the scores'
// products run and keeps the bits in ordinary registers, about six instructions a pair, where a warp's 16 keys need
// masks in one or two of the half's chunks. Budget: v43 and v45 to v48 244 to 248 registers, v45 with the sums 250, v47
// with them 255, v48 with them 248, no spills; v46 with the sums 255 registers and 12 bytes of spills; the walk's 98 KB
// of shared memory (104 KB with the sums), two blocks an SM, 128 threads a block. Compiled for sm_90a alone, in the
// lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_query_first_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

// Each with and without qkv's bias sums but v43 (lab_attention_qkv_bias_bf16's v11 to v14 for v45 to v48); a version's
// configure sets up both.
BackwardWalk g_v43_walk = query_first_walk<V43KeyPhase, V43Smem>("v43's backward", "walk_configure<43>");
BackwardWalk g_v45_walk = query_first_walk<V44KeyPhase, V45Smem>("v45's backward", "walk_configure<45>");
BackwardWalk g_v45_qkv_bias_walk = query_first_walk<V44KeyPhase, V45QkvBiasSmem>(
    "v45's backward with qkv's bias sums", "walk_configure<45>");
BackwardWalk g_v46_walk = query_first_walk<V46KeyPhase, V43Smem>("v46's backward", "walk_configure<46>");
BackwardWalk g_v46_qkv_bias_walk = query_first_walk<V46KeyPhase, V43QkvBiasSmem>(
    "v46's backward with qkv's bias sums", "walk_configure<46>");
BackwardWalk g_v47_walk = query_first_walk<V46KeyPhase, V45Smem>("v47's backward", "walk_configure<47>");
BackwardWalk g_v47_qkv_bias_walk = query_first_walk<V46KeyPhase, V45QkvBiasSmem>(
    "v47's backward with qkv's bias sums", "walk_configure<47>");
BackwardWalk g_v48_walk = query_first_walk<V48KeyPhase, V43Smem>("v48's backward", "walk_configure<48>");
BackwardWalk g_v48_qkv_bias_walk = query_first_walk<V48KeyPhase, V43QkvBiasSmem>(
    "v48's backward with qkv's bias sums", "walk_configure<48>");

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v43_walks() {
  static constexpr VersionWalk kWalks[] = {
      version_walk<&attention::g_v43_walk>(43),
      version_walk<&attention::g_v45_walk, &attention::g_v45_qkv_bias_walk>(45),
      version_walk<&attention::g_v46_walk, &attention::g_v46_qkv_bias_walk>(46),
      version_walk<&attention::g_v47_walk, &attention::g_v47_qkv_bias_walk>(47),
      version_walk<&attention::g_v48_walk, &attention::g_v48_qkv_bias_walk>(48),
  };
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
