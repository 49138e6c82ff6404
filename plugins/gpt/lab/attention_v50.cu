// Fused causal attention with RoPE, version 50's forward (bf16, the kernel lab's lab_attention_bf16 rows v50, with the
// keeper's backward, v44's, and v51, with v49's): the keeper's forward steps on each head (v29's: the preparation's
// bias and RoPE factors by 16-byte loads, then attend_query_half on both query halves), walked by three warp groups of
// one block an SM that share a ring of four head slots (q, k and v, 48 KB each), instead of three blocks an SM of one
// warp group, each with its head's tiles and its next head's q.
//   - The ring (attention_ring_sm90a.cuh's HeadRing): the block's n-th head is warp group n % 3's and lands in slot
//     n % 4; a group that ends head n loads head n + 4, the next group's, into the slot it frees, and that group starts
//     it once its own head n + 1 has ended. A load so has the time between those two ends; once the groups run at
//     least a load's time apart, which a group's wait itself brings about, a group that ends a head finds its next
//     one landed, where v29's block waits at every head's start for the k and v it loaded at the end of the head
//     before.
//   - The group's number, its row and the block's index are read anew where used (HeadRing, block_head): three
//     groups at 168 registers leave none to hold them.
// Why: 18.8% of v26's forward warp samples waited for a head's boxes (Nsight Compute, H100, batch 512), and v29, which
// loads q a head ahead, still loads k and v at each head's start; with a fourth slot shared by the SM's three heads,
// every load has a part of a head's time to land.
// The arithmetic and its order are v29's: out and lse equal the keeper's forward's bit for bit.
// Budget: shared memory four slots 192 KB and twelve barriers, 193 KB with the alignment's spare, one block an SM, 384
// threads (the 12 warps an SM of v29's three blocks), 167 registers, no spills. Compiled for sm_90a alone, in the
// lab's sm_90a library; attention_v10_absent.cpp stands in without sm_90a code.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "attention_backward_sm90a.cuh"
#include "attention_forward_walk_sm90a.cuh"
#include "attention_ring_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

using ForwardRing = HeadRing<3, 4>;

struct V50Smem {
  HeadTiles slot[ForwardRing::kSlots];
  std::uint64_t landed[ForwardRing::kGroups][ForwardRing::kSlots];  // the slot's three boxes, for the group that reads
};

// The block's n-th head into its slot on its group's barrier of that slot. One thread.
__device__ inline void load_forward_ring_head(V50Smem& sm, const CUtensorMap* qkv_map, int n, const HeadRows& at) {
  load_head(sm.slot[ForwardRing::slot(n)], qkv_map, &sm.landed[ForwardRing::group(n)][ForwardRing::slot(n)], at);
}

// v50's walk: each warp group runs v29's steps on its heads (the block's n-th for n = group, group + 3, ...).
__device__ __forceinline__ void walk_forward_heads_on_ring(V50Smem& sm, const CUtensorMap* qkv_map, bf16* out,
                                                           float* lse, const float* bias, const FusedArgs& args) {
  const int heads = args.s.batch * args.s.heads, T = args.s.T;
  ForwardRing::start(sm.landed, heads, [&sm, qkv_map, s = args.s](int n) {
    load_forward_ring_head(sm, qkv_map, n, v10_head_rows(block_head(n), s));
  });
  for (int n = ForwardRing::thread_group(); block_head(n) < heads; n += ForwardRing::kGroups) {
    const HeadRows at = v10_head_rows(block_head(n), args.s);
    HeadPreparationSm90a<kV15Threads> prep;
    prep.load<true>(bias, args.rope, at);
    hw::mbarrier_wait_or_trap(&sm.landed[ForwardRing::thread_group()][ForwardRing::slot(n)], ForwardRing::parity(n));
    HeadTiles& tiles = sm.slot[ForwardRing::slot(n)];
    prep.apply(tiles, T, [&](int, int, std::uint32_t offset, const uint4& v) {
      *reinterpret_cast<uint4*>(tiles.v + offset) = v;
    });
    ForwardRing::sync();  // every chunk prepared (and fenced) before any wgmma reads it
    // Half 1 runs at any T (v29's walk says why).
    attend_query_half<64>(tiles, out, lse, at, args, 0);
    attend_query_half<kMaxT>(tiles, out, lse, at, args, 1);
    hw::fence_proxy_async_shared();  // the staging stores into q, before TMA writes the slot again
    ForwardRing::sync();             // the slot is free
    if (ForwardRing::thread_row() == 0 && block_head(n + ForwardRing::kSlots) < heads)
      load_forward_ring_head(sm, qkv_map, n + ForwardRing::kSlots,
                             v10_head_rows(block_head(n + ForwardRing::kSlots), args.s));
  }
}

__global__ void __launch_bounds__(ForwardRing::kThreads, 1)
    attention_v50_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                 const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  walk_forward_heads_on_ring(aligned_smem<V50Smem>(raw), &qkv_map, out, lse, bias, args);
}

constexpr std::size_t kV50SmemBytes = sizeof(V50Smem) + kAtomBytes;  // room to align the start
static_assert(kV50SmemBytes <= 227 * 1024, "one block an SM");

ForwardWalk g_v50_forward{"v50's forward", "attention_v50_forward_configure", attention_v50_forward_kernel,
                          kV50SmemBytes, ForwardRing::kThreads};

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v50_forward_configure() {
  attention::g_v50_forward.configure();
  fused_attention_v9_configure();
}

void attention_v50_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  attention::g_v50_forward.launch_or_v9(out, lse, qkv, qkv_bias, rope, s, stream);
}

}  // namespace roofbench::gpt::cuda::lab
