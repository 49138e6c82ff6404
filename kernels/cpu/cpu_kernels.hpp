// CPU kernels shared by the cpu plugin and the host's CPU ceilings, with the fp64 references their
// gates and tests compare against. Matrices are row-major: A is m x k, B is k x n, C is m x n.
#pragma once

#include <cstdint>

namespace roofbench::kernels::cpu {

// STREAM's triad scalar; any value works, STREAM's own keeps results comparable.
inline constexpr double kTriadScalar = 3.0;

// STREAM copy: b = a.
void stream_copy(const double* a, double* b, std::int64_t n);
// STREAM triad: a = b + scalar * c.
void stream_triad(double* a, const double* b, const double* c, double scalar, std::int64_t n);
// c = a + b. Instantiated for float and double.
template <typename T>
void add(const T* a, const T* b, T* c, std::int64_t n);

// C = A * B, one dot product per output in (i, j, k) order on one thread: the baseline the other two
// improve on.
void matmul_naive(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n, std::int64_t k);
// C = A * B from packed cache blocks through a register tile, threads over row blocks (thread_team.hpp). Also
// the host's CPU GEMM ceiling when no BLAS is present.
void matmul_blocked(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n, std::int64_t k);
#ifdef ROOFBENCH_HAVE_CBLAS
// C = A * B through the system BLAS (cblas_sgemm).
void matmul_blas(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n, std::int64_t k);
#endif

// fp64 references: deliberately plain serial loops sharing no code with the kernels above.
void stream_copy_reference(const double* a, double* b, std::int64_t n);
void stream_triad_reference(const double* b, const double* c, double scalar, double* a, std::int64_t n);
template <typename T>
void add_reference(const T* a, const T* b, double* c, std::int64_t n);
// One row of C = A * B (row `row`, all n columns), so a gate can check a sample of rows of a large
// product without paying for all of it.
void matmul_reference_row(const float* A, const float* B, double* c_row, std::int64_t row, std::int64_t n,
                          std::int64_t k);
void matmul_reference(const float* A, const float* B, double* C, std::int64_t m, std::int64_t n, std::int64_t k);

}  // namespace roofbench::kernels::cpu
