// The sm_90a forwards' one step on a prepared head (the lab's v10 and v11, lab/attention_v10.cu, and v15's walk,
// attention_forward_walk_sm90a.cuh, which the keeper's v29 runs): a warp group's 64 query rows against their
// causal keys, S = q k^T on wgmma from the 128-byte swizzled tiles, v9's exact softmax in registers
// (softmax_row_block: ex2.approx, log2 units, its masks; a warp's 16 rows of the m64nN accumulator are mma.sync's
// m16n8 tiles), then O = P V with P from registers (the _rs form: the accumulator of S is, element for element,
// P's A fragment). The kernels differ in where V's B operand lies (v10's transposed copy, K-major; v15's v in
// place, MN-major) and in how O leaves.
// Included by sm_90a translation units alone, after attention_sm90a.cuh.
#pragma once

#include <cstdint>

#include "attention_sm90a.cuh"

namespace roofbench::gpt::cuda::attention {
namespace {

// This warp's 16 rows of O (not yet normalised), 1 / their softmax sums and their log-sum-exps (natural units).
struct AttendedRows {
  float o[kHeadDim / 2];
  float inv_sum[2], row_lse[2];
};

// Nothing to do between the softmax and P V (attend_query_rows's default).
struct NothingBeforePv {
  __device__ void operator()() const {}
};

// Query rows q0 .. q0 + 63 against keys 0 .. kKeys - 1 (kKeys = q0 + 64, causal) of the prepared `tiles`; P V's
// B operand is v_operand(ks) for keys 16 ks .., read with imm-trans-b kTransposeB. before_pv() runs, in every
// thread, once the scores have been read and before P V reads v (the lab's v19: v's wait and preparation, or
// the next head's q and k loads).
template <int kKeys, int kTransposeB, typename VOperand, typename BeforePv = NothingBeforePv>
__device__ __forceinline__ void attend_query_rows(AttendedRows& r, const HeadTiles& tiles, VOperand v_operand, int q0,
                                                  const FusedArgs& args, BeforePv before_pv = {}) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  // The scores as v9's softmax takes them: n8 tile j (keys 8 j ..) in s[j], the m16n8 layout, which is the
  // m64nN accumulator's d[4 j ..] in this warp's 16 rows. Rows with 64 keys leave tiles 8 .. 15 zero.
  float s[2 * kRowBlocks][4];
  float(&d)[kMaxT / 2] = reinterpret_cast<float(&)[kMaxT / 2]>(s);
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
    const std::uint64_t a = hw::descriptor_k_major_sw128(tiles.q + q0 * kSwizzleRow, ks);
    const std::uint64_t b = hw::descriptor_k_major_sw128(tiles.k, ks);
    if constexpr (kKeys == kMaxT)
      hw::wgmma_bf16_ss(d, a, b, ks > 0 ? 1u : 0u);
    else
      hw::wgmma_bf16_ss(reinterpret_cast<float(&)[kKeys / 2]>(d), a, b, ks > 0 ? 1u : 0u);
  }
  hw::wgmma_commit_group();
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(d);
#pragma unroll
  for (int i = kKeys / 2; i < kMaxT / 2; ++i) d[i] = 0.0f;

  // The exact softmax of this warp's row block m (rows 16 m ..): every key is in registers. It leaves the
  // tiles right of the diagonal block as they were; their probabilities are zero.
  const int m = q0 / kRows + warp;
  softmax_row_block<Exponent::log2_approx>(s, r.inv_sum, r.row_lse, m, args.s.T, args.scale, lane);
#pragma unroll
  for (int j = 0; j < 2 * kRowBlocks; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (j / 2 > m) s[j][e] = 0.0f;

  unsigned p[kKeys / 16][4];
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks) {
    accumulators_as_a(p[ks], s, ks);  // P's A fragment: tiles 2 ks and 2 ks + 1
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(p[ks][e])::"memory");  // in registers before the fence
  }
  before_pv();
  hw::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kKeys / 16; ++ks)
    hw::wgmma_bf16_rs<kTransposeB>(r.o, p[ks], v_operand(ks), ks > 0 ? 1u : 0u);
  hw::wgmma_commit_group();
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(r.o);
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
