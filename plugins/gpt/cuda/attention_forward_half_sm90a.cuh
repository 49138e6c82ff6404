// One warp group's query half of a prepared head, as the sm_90a forwards that give a whole head to one warp group
// take it (v15's walk, attention_forward_walk_sm90a.cuh, which the keeper's v29 and the lab's v15, v22, v23, v24,
// v26 and v28 run, and the lab's v19, lab/attention_v19.cu): scores, softmax and P V (attention_forward_sm90a.cuh, v read
// MN-major in place), then out staged in shared memory and stored, and lse.
// Included by sm_90a translation units alone, after attention_backward_sm90a.cuh (its staging) and
// attention_forward_sm90a.cuh.
#pragma once

namespace roofbench::gpt::cuda::attention {
namespace {

// Query half `half` (rows 64 half ..) against keys 0 .. kKeys - 1 (kKeys = 64 (half + 1), causal), before_pv
// between the softmax and P V (attend_query_rows). The out is staged in the half's q rows (v15: the S product
// read q for the last time, and every warp waited for it before the group issued P V together) or, kStageInV
// (v19, whose next head's q may be landing), in v's, once every warp's P V has read v.
template <int kKeys, bool kStageInV = false, typename BeforePv = NothingBeforePv>
__device__ __forceinline__ void attend_query_half(HeadTiles& tiles, bf16* out, float* lse, const HeadRows& at,
                                                  const FusedArgs& args, int half, BeforePv before_pv = {}) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, row0 = 64 * half + kRows * warp;
  AttendedRows r;
  attend_query_rows<kKeys, 1>(r, tiles, [&](int ks) { return mn_major(tiles.v, ks); }, 64 * half, args, before_pv);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + lane / 4 + 8 * h;
    if (lane % 4 == 0 && row < args.s.T) lse[at.stats_at(row, args.s.heads)] = r.row_lse[h];
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      r.o[4 * j + 2 * h] *= r.inv_sum[h];
      r.o[4 * j + 2 * h + 1] *= r.inv_sum[h];
    }
  }
  if constexpr (kStageInV) __syncthreads();  // every warp's P V has read v (the block is the warp group)
  store_head_block_staged(out, SwizzledStage{kStageInV ? tiles.v : tiles.q, row0}, as_tiles(r.o), 1.0f, false,
                          args.rope, row0, args.s.T, lane, [&](int t) { return at.rows_at(t); });
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention
