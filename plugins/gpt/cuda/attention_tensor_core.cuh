// The tensor-core tile machinery of the fused attention v3: WMMA products of matrices in shared memory,
// TF32 (m16n16k8) on fp32 operands or bf16 (m16n16k16, R2) on bf16 ones, fp32 accumulation either way,
// dealt to the warps tile by tile, and the shared-memory geometry they use. Fragments go through shared
// memory (store_matrix_sync) before row-dependent work; only the order-independent TF32 rounding touches
// their elements.
#pragma once

#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

#include "attention_common.cuh"

namespace roofbench::gpt::cuda::attention::tensor_core {

namespace wmma = nvcuda::wmma;

inline constexpr int kTile = 32;      // query rows (forward, dq) or key rows (dk, dv) per block
inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kMn = 16;  // WMMA's m and n
// Shared memory row strides in elements: multiples of WMMA's ldm (4 for 32-bit types, 8 for 16-bit ones)
// that are 4 mod 32 in 32-bit words, so the rows of a fragment load start on different banks.
inline constexpr int kHeadStride = kHeadDim + 4;      // fp32 rows of a head
inline constexpr int kHeadStride16 = kHeadDim + 8;    // bf16 rows of a head
inline constexpr int kScoreStride = kMaxT + 4;        // fp32 scores
inline constexpr int kScoreStride16 = kMaxT + 8;      // bf16 probabilities (the p v operand)
inline constexpr int kScratch = kMn * kMn;  // floats of each warp's private 16 x 16 staging tile
static_assert(kHeadStride % 4 == 0 && kScoreStride % 4 == 0 && kHeadStride16 % 8 == 0 && kScoreStride16 % 8 == 0);
static_assert(kTile % kMn == 0 && kMaxT % kMn == 0 && kHeadDim % kMn == 0);

__host__ __device__ constexpr int pad16(int n) { return (n + kMn - 1) / kMn * kMn; }

// The WMMA shape and fragment element type of an operand type: fp32 operands run as TF32 (k = 8, rounded on
// load), bf16 ones as bf16 (k = 16).
template <typename Elem>
struct Mma;
template <>
struct Mma<float> {
  static constexpr int kK = 8;
  using Precision = wmma::precision::tf32;
};
template <>
struct Mma<__nv_bfloat16> {
  static constexpr int kK = 16;
  using Precision = __nv_bfloat16;
};

template <typename Elem>
using AccumulatorOf = wmma::fragment<wmma::accumulator, kMn, kMn, Mma<Elem>::kK, float>;
using RowMajor = wmma::row_major;
using ColMajor = wmma::col_major;

// Address of the fragment at (row r0, column c0) of a logical matrix stored row-major (element (r, c) at
// p[r * ld + c]) or column-major (at p[c * ld + r]).
template <typename Layout, typename Elem>
__device__ const Elem* tile_at(const Elem* p, int ld, int r0, int c0) {
  if constexpr (std::is_same_v<Layout, RowMajor>)
    return p + r0 * ld + c0;
  else
    return p + c0 * ld + r0;
}

// out(m, n) = sum_{k < K} a(m, k) b(k, n) over the 16 x 16 output tiles of an M x N product (M and N
// multiples of 16, K of Mma<Elem>::kK; a is M x K, b is K x N, each row- or column-major in shared memory).
// The tiles are dealt to the warps round-robin in a fixed order (the same M and N give a warp the same
// tiles in every product); epilogue(m0, n0, acc) receives each finished tile, called by the whole warp.
template <typename ALayout, typename BLayout, typename Elem, typename Epilogue>
__device__ void tensor_core_matmul(int M, int N, int K, const Elem* a, int lda, const Elem* b, int ldb,
                                   Epilogue epilogue) {
  constexpr int kK = Mma<Elem>::kK;
  using Precision = typename Mma<Elem>::Precision;
  const int warp = threadIdx.x / 32;
  const int tiles_n = N / kMn, tiles = (M / kMn) * tiles_n;
  for (int tile = warp; tile < tiles; tile += kWarps) {
    const int m0 = tile / tiles_n * kMn, n0 = tile % tiles_n * kMn;
    AccumulatorOf<Elem> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += kK) {
      wmma::fragment<wmma::matrix_a, kMn, kMn, kK, Precision, ALayout> fa;
      wmma::fragment<wmma::matrix_b, kMn, kMn, kK, Precision, BLayout> fb;
      wmma::load_matrix_sync(fa, tile_at<ALayout>(a, lda, m0, k0), lda);
      wmma::load_matrix_sync(fb, tile_at<BLayout>(b, ldb, k0, n0), ldb);
      if constexpr (std::is_same_v<Elem, float>) {
#pragma unroll
        for (int e = 0; e < fa.num_elements; ++e) fa.x[e] = wmma::__float_to_tf32(fa.x[e]);
#pragma unroll
        for (int e = 0; e < fb.num_elements; ++e) fb.x[e] = wmma::__float_to_tf32(fb.x[e]);
      }
      wmma::mma_sync(acc, fa, fb, acc);
    }
    epilogue(m0, n0, acc);
  }
}

// Stores a finished tile (fp32) row-major at (m0, n0) of dst.
struct StoreTile {
  float* dst;
  int ld;
  template <typename Fragment>
  __device__ void operator()(int m0, int n0, const Fragment& acc) const {
    wmma::store_matrix_sync(dst + m0 * ld + n0, acc, ld, wmma::mem_row_major);
  }
};

}  // namespace roofbench::gpt::cuda::attention::tensor_core
