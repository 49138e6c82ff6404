// hopper_path_available and the TMA tensor-map encoder (roofbench/hopper_host.hpp).
#include "roofbench/hopper_host.hpp"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::hopper {

#if defined(ROOFBENCH_HOPPER_90A)
namespace detail {
bool sm90a_code_loads(int device);  // hopper_probe.cu, built for sm_90a alone
}
#endif

namespace {

bool ask_hopper_path(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (major != 9 || minor != 0) return false;
#if defined(ROOFBENCH_HOPPER_90A)
  return detail::sm90a_code_loads(device);
#else
  return false;
#endif
}

}  // namespace

// Asked once per device: the probe loads a module, which costs more than a small launch the answer decides.
bool hopper_path_available(int device) {
  static std::mutex guard;
  static std::map<int, bool> answers;
  const std::lock_guard<std::mutex> lock(guard);
  const auto known = answers.find(device);
  if (known != answers.end()) return known->second;
  return answers[device] = ask_hopper_path(device);
}

std::uint32_t element_bytes(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: throw Error("hopper: tensor-map data type " + std::to_string(int(type)) + " has no known size");
  }
}

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("hopper::make_tensor_map_2d: " + what);
}

// cuTensorMapEncodeTiled from the driver the runtime already loaded (its 12.0 signature).
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  ROOFBENCH_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault,
                                                  &found));
  require(found == cudaDriverEntryPointSuccess && function != nullptr,
          "the driver has no cuTensorMapEncodeTiled (query result " + std::to_string(int(found)) + ")");
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
}

}  // namespace

CUtensorMap make_tensor_map_2d(const Matrix2d& m, std::uint32_t box_rows, std::uint32_t box_cols,
                               TileSwizzle swizzle) {
  const std::uint32_t size = element_bytes(m.type);
  require(reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0, "the matrix's address is not 16-byte aligned");
  require(m.rows > 0 && m.cols > 0, "the matrix is empty");
  require(m.row_stride_bytes % 16 == 0 && m.row_stride_bytes >= m.cols * size,
          "row stride " + std::to_string(m.row_stride_bytes) + " bytes is not a multiple of 16 at least a row long");
  require(box_rows >= 1 && box_rows <= 256 && box_cols >= 1 && box_cols <= 256, "box sides must be 1 to 256");
  require(box_cols * size % 16 == 0, "a box row must be a multiple of 16 bytes");
  require(swizzle != TileSwizzle::bytes128 || box_cols * size == 128, "a 128-byte swizzle needs 128-byte box rows");

  const cuuint64_t extent[2] = {m.cols, m.rows};  // innermost first
  const cuuint64_t stride[1] = {m.row_stride_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t step[2] = {1, 1};
  CUtensorMap map{};
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();  // looked up once a process
  const CUresult status = encode(
      &map, m.type, 2, const_cast<void*>(m.data), extent, stride, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
      swizzle == TileSwizzle::bytes128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  require(status == CUDA_SUCCESS, "cuTensorMapEncodeTiled returned CUresult " + std::to_string(int(status)));
  return map;
}

}  // namespace roofbench::hopper
