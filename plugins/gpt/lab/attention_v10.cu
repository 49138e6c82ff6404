// Fused causal attention with RoPE, versions 10 and 11 (bf16, the kernel lab's lab_attention_bf16): the
// forward on Hopper's own instructions (sm_90a: TMA tile loads completing on an mbarrier, wgmma reading its
// operands from shared memory through matrix descriptors); the backward is v9's. Compiled for sm_90a alone
// (roofbench_hopper_sm90a, kernels/hopper/README.md); attention_v10_absent.cpp stands in for it in a build
// without sm_90a code, and configure refuses (NotApplicable) on any device hopper_path_available rejects.
//
// At T <= 128 and head dim 64 a head's q, k and v are 16 KB each: the whole head fits one block's shared
// memory, so there is no loop over key tiles and no online softmax. One block of two warp groups per head:
//   - thread 0 loads q, k and v as three 128 x 64 boxes of the raw qkv (one 2-D tensor map over [N, 3C]),
//     in the 128-byte swizzle the wgmma descriptors read, all three completing on one mbarrier; meanwhile
//     every thread fetches its bias and RoPE factors;
//   - every thread prepares its chunks in place (bias added, q and k rotated, rounded to bf16: v9's
//     prepare_chunk, so the products see v9's operands), rows from T on zeroed; v is written transposed
//     (head dims as rows, keys along them) into a buffer of its own, since wgmma's B operand must be
//     K-major and the keys are P V's K; the ordinary stores are fenced for the async proxy;
//   - warp group g takes query rows 64 g .. 64 g + 63 and, causal, only the keys 0 .. 64 g + 63: the scores
//     S = q k^T as one m64nNk16 wgmma chain (N = 64 or 128 keys), the exact softmax of every row in
//     registers (v9's softmax_row_block: ex2.approx, log2 units, its masks; a warp's 16 rows of the m64nN
//     accumulator are mma.sync's m16n8 tiles), then O = P V with P from registers (the _rs form: the
//     accumulator of S is, element for element, P's A fragment) and v^T from shared memory.
// Out is written from the accumulators as bf16 pairs, lse in natural units for the rows below T.
// v11, below, computes each head as v10 does within a persistent, warp-specialised block.
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "attention_forward_sm90a.cuh"
#include "attention_versions.hpp"

namespace roofbench::gpt::cuda::attention {
namespace {

constexpr std::uint32_t kKeyTileBytes = kHeadDim * kSwizzleRow;  // v^T for 64 keys: 64 dims x 64 keys

// v^T: keys 64 kt .. 64 kt + 63 in tile kt.
using TransposedV = unsigned char[kMaxT / 64][kKeyTileBytes];

// v10's shared memory, from the first 1024-byte aligned address of the dynamic allocation.
struct V10Smem {
  HeadTiles head;
  TransposedV vt;
  std::uint64_t loaded;  // the three boxes' bytes
};
constexpr std::size_t kV10SmemBytes = sizeof(V10Smem) + kAtomBytes;  // room to align the start

// The head prepared as v10 and v11 read it: q and k in place, v into v^T.
__device__ inline void prepare_head(const V10Preparation& prep, HeadTiles& tiles, TransposedV& vt, int T) {
  prep.apply(tiles, T, [&](int r, int c, std::uint32_t, const uint4& v) {
    // Element e of the chunk is v[r][8 c + e]: row 8 c + e of v^T, key column r % 64 of tile r / 64.
    const bf16* x = reinterpret_cast<const bf16*>(&v);
    unsigned char* tile = vt[r / 64];
#pragma unroll
    for (int e = 0; e < kChunk; ++e)
      *reinterpret_cast<bf16*>(tile + swizzled(kChunk * c + e, (r % 64) / 8) + 2 * (r % 8)) = x[e];
  });
}

// Warp group g's 64 query rows (64 g ..) against keys 0 .. kKeys - 1 (kKeys = 64 (g + 1), causal): scores,
// softmax, P V (attention_forward_sm90a.cuh, v^T read K-major), then out and lse to global memory.
template <int kKeys>
__device__ __forceinline__ void attend_rows(const HeadTiles& tiles, const TransposedV& vt, bf16* out, float* lse,
                                            const HeadRows& at, const FusedArgs& args, int group) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, q0 = 64 * group;
  AttendedRows r;
  attend_query_rows<kKeys, 0>(
      r, tiles, [&](int ks) { return hw::descriptor_k_major_sw128(vt[ks / 4], ks % 4); }, q0, args);
  const int rows[2] = {q0 + 16 * warp + lane / 4, q0 + 16 * warp + lane / 4 + 8};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (rows[h] >= args.s.T) continue;
    if (lane % 4 == 0) lse[at.stats_at(rows[h], args.s.heads)] = r.row_lse[h];
    bf16* row = out + at.rows_at(rows[h]) + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j)
      *reinterpret_cast<unsigned*>(row + 8 * j) =
          pack_bf16(r.o[4 * j + 2 * h] * r.inv_sum[h], r.o[4 * j + 2 * h + 1] * r.inv_sum[h]);
  }
}

