// The tensor-core tile machinery the fused attention versions 2 and 3 share: WMMA TF32 (m16n16k8) products
// of matrices in shared memory, dealt to the warps tile by tile, and the shared-memory geometry they use.
// Fragments go through shared memory (store_matrix_sync) before row-dependent work; only the
// order-independent TF32 rounding touches their elements.
#pragma once

#include <mma.h>

#include <type_traits>

#include "attention_common.cuh"

namespace roofbench::gpt::cuda::attention::tensor_core {

namespace wmma = nvcuda::wmma;

inline constexpr int kTile = 32;      // query rows (forward, dq) or key rows (dk, dv) per block
inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kMn = 16, kK = 8;  // the WMMA TF32 shape m16n16k8
// Shared memory row strides in floats: multiples of 4 (WMMA's ldm for 32-bit types) and of 4 mod 32, so
// the rows of a fragment load start on different banks.
inline constexpr int kHeadStride = kHeadDim + 4;
inline constexpr int kScoreStride = kMaxT + 4;
inline constexpr int kScratch = kMn * kMn;  // floats of each warp's private 16 x 16 staging tile
static_assert(kHeadStride % 4 == 0 && kScoreStride % 4 == 0);
static_assert(kTile % kMn == 0 && kMaxT % kMn == 0 && kHeadDim % kMn == 0);

__host__ __device__ constexpr int pad16(int n) { return (n + kMn - 1) / kMn * kMn; }

using Accumulator = wmma::fragment<wmma::accumulator, kMn, kMn, kK, float>;
using RowMajor = wmma::row_major;
using ColMajor = wmma::col_major;

// Address of the fragment at (row r0, column c0) of a logical matrix stored row-major (element (r, c) at
// p[r * ld + c]) or column-major (at p[c * ld + r]).
template <typename Layout>
__device__ const float* tile_at(const float* p, int ld, int r0, int c0) {
  if constexpr (std::is_same_v<Layout, RowMajor>)
    return p + r0 * ld + c0;
  else
    return p + c0 * ld + r0;
}

// out(m, n) = sum_{k < K} a(m, k) b(k, n) over the 16 x 16 output tiles of an M x N product (M and N
// multiples of 16, K of 8; a is M x K, b is K x N, each row- or column-major in shared memory). The tiles
// are dealt to the warps round-robin in a fixed order (the same M and N give a warp the same tiles in
// every product); epilogue(m0, n0, acc) receives each finished tile, called by the whole warp.
template <typename ALayout, typename BLayout, typename Epilogue>
__device__ void tensor_core_matmul(int M, int N, int K, const float* a, int lda, const float* b, int ldb,
                                   Epilogue epilogue) {
  const int warp = threadIdx.x / 32;
  const int tiles_n = N / kMn, tiles = (M / kMn) * tiles_n;
  for (int tile = warp; tile < tiles; tile += kWarps) {
    const int m0 = tile / tiles_n * kMn, n0 = tile % tiles_n * kMn;
    Accumulator acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += kK) {
      wmma::fragment<wmma::matrix_a, kMn, kMn, kK, wmma::precision::tf32, ALayout> fa;
      wmma::fragment<wmma::matrix_b, kMn, kMn, kK, wmma::precision::tf32, BLayout> fb;
      wmma::load_matrix_sync(fa, tile_at<ALayout>(a, lda, m0, k0), lda);
      wmma::load_matrix_sync(fb, tile_at<BLayout>(b, ldb, k0, n0), ldb);
#pragma unroll
      for (int e = 0; e < fa.num_elements; ++e) fa.x[e] = wmma::__float_to_tf32(fa.x[e]);
#pragma unroll
      for (int e = 0; e < fb.num_elements; ++e) fb.x[e] = wmma::__float_to_tf32(fb.x[e]);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    epilogue(m0, n0, acc);
  }
}

// Stores a finished tile row-major at (m0, n0) of dst.
struct StoreTile {
  float* dst;
  int ld;
  __device__ void operator()(int m0, int n0, const Accumulator& acc) const {
    wmma::store_matrix_sync(dst + m0 * ld + n0, acc, ld, wmma::mem_row_major);
  }
};

}  // namespace roofbench::gpt::cuda::attention::tensor_core
