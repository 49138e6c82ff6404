#include "cpu_kernels.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "thread_team.hpp"

#ifdef ROOFBENCH_HAVE_CBLAS
#include <cblas.h>
#endif

// The library is built for baseline x86-64 so the plugin loads on any machine; clones of the hot loops
// let them use AVX2+FMA or AVX-512 where the CPU has them (picked once, at load time).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ROOFBENCH_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ROOFBENCH_VECTOR_CLONES
#endif

namespace roofbench::kernels::cpu {

namespace {

// Elements per thread below which a streaming loop uses fewer threads: 8192 elements (32-64 KiB per
// array) take about a microsecond on one core, which handing chunks to other threads would not beat.
constexpr std::int64_t kStreamingGrain = 8192;

template <typename T, typename Element>
ROOFBENCH_VECTOR_CLONES void for_each_element_in(T* out, std::int64_t begin, std::int64_t end, Element element) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = element(i);
}

// Every streaming kernel: out[i] = element(i), split statically across threads. Cloned functions stay
// in this anonymous namespace because GCC gives their resolvers default visibility whatever
// -fvisibility says, and a plugin should export nothing but its entry point.
template <typename T, typename Element>
void for_each_element(T* out, std::int64_t n, Element element) {
  parallel_for(n, kStreamingGrain,
               [&](std::int64_t begin, std::int64_t end, int) { for_each_element_in(out, begin, end, element); });
}

}  // namespace

void stream_copy(const double* a, double* b, std::int64_t n) {
  for_each_element(b, n, [a](std::int64_t i) { return a[i]; });
}

void stream_triad(double* a, const double* b, const double* c, double scalar, std::int64_t n) {
  for_each_element(a, n, [=](std::int64_t i) { return b[i] + scalar * c[i]; });
}

template <typename T>
void add(const T* a, const T* b, T* c, std::int64_t n) {
  for_each_element(c, n, [=](std::int64_t i) { return a[i] + b[i]; });
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

// Blocking, after the GotoBLAS/BLIS scheme. A register tile of C (kTileRows x kTileCols, 12 AVX
// registers) accumulates over a depth slice of kDepthBlock; a packed micro-panel of B (kDepthBlock x
// kTileCols, 16 KiB) then stays in L1 and a packed block of A (kRowBlock x kDepthBlock, 72 KiB) in L2,
// while the packed slice of B (kDepthBlock x n) is shared by all threads. Packing makes both streams
// contiguous: without it, power-of-two n puts every B row the tile reads in the same L1 set. A plain
// i-k-j loop over cache tiles ran 3-5x slower on a Zen core: it loads and stores C once per FMA.
constexpr std::int64_t kTileRows = 6;
constexpr std::int64_t kTileCols = 16;
constexpr std::int64_t kDepthBlock = 256;
constexpr std::int64_t kRowBlock = 72;  // multiple of kTileRows; also the unit of parallel work

// Eight floats: one AVX register, or two SSE registers in the baseline clone.
using Float8 = float __attribute__((vector_size(32)));
constexpr std::int64_t kVectorsPerTileRow = kTileCols / 8;

// C[kTileRows x kTileCols] (row stride ldc) += a_panel * b_panel over `depth`. a_panel holds kTileRows
// values per depth step, b_panel kTileCols: both as pack_rows/pack_cols lay them out.
ROOFBENCH_VECTOR_CLONES void accumulate_register_tile(const float* a_panel, const float* b_panel,
                                                      std::int64_t depth, float* C, std::int64_t ldc) {
  Float8 acc[kTileRows][kVectorsPerTileRow] = {};
  for (std::int64_t p = 0; p < depth; ++p) {
    Float8 b[kVectorsPerTileRow];
    for (std::int64_t v = 0; v < kVectorsPerTileRow; ++v)
      std::memcpy(&b[v], b_panel + p * kTileCols + 8 * v, sizeof(Float8));
    for (std::int64_t r = 0; r < kTileRows; ++r) {
      const float a = a_panel[p * kTileRows + r];
      for (std::int64_t v = 0; v < kVectorsPerTileRow; ++v) acc[r][v] += a * b[v];
    }
  }
  for (std::int64_t r = 0; r < kTileRows; ++r)
    for (std::int64_t v = 0; v < kVectorsPerTileRow; ++v) {
      Float8 c;
      std::memcpy(&c, C + r * ldc + 8 * v, sizeof c);
      c += acc[r][v];
      std::memcpy(C + r * ldc + 8 * v, &c, sizeof c);
    }
}

// The same for a tile cut short by the edge of C: computed whole into a scratch tile (the packed
// panels are zero-padded), then only its `rows` x `cols` corner is added.
void accumulate_tile(const float* a_panel, const float* b_panel, std::int64_t depth, float* C, std::int64_t ldc,
                     std::int64_t rows, std::int64_t cols) {
  if (rows == kTileRows && cols == kTileCols) return accumulate_register_tile(a_panel, b_panel, depth, C, ldc);
  float scratch[kTileRows * kTileCols] = {};
  accumulate_register_tile(a_panel, b_panel, depth, scratch, kTileCols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) C[r * ldc + c] += scratch[r * kTileCols + c];
}

struct Range {
  std::int64_t begin, end;
  std::int64_t size() const { return end - begin; }
};

Range block(std::int64_t index, std::int64_t block_size, std::int64_t extent) {
  return {index * block_size, std::min((index + 1) * block_size, extent)};
}

// A[rows, depth] (row stride k) -> panels of kTileRows rows, each stored depth-major, zero-padded.
void pack_rows(const float* A, std::int64_t k, Range rows, Range depth, float* packed) {
  for (std::int64_t panel = rows.begin; panel < rows.end; panel += kTileRows)
    for (std::int64_t p = depth.begin; p < depth.end; ++p)
      for (std::int64_t r = panel; r < panel + kTileRows; ++r) *packed++ = r < rows.end ? A[r * k + p] : 0.0f;
}

// B[depth, cols] (row stride n) -> one panel of kTileCols columns, stored depth-major, zero-padded.
void pack_cols(const float* B, std::int64_t n, Range depth, Range cols, float* packed) {
  for (std::int64_t p = depth.begin; p < depth.end; ++p)
    for (std::int64_t c = cols.begin; c < cols.begin + kTileCols; ++c) *packed++ = c < cols.end ? B[p * n + c] : 0.0f;
}

std::int64_t blocks(std::int64_t extent, std::int64_t block_size) { return (extent + block_size - 1) / block_size; }

}  // namespace