// Warp group `group` (0 or 1) of the two that compute a prepared head: its 64 query rows, if any are below T.
__device__ __forceinline__ void attend_head(const HeadTiles& tiles, const TransposedV& vt, bf16* out, float* lse,
                                            const HeadRows& at, const FusedArgs& args, int group) {
  if (64 * group >= args.s.T) return;  // T <= 64: the second group's rows are all padding
  if (group == 0)
    attend_rows<64>(tiles, vt, out, lse, at, args, 0);
  else
    attend_rows<kMaxT>(tiles, vt, out, lse, at, args, 1);
}

__global__ void __launch_bounds__(kV10Threads, 2)
    fused_attention_v10_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                       const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  V10Smem& sm = aligned_smem<V10Smem>(raw);
  const HeadRows at = v10_head_rows(static_cast<int>(blockIdx.x), args.s);
  if (threadIdx.x == 0) {
    hw::mbarrier_init(&sm.loaded, 1);
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) load_head(sm.head, &qkv_map, &sm.loaded, at);
  V10Preparation prep;
  prep.load(bias, args.rope, at);
  hw::mbarrier_wait_or_trap(&sm.loaded, 0);
  prepare_head(prep, sm.head, sm.vt, args.s.T);
  __syncthreads();
  attend_head(sm.head, sm.vt, out, lse, at, args, static_cast<int>(threadIdx.x) / 128);
}

// ---- v11: v10's head made persistent and warp specialised (FlashAttention-3's form). One block per SM of
// three warp groups walks the heads (head blockIdx.x, then + gridDim.x, ...): the producer group, its
// registers given up (setmaxnreg_dec), has one thread keep a ring of two head stages filled by TMA, each
// stage's full barrier completing on its bytes and its empty barrier on the 256 consumer threads' arrivals;
// the two consumer groups (setmaxnreg_inc) prepare and compute each head as v10 does, so the next head's
// boxes land while this one computes. v^T is one buffer: a consumer barrier (named barrier 1, the 256
// consumer threads) before each preparation waits until both groups' P V of the previous head are done.
constexpr int kV11Stages = 2;
constexpr int kV11Threads = 128 + kV10Threads;  // the producer warp group, then the consumers

struct V11Smem {
  HeadTiles stage[kV11Stages];
  TransposedV vt;
  std::uint64_t full[kV11Stages], empty[kV11Stages];
};
constexpr std::size_t kV11SmemBytes = sizeof(V11Smem) + kAtomBytes;

// The 256 consumer threads meet (named barrier 1; __syncthreads is barrier 0).
__device__ inline void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kV10Threads) : "memory"); }

// The producer's one thread: stage n % 2 gets the block's n-th head once both consumer groups released it.
__device__ __forceinline__ void produce_heads(V11Smem& sm, const CUtensorMap* map, const AttentionShape& s) {
  if (threadIdx.x != 0) return;
  int n = 0;
  for (int head = static_cast<int>(blockIdx.x); head < s.batch * s.heads; head += static_cast<int>(gridDim.x), ++n) {
    const int stage = n % kV11Stages;
    hw::mbarrier_wait_or_trap(&sm.empty[stage], ((n / kV11Stages) & 1) ^ 1);  // a fresh barrier passes parity 1
    load_head(sm.stage[stage], map, &sm.full[stage], v10_head_rows(head, s));
  }
}

