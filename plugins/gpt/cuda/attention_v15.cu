// Fused causal attention with RoPE, version 15's forward (bf16): the bf16 keeper's (v18's) forward on a device
// where hopper_path_available, beside v18's backward (attention_v18.cu); v9's forward runs elsewhere
// (attention.cu chooses). v10's arithmetic (TMA boxes in the 128-byte swizzle, S = q k^T and P V on wgmma, the
// exact softmax in registers) with a whole head in one warp group and three blocks an SM. Compiled for sm_90a
// alone, in the object library of the training library's sm_90a kernels; attention_sm90a_absent.cpp stands in
// without sm_90a code.
//
// Why: at T <= 128 a head's work is a short chain of dependent steps (load, prepare, scores, softmax, P V,
// store), so the SM needs several heads in flight; v10 gives each head two warp groups and two blocks an SM,
// v11 one head at a time per SM (179 us a layer at batch 512 on the H200 against v7's 119). Here, as v7 does
// with mma.sync, a block is one warp group and three share an SM, each walking its own heads (persistent:
// blockIdx.x, then + gridDim.x, ...):
//   - thread 0 loads the head's q, k, v (the raw qkv map) as three boxes on the block's mbarrier, then asks the
//     L2 for the next head's (tma_prefetch_2d); every thread fetches its bias and RoPE factors meanwhile;
//   - the group prepares q, k and v in place (v10's preparation; v stays [key][dim] and P V reads it
//     MN-major, imm-trans-b 1, instead of v10's transposed copy);
//   - query half 0 (rows 0 .. 63, keys 0 .. 63), then query half 1 (rows 64 .., keys 0 .. 127): S on wgmma,
//     v9's softmax_row_block (exact: every key in registers), O = P V with P from registers; each warp's O,
//     times 1 / sum, staged in its own q rows (which no product reads after S) and stored as 128-byte rows;
//     lse in natural units for the rows below T;
//   - a barrier ends the head; the next head's boxes land in the same tiles.
// Budget: shared memory q, k, v 48 KB + the barrier, 49 KB with the alignment's spare; registers 158 (ptxas,
// no spills; at four blocks an SM, 128 registers, ptxas spills 140 bytes), so three blocks an SM. The products
// and the softmax are v10's: out and lse agree with v10's to bf16's rounding (bit for bit unless the tensor
// cores sum P V's terms in another order when v is read MN-major).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_sm90a.cuh"
#include "attention_forward_half_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr int kV15Threads = 128;  // one warp group
constexpr int kV15BlocksPerSm = 3;

struct V15Smem {
  HeadTiles head;
  std::uint64_t loaded;  // the three boxes' bytes
};
constexpr std::size_t kV15SmemBytes = sizeof(V15Smem) + kAtomBytes;  // room to align the start

__global__ void __launch_bounds__(kV15Threads, kV15BlocksPerSm)
    fused_attention_v15_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                       const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  V15Smem& sm = aligned_smem<V15Smem>(raw);
  const int heads = args.s.batch * args.s.heads, stride = static_cast<int>(gridDim.x), T = args.s.T;
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.loaded, 1);
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  for (int head = static_cast<int>(blockIdx.x), n = 0; head < heads; head += stride, ++n) {
    const HeadRows at = v10_head_rows(head, args.s);
    if (threadIdx.x == 0) {
      load_head(sm.head, &qkv_map, &sm.loaded, at);
      if (head + stride < heads) {
        const HeadRows next = v10_head_rows(head + stride, args.s);
#pragma unroll
        for (int part = 0; part < 3; ++part)
          hw::tma_prefetch_2d(&qkv_map, next.b * next.T, part * next.C + next.h * kHeadDim);
      }
    }
    HeadPreparationSm90a<kV15Threads> prep;
    prep.load(bias, args.rope, at);
    wait_or_trap(&sm.loaded, n & 1);
    prep.apply(sm.head, T, [&](int, int, std::uint32_t offset, const uint4& v) {
      *reinterpret_cast<uint4*>(sm.head.v + offset) = v;
    });
    __syncthreads();  // every chunk prepared (and fenced) before any wgmma reads it
    // Half 1 runs at any T: with its call under `T > 64` ptxas serializes the wgmmas (C7511). Rows from T on
    // are masked, and neither their out nor their lse is stored.
    attend_query_half<64>(sm.head, out, lse, at, args, 0);
    attend_query_half<kMaxT>(sm.head, out, lse, at, args, 1);
    hw::fence_proxy_async_shared();  // the staging stores into q, before TMA writes the tiles again
    __syncthreads();                 // the tiles are free
  }
}

// The persistent forward's grid: as many blocks as fit at once. Set by fused_attention_sm90a_forward_configure.
int g_v15_grid = 0;

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda {

void fused_attention_sm90a_forward_configure() {
  // Three blocks of 49 KB need the carveout that gives an SM the most shared memory.
  attention::g_v15_grid = attention::configure_shared_sm90a(
      "v15's forward", attention::fused_attention_v15_forward_kernel, attention::kV15Threads,
      attention::kV15SmemBytes);
}

int fused_attention_sm90a_forward_blocks_per_sm() { return attention::grid_blocks_per_sm(attention::g_v15_grid); }
int fused_attention_sm90a_forward_grid() { return attention::g_v15_grid; }

void fused_attention_sm90a_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                                   const AttentionShape& s, cudaStream_t stream) {
  if (attention::g_v15_grid == 0)
    throw Error("gpt: attention v15's forward runs after fused_attention_sm90a_forward_configure()");
  const attention::FusedArgs args = attention::fused_args(s, rope);
  const CUtensorMap map = attention::qkv_tensor_map("v15", out, qkv, qkv_bias, rope, s);
  attention::check_aligned16(out, "v15", "out");
  const int blocks = std::min(s.batch * s.heads, attention::g_v15_grid);
  attention::fused_attention_v15_forward_kernel<<<blocks, attention::kV15Threads, attention::kV15SmemBytes,
                                                  stream>>>(map, out, lse, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda
