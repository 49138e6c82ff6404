#include "cpu_kernels.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>

#ifdef ROOFBENCH_HAVE_CBLAS
#include <cblas.h>
#endif

// Without OpenMP the loops simply run on one thread; the macro keeps -Wunknown-pragmas quiet then.
#ifdef _OPENMP
#define ROOFBENCH_PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#else
#define ROOFBENCH_PARALLEL_FOR
#endif

// The library is built for baseline x86-64 so the plugin loads on any machine; clones of the hot loops
// let them use AVX2+FMA or AVX-512 where the CPU has them (picked once, at load time).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ROOFBENCH_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ROOFBENCH_VECTOR_CLONES
#endif

namespace roofbench::kernels::cpu {

ROOFBENCH_VECTOR_CLONES void stream_copy(const double* a, double* b, std::int64_t n) {
  ROOFBENCH_PARALLEL_FOR
  for (std::int64_t i = 0; i < n; ++i) b[i] = a[i];
}

ROOFBENCH_VECTOR_CLONES void stream_triad(double* a, const double* b, const double* c, double scalar,
                                          std::int64_t n) {
  ROOFBENCH_PARALLEL_FOR
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
}

template <typename T>
ROOFBENCH_VECTOR_CLONES void add(const T* a, const T* b, T* c, std::int64_t n) {
  ROOFBENCH_PARALLEL_FOR
  for (std::int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}
template void add<float>(const float*, const float*, float*, std::int64_t);
template void add<double>(const double*, const double*, double*, std::int64_t);

void matmul_naive(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n, std::int64_t k) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (std::int64_t p = 0; p < k; ++p) sum += A[i * k + p] * B[p * n + j];
      C[i * n + j] = sum;
    }
}

namespace {

// Tile sizes: a B tile (kDepthTile x kColTile floats, 128 KiB) stays in L2 while a row tile of C
// passes over it, and the row segment of C being accumulated (kColTile floats, 1 KiB) stays in L1 across
// the whole depth loop. kRowTile is also the unit of parallel work, small enough that n = 64 still
// gives two threads something to do.
constexpr std::int64_t kRowTile = 32;
constexpr std::int64_t kDepthTile = 128;
constexpr std::int64_t kColTile = 256;

struct Range {
  std::int64_t begin, end;
};

// C[rows, cols] += A[rows, depth] * B[depth, cols]. The i-k-j order turns the innermost loop into a
// contiguous a * B-row + C-row update, which the compiler vectorises.
ROOFBENCH_VECTOR_CLONES void accumulate_tile(const float* A, const float* B, float* C, std::int64_t n,
                                             std::int64_t k, Range rows, Range depth, Range cols) {
  for (std::int64_t i = rows.begin; i < rows.end; ++i) {
    float* __restrict c_row = C + i * n;
    for (std::int64_t p = depth.begin; p < depth.end; ++p) {
      const float a = A[i * k + p];
      const float* __restrict b_row = B + p * n;
      for (std::int64_t j = cols.begin; j < cols.end; ++j) c_row[j] += a * b_row[j];
    }
  }
}

Range tile(std::int64_t begin, std::int64_t size, std::int64_t extent) {
  return {begin, std::min(begin + size, extent)};
}

}  // namespace

void matmul_blocked(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n,
                    std::int64_t k) {
  const std::int64_t row_tiles = (m + kRowTile - 1) / kRowTile;
  ROOFBENCH_PARALLEL_FOR
  for (std::int64_t t = 0; t < row_tiles; ++t) {
    const Range rows = tile(t * kRowTile, kRowTile, m);
    // Each thread clears the rows it owns: the tiles below only accumulate.
    std::fill(C + rows.begin * n, C + rows.end * n, 0.0f);
    for (std::int64_t p = 0; p < k; p += kDepthTile)
      for (std::int64_t j = 0; j < n; j += kColTile)
        accumulate_tile(A, B, C, n, k, rows, tile(p, kDepthTile, k), tile(j, kColTile, n));
  }
}

#ifdef ROOFBENCH_HAVE_CBLAS
namespace {
int blas_dimension(std::int64_t value) {
  if (value < 0 || value > INT_MAX) throw std::length_error("matmul_blas: dimension does not fit BLAS's int");
  return static_cast<int>(value);
}
}  // namespace

void matmul_blas(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n, std::int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_dimension(m), blas_dimension(n),
              blas_dimension(k), 1.0f, A, blas_dimension(k), B, blas_dimension(n), 0.0f, C, blas_dimension(n));
}
#endif

void stream_copy_reference(const double* a, double* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) b[i] = a[i];
}

void stream_triad_reference(const double* b, const double* c, double scalar, double* a, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
}

template <typename T>
void add_reference(const T* a, const T* b, double* c, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) c[i] = static_cast<double>(a[i]) + static_cast<double>(b[i]);
}
template void add_reference<float>(const float*, const float*, double*, std::int64_t);
template void add_reference<double>(const double*, const double*, double*, std::int64_t);

void matmul_reference_row(const float* A, const float* B, double* c_row, std::int64_t row, std::int64_t n,
                          std::int64_t k) {
  std::fill(c_row, c_row + n, 0.0);
  for (std::int64_t p = 0; p < k; ++p) {
    const double a = A[row * k + p];
    for (std::int64_t j = 0; j < n; ++j) c_row[j] += a * static_cast<double>(B[p * n + j]);
  }
}

void matmul_reference(const float* A, const float* B, double* C, std::int64_t m, std::int64_t n,
                      std::int64_t k) {
  for (std::int64_t i = 0; i < m; ++i) matmul_reference_row(A, B, C + i * n, i, n, k);
}

}  // namespace roofbench::kernels::cpu