// A consumer thread (warp group 1 or 2 of the block): each of the block's heads as v10 computes one.
__device__ __forceinline__ void consume_heads(V11Smem& sm, bf16* out, float* lse, const float* bias, const FusedArgs& args) {
  const int group = static_cast<int>(threadIdx.x) / 128 - 1;
  int n = 0;
  for (int head = static_cast<int>(blockIdx.x); head < args.s.batch * args.s.heads;
       head += static_cast<int>(gridDim.x), ++n) {
    const int stage = n % kV11Stages;
    const HeadRows at = v10_head_rows(head, args.s);
    hw::mbarrier_wait_or_trap(&sm.full[stage], (n / kV11Stages) & 1);
    // The bias and RoPE factors after the wait: fetched before it, they stay live across the loop, and
    // ptxas (C7511) then serializes the wgmmas for want of registers.
    V10Preparation prep;
    prep.load(bias, args.rope, at);
    consumers_sync();  // both groups' P V of the previous head have finished reading v^T
    prepare_head(prep, sm.stage[stage], sm.vt, args.s.T);
    consumers_sync();  // every chunk prepared (and fenced) before any wgmma reads it
    attend_head(sm.stage[stage], sm.vt, out, lse, at, args, group);
    hw::mbarrier_arrive(&sm.empty[stage]);  // its wgmmas have completed: the stage may be refilled
  }
}

__global__ void __launch_bounds__(kV11Threads, 1)
    fused_attention_v11_forward_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* out, float* lse,
                                       const float* bias, FusedArgs args) {
  extern __shared__ unsigned char raw[];
  V11Smem& sm = aligned_smem<V11Smem>(raw);
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kV11Stages; ++stage) {
      hw::mbarrier_init(&sm.full[stage], 1);
      hw::mbarrier_init(&sm.empty[stage], kV10Threads);
    }
    hw::mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    hw::setmaxnreg_dec<40>();
    produce_heads(sm, &qkv_map, args.s);
  } else {
    hw::setmaxnreg_inc<232>();
    consume_heads(sm, out, lse, bias, args);
  }
}

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::attention {
namespace {

// v11's persistent grid: one block per SM (its registers allow no more). Set by attention_v11_configure.
int g_v11_grid = 0;

}  // namespace
}  // namespace roofbench::gpt::cuda::attention

namespace roofbench::gpt::cuda::lab {

void attention_v10_configure() {
  attention::configure_sm90a("v10", attention::fused_attention_v10_forward_kernel, attention::kV10SmemBytes);
  fused_attention_v9_configure();  // the backward, v9's
}

void attention_v10_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  const attention::FusedArgs args = attention::fused_args(s, rope);
  const CUtensorMap map = attention::qkv_tensor_map("v10", out, qkv, qkv_bias, rope, s);
  attention::fused_attention_v10_forward_kernel<<<s.batch * s.heads, attention::kV10Threads,
                                                  attention::kV10SmemBytes, stream>>>(map, out, lse, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

void attention_v11_configure() {
  const auto kernel = attention::fused_attention_v11_forward_kernel;
  attention::configure_sm90a("v11", kernel, attention::kV11SmemBytes);
  fused_attention_v9_configure();  // the backward, v9's
  attention::g_v11_grid =
      attention::persistent_grid("v11's forward", kernel, attention::kV11Threads, attention::kV11SmemBytes);
}

void attention_v11_forward(bf16* out, float* lse, const bf16* qkv, const float* qkv_bias, RopeTable rope,
                           const AttentionShape& s, cudaStream_t stream) {
  if (attention::g_v11_grid == 0) throw Error("gpt: attention v11 runs after attention_v11_configure()");
  const attention::FusedArgs args = attention::fused_args(s, rope);
  const CUtensorMap map = attention::qkv_tensor_map("v11", out, qkv, qkv_bias, rope, s);
  const int blocks = std::min(s.batch * s.heads, attention::g_v11_grid);
  attention::fused_attention_v11_forward_kernel<<<blocks, attention::kV11Threads, attention::kV11SmemBytes,
                                                  stream>>>(map, out, lse, qkv_bias, args);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::lab
