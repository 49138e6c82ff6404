// Fused causal attention with RoPE, versions 32's to 42's backwards (bf16, the kernel lab's lab_attention_bf16: rows
// v32 to v42, on the keeper's forward, v29's):
//   - v32: v26's walk with each head's q loaded a head ahead into a tile of its own
//     (attention_backward_walk_sm90a.cuh's walk_backward_heads_q_ahead), as v29's forward loads its q, so that a
//     head waits at its start for k and out alone. The tile fits beside two blocks an SM because causal attention
//     leaves half of dS^T's first tile unused; the head's lse, delta and barriers move there.
//   - v33: v32 with both query halves' dq products issued at once, half 1's computed while half 0's dq is stored
//     (backward_query_halves_together).
//   - v34 (the keeper's until v38): v26's walk, q loaded with the late boxes, with v33's query phase, dq_together.
//   - v35: v34 with key half 1's scores issued before key half 0's dv and dk are stored, so the tensor cores
//     compute them meanwhile (key_halves_overlapped, backward_key_halves_overlapped).
//   - v36: v34 with dq staged in dS^T's first tile instead of q's (dq_staged_in_ds_t), so the next head's q loads
//     with its v and dout once the key phase has ended (q_early, as v25's, whose dq left unstaged) and only k and out
//     wait for the head's end, without v32's 16 KB (which leaves the L1 about 2 KB beside two blocks).
//   - v37: v34 with dk's and dq's RoPE factors fetched while the tensor cores compute dk and dq (dk_factors and
//     dq_factors under_product): in v26's backward three of those factors' first uses hold about 9% of the warp
//     samples, each waiting on the L2; v21 did so for dq alone, one half at a time.
//   - v38 (the keeper's until v44): v37 with those factors read from RopeTable's lane-ordered copy (dk_factors and
//     dq_factors under_product_lane_ordered), a lane's 8 cos and 8 sin of a row side by side, so four 16-byte loads
//     a row instead of sixteen 4-byte ones.
//   - v39: v34 with a masked chunk's exponents computed for every pair and the masked ones dropped by a select
//     (select_masked): v26's backward branches around each masked pair's exponent, about eight instructions a pair
//     against an unmasked pair's two, and its masked chunks take about 16% of its instructions and of its warp
//     samples (Nsight Compute, H100, batch 512).
//   - v40: v38 and v39 together (88 bytes spilled: its key phase holds too much).
//   - v41: v40 with dk's factors fetched as v37 fetches them, 4 bytes a load, which spills nothing.
//   - v42: v38 with v39's select in key half 1 alone (SelectMasked::in_half_1), whose 64 queries leave the
//     registers that key half 0's 128 lack beside v38's 16-byte factor loads.
//   - v34's and v37's to v42's walks summing dqkv's columns as they store them (lab_attention_qkv_bias_bf16's v3 to
//     v9), for the trainers' kernel beside the keeper's (v10).
// Compiled for sm_90a alone, in the lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
//
// Why: 11.5% of v26's backward warp samples (Nsight Compute, H100, batch 512) wait for the late boxes, q, k and
// out (48 KB), asked for only when the head before has ended. In every version up to v32 each of the head's 15
// products waits for the one before. The same values in the same arithmetic, so their GPU test asks for v29's
// row's dqkv bit for bit.
// Budget: v32 and v33 113 KB of shared memory a block with the alignment's spare (two fill an H100 SM's 228 KB
// exactly), the others v26's 98 KB (104 KB with qkv's bias sums); 242 to 255 registers (ptxas), two blocks an SM;
// v40 spills 88 bytes (188 with the sums), v41, v38 and v42 with the sums 36, 8 and 12, the others nothing.
#include <cuda.h>
#include <cuda_bf16.h>

#include "attention_backward_sm90a.cuh"
#include "attention_backward_walk_sm90a.cuh"
#include "attention_versions.hpp"
#include "backward_walks.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v32_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads_q_ahead(aligned_smem<V32Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse, bias,
                              args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v33_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads_q_ahead<true>(aligned_smem<V32Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                    bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v34_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV34Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v34_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV34QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v35_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV35Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v36_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV36Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v37_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV37Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v37_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV37QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v38_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV38Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v38_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV38QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v39_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV39Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v39_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV39QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v40_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV40Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v40_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV40QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v41_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV41Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v41_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV41QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v42_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                  const __grid_constant__ CUtensorMap dout_map,
                                  const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                  const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV42Walk>(aligned_smem<V17Smem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv, lse,
                                bias, args);
}

__global__ void __launch_bounds__(kV14Threads, kV14BlocksPerSm)
    attention_v42_qkv_bias_backward_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           const __grid_constant__ CUtensorMap out_map, bf16* dqkv, const float* lse,
                                           const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_backward_heads<kV42QkvBiasWalk>(aligned_smem<QkvBiasSmem>(raw), V14Maps{&qkv_map, &dout_map, &out_map}, dqkv,
                                       lse, bias, args);
}

