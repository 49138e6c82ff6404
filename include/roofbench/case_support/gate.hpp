// Correctness gates for CUDA cases: the host poisons outputs with NaN, runs the case once on fresh inputs,
// then check() compares the output with an fp64 reference computed on the host from the inputs as
// stored. Outputs too big to compare whole are compared on a sample, and scanned whole on the device for
// non-finite values, so a region the kernel never wrote still fails the gate. Each gate also sets
// `figures` to what it counted (nonfinite_outputs, ...): the case keeps them and returns them from
// Case::figures().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "roofbench/plugin.hpp"

namespace roofbench::case_support {

struct DeviceArray {
  const void* data = nullptr;
  ElementType type = ElementType::f32;
};

// Copies `count` elements, `stride` elements apart, starting at element `first` of `array`, and decodes
// them. Waits for the case's stream first.
std::vector<double> fetch(Context& ctx, DeviceArray array, std::size_t first, std::size_t count,
                          std::size_t stride = 1);

// Counts NaN and infinite values of a whole device array (f32, bf16 or f16) with a kernel, so that even
// multi-GiB outputs are scanned without copying them to the host.
class NonfiniteScan {
 public:
  void setup(Context& ctx);  // allocates the device counter: call from Case::setup
  std::uint64_t count(Context& ctx, DeviceArray array, std::size_t n) const;

 private:
  unsigned long long* device_count_ = nullptr;
};

// Where element (i, j) of matrix number `batch` lives: i * row + j * col + batch * matrix, in elements.
struct MatrixStrides {
  std::int64_t row = 0, col = 0, matrix = 0;
  static MatrixStrides row_major(std::int64_t rows, std::int64_t cols) { return {cols, 1, rows * cols}; }
  static MatrixStrides column_major(std::int64_t rows, std::int64_t cols) { return {1, rows, rows * cols}; }
};

// C = A B for `batch` independent matrices: A is m x k, B is k x n, C is m x n.
struct MatmulOperands {
  DeviceArray a, b, c;
  MatrixStrides a_strides, b_strides, c_strides;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};

// Compares about a thousand entries of C with fp64 dot products: 512 at pseudo-random (batch, i, j) and
// up to 256 evenly spaced ones along each of the last row and last column of the last matrix (where a
// mishandled edge tile shows), so the cost is ~1000 k multiply-adds whatever the size. Every entry of C
// is scanned for non-finite values.
inline constexpr std::size_t kMatmulRandomSamples = 512;
inline constexpr std::size_t kMatmulEdgeSamples = 256;
Check check_matmul_sampled(Context& ctx, const MatmulOperands& operands, const NonfiniteScan& scan,
                           std::vector<Figure>& figures);

// out[i] = reference(inputs[0][i], inputs[1][i], ...) for i in [0, n).
struct ElementwiseOperands {
  std::size_t n = 0;
  DeviceArray out;
  std::vector<DeviceArray> inputs;
  std::function<double(std::span<const double>)> reference;
  // Beyond the L2 measure, every compared element must satisfy |out - ref| <= bound * |ref|: an
  // elementwise result is one rounding away from exact, and a single wrong element in a billion would
  // vanish in an L2 norm.
  double max_relative_error_per_element = 0;
};

// Up to kElementwiseFullCheck elements every element is compared; beyond that kElementwiseSampleBlocks
// evenly spaced blocks of kElementwiseBlock elements plus the last kElementwiseBlock. Either way the whole
// output is scanned for non-finite values on the device.
inline constexpr std::size_t kElementwiseFullCheck = std::size_t{1} << 26;
inline constexpr std::size_t kElementwiseSampleBlocks = 256;
inline constexpr std::size_t kElementwiseBlock = 4096;
Check check_elementwise(Context& ctx, const ElementwiseOperands& operands, const NonfiniteScan& scan,
                        std::vector<Figure>& figures);

}  // namespace roofbench::case_support
