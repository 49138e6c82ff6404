// Host side of the Hopper primitives (roofbench/hopper.cuh): choosing the sm_90a path at run time, and
// the TMA tensor maps its kernels read tiles through.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums only: nothing here links libcuda (see make_tensor_map_2d)

#include <cstdint>

namespace roofbench::hopper {

// True when `device` is compute capability 9.0 exactly (sm_90a code runs nowhere else) and this build
// holds sm_90a code that loads on it (ROOFBENCH_HOPPER_90A). False for any other device, a device
// index that does not exist, or no GPU at all; never throws. Plugins call it to choose the Hopper path,
// as often as they like: the answer is kept per device.
bool hopper_path_available(int device);

// The shared-memory layout a tensor map writes its box in. bytes128 is the layout the wgmma
// descriptors of hopper.cuh call Swizzle::bytes128 (box rows of exactly 128 bytes).
enum class TileSwizzle { none, bytes128 };

// A row-major matrix in global memory, as a TMA tensor map sees it.
struct Matrix2d {
  const void* data;               // 16-byte aligned
  CUtensorMapDataType type;       // e.g. CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
  std::uint64_t rows, cols;       // the extent: reads past it fill the box with zeros
  std::uint64_t row_stride_bytes; // a multiple of 16, at least cols * element size
};

// A 2-D tiled tensor map over `matrix` whose box is box_rows x box_cols elements (each at most 256;
// box_cols * element size a multiple of 16, and exactly 128 bytes for bytes128), zero fill out of bounds.
// Encoded by cuTensorMapEncodeTiled, reached through cudaGetDriverEntryPointByVersion so that nothing
// links libcuda. Throws roofbench::Error naming the failed check or driver call. Pass the result to a
// kernel by value as `const __grid_constant__ CUtensorMap`.
CUtensorMap make_tensor_map_2d(const Matrix2d& matrix, std::uint32_t box_rows, std::uint32_t box_cols,
                               TileSwizzle swizzle);

// Bytes per element of a tensor-map data type (1, 2, 4 or 8); throws for types it does not know.
std::uint32_t element_bytes(CUtensorMapDataType type);

}  // namespace roofbench::hopper