BackwardWalk g_v32_walk{"v32's backward", "walk_configure<32>", attention_v32_backward_kernel,
                        kV32SmemBytes};
BackwardWalk g_v33_walk{"v33's backward", "walk_configure<33>", attention_v33_backward_kernel,
                        kV32SmemBytes};
BackwardWalk g_v34_walk = policy_walk<kV34Walk>("v34's backward", "walk_configure<34>",
                                               attention_v34_backward_kernel, kV17SmemBytes);
BackwardWalk g_v34_qkv_bias_walk =
    policy_walk<kV34QkvBiasWalk>("v34's backward with qkv's bias sums", "walk_configure<34>",
                                 attention_v34_qkv_bias_backward_kernel, kQkvBiasSmemBytes);
BackwardWalk g_v35_walk = policy_walk<kV35Walk>("v35's backward", "walk_configure<35>",
                                               attention_v35_backward_kernel, kV17SmemBytes);
BackwardWalk g_v36_walk = policy_walk<kV36Walk>("v36's backward", "walk_configure<36>",
                                               attention_v36_backward_kernel, kV17SmemBytes);
BackwardWalk g_v37_walk = policy_walk<kV37Walk>("v37's backward", "walk_configure<37>",
                                               attention_v37_backward_kernel, kV17SmemBytes);
BackwardWalk g_v37_qkv_bias_walk =
    policy_walk<kV37QkvBiasWalk>("v37's backward with qkv's bias sums", "walk_configure<37>",
                                 attention_v37_qkv_bias_backward_kernel, kQkvBiasSmemBytes);
BackwardWalk g_v38_walk = policy_walk<kV38Walk>("v38's backward", "walk_configure<38>",
                                               attention_v38_backward_kernel, kV17SmemBytes);
BackwardWalk g_v38_qkv_bias_walk =
    policy_walk<kV38QkvBiasWalk>("v38's backward with qkv's bias sums", "walk_configure<38>",
                                 attention_v38_qkv_bias_backward_kernel, kQkvBiasSmemBytes);
BackwardWalk g_v39_walk = policy_walk<kV39Walk>("v39's backward", "walk_configure<39>",
                                               attention_v39_backward_kernel, kV17SmemBytes);
BackwardWalk g_v39_qkv_bias_walk =
    policy_walk<kV39QkvBiasWalk>("v39's backward with qkv's bias sums", "walk_configure<39>",
                                 attention_v39_qkv_bias_backward_kernel, kQkvBiasSmemBytes);
BackwardWalk g_v40_walk = policy_walk<kV40Walk>("v40's backward", "walk_configure<40>",
                                               attention_v40_backward_kernel, kV17SmemBytes);
BackwardWalk g_v40_qkv_bias_walk =
    policy_walk<kV40QkvBiasWalk>("v40's backward with qkv's bias sums", "walk_configure<40>",
                                 attention_v40_qkv_bias_backward_kernel, kQkvBiasSmemBytes);
BackwardWalk g_v41_walk = policy_walk<kV41Walk>("v41's backward", "walk_configure<41>",
                                               attention_v41_backward_kernel, kV17SmemBytes);
BackwardWalk g_v41_qkv_bias_walk =
    policy_walk<kV41QkvBiasWalk>("v41's backward with qkv's bias sums", "walk_configure<41>",
                                 attention_v41_qkv_bias_backward_kernel, kQkvBiasSmemBytes);
BackwardWalk g_v42_walk = policy_walk<kV42Walk>("v42's backward", "walk_configure<42>",
                                               attention_v42_backward_kernel, kV17SmemBytes);
BackwardWalk g_v42_qkv_bias_walk =
    policy_walk<kV42QkvBiasWalk>("v42's backward with qkv's bias sums", "walk_configure<42>",
                                 attention_v42_qkv_bias_backward_kernel, kQkvBiasSmemBytes);

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

std::span<const VersionWalk> attention_v32_walks() {
  static constexpr VersionWalk kWalks[] = {
      version_walk<&attention::g_v32_walk>(32),
      version_walk<&attention::g_v33_walk>(33),
      version_walk<&attention::g_v34_walk, &attention::g_v34_qkv_bias_walk>(34),
      version_walk<&attention::g_v35_walk>(35),
      version_walk<&attention::g_v36_walk>(36),
      version_walk<&attention::g_v37_walk, &attention::g_v37_qkv_bias_walk>(37),
      version_walk<&attention::g_v38_walk, &attention::g_v38_qkv_bias_walk>(38),
      version_walk<&attention::g_v39_walk, &attention::g_v39_qkv_bias_walk>(39),
      version_walk<&attention::g_v40_walk, &attention::g_v40_qkv_bias_walk>(40),
      version_walk<&attention::g_v41_walk, &attention::g_v41_qkv_bias_walk>(41),
      version_walk<&attention::g_v42_walk, &attention::g_v42_qkv_bias_walk>(42),
  };
  return kWalks;
}

}  // namespace roofbench::gpt::cuda::lab