void matmul_blocked(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n,
                    std::int64_t k) {
  const std::int64_t row_blocks = blocks(m, kRowBlock), col_panels = blocks(n, kTileCols);
  std::vector<float> packed_b(static_cast<std::size_t>(kDepthBlock * kTileCols * col_panels));
  std::vector<std::vector<float>> packed_a(static_cast<std::size_t>(team_size()));
  // The tiles only accumulate; each thread clears the row blocks it will own (same static split).
  parallel_for(row_blocks, 1, [&](std::int64_t first, std::int64_t last, int) {
    for (std::int64_t t = first; t < last; ++t) {
      const Range rows = block(t, kRowBlock, m);
      std::fill(C + rows.begin * n, C + rows.end * n, 0.0f);
    }
  });
  for (std::int64_t d = 0; d < blocks(k, kDepthBlock); ++d) {
    const Range depth = block(d, kDepthBlock, k);
    parallel_for(col_panels, 1, [&](std::int64_t first, std::int64_t last, int) {
      for (std::int64_t q = first; q < last; ++q)
        pack_cols(B, n, depth, block(q, kTileCols, n), packed_b.data() + q * kTileCols * depth.size());
    });
    parallel_for(row_blocks, 1, [&](std::int64_t first, std::int64_t last, int thread) {
      std::vector<float>& panel = packed_a[static_cast<std::size_t>(thread)];
      panel.resize(static_cast<std::size_t>(kRowBlock * kDepthBlock));
      for (std::int64_t t = first; t < last; ++t) {
        const Range rows = block(t, kRowBlock, m);
        pack_rows(A, k, rows, depth, panel.data());
        for (std::int64_t q = 0; q < col_panels; ++q) {
          const Range cols = block(q, kTileCols, n);
          for (std::int64_t r = rows.begin; r < rows.end; r += kTileRows)
            accumulate_tile(panel.data() + (r - rows.begin) * depth.size(),
                            packed_b.data() + q * kTileCols * depth.size(), depth.size(), C + r * n + cols.begin, n,
                            std::min(kTileRows, rows.end - r), cols.size());
        }
      }
    });
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
