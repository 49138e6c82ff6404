// Each primitive of roofbench/hopper.cuh against a reference: TMA tiles byte for byte (edges zero-filled,
// the 128-byte swizzle as documented), mbarrier phase parities, 64 x N x K bf16 wgmma GEMMs (A through
// TMA, registers, or plain stores), bf16 and fp16 GEMMs with B MN-major (the transpose bit) and a setmaxnreg producer/consumer GEMM against fp64. Outputs are
// poisoned (0xFF bytes) first and inputs are fresh random numbers each run. Needs a compute capability 9.0
// GPU; elsewhere the GPU tests skip and only the host-side checks run.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hopper_test_kernels.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/hopper_host.hpp"

namespace roofbench::hopper {
namespace {

// The compute capability of device 0 as major * 10 + minor, or 0 without a usable GPU.
int capability() {
  int devices = 0, major = 0, minor = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess)
    return 0;
  return major * 10 + minor;
}

std::mt19937_64& rng() {
  static std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

// Device memory freed on scope exit, filled with 0xFF bytes (NaN as floats) until written.
template <typename T>
struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t n) : count(n) {
    ROOFBENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(T)));
    ROOFBENCH_CUDA(cudaMemset(data, 0xFF, n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    ROOFBENCH_CUDA(cudaMemcpy(data, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { (void)cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> read() const {
    std::vector<T> host(count);
    ROOFBENCH_CUDA(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* data = nullptr;
  std::size_t count;
};

class HopperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int cc = capability();
    if (cc == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or found none)";
    if (cc != 90)
      GTEST_SKIP() << "device 0 is compute capability " << cc / 10 << "." << cc % 10
                   << "; sm_90a code runs on 9.0 alone";
    ROOFBENCH_CUDA(cudaSetDevice(0));
  }
};

TEST(HopperHost, PathAvailableExactlyOnComputeCapability90) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  (void)cudaGetLastError();
  EXPECT_EQ(hopper_path_available(0), capability() == 90) << "device 0, compute capability " << capability();
  EXPECT_FALSE(hopper_path_available(-1));
  EXPECT_FALSE(hopper_path_available(devices));
}

TEST(HopperHost, TensorMapChecksItsArgumentsBeforeTheDriver) {
  alignas(16) static std::uint16_t matrix[64 * 64];
  const Matrix2d good{matrix, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 64, 64, 128};
  Matrix2d odd_stride = good;
  odd_stride.row_stride_bytes = 120;
  Matrix2d misaligned = good;
  misaligned.data = matrix + 1;
  EXPECT_THROW(make_tensor_map_2d(odd_stride, 64, 64, TileSwizzle::none), Error);
  EXPECT_THROW(make_tensor_map_2d(misaligned, 64, 64, TileSwizzle::none), Error);
  EXPECT_THROW(make_tensor_map_2d(good, 64, 32, TileSwizzle::bytes128), Error) << "32 bf16 are 64-byte rows";
  EXPECT_THROW(make_tensor_map_2d(good, 300, 64, TileSwizzle::none), Error) << "box side over 256";
  EXPECT_EQ(element_bytes(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16), 2u);
  EXPECT_EQ(element_bytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT32), 4u);
}

// A rows x cols matrix of random 16-bit words, rows `stride` words apart (the gap holds random words too,
// which a TMA box must not show).
struct WordMatrix {
  WordMatrix(int r, int c, int s) : rows(r), cols(c), stride(s), words(std::size_t(r) * s) {
    for (auto& w : words) w = static_cast<std::uint16_t>(rng()());
  }
  std::uint16_t at(int r, int c) const {
    return r >= 0 && r < rows && c >= 0 && c < cols ? words[std::size_t(r) * stride + c] : 0;
  }
  int rows, cols, stride;
  std::vector<std::uint16_t> words;
};

// Loads the box at (row, col) and checks every element; `swizzled`: 128-byte rows in the 128-byte swizzle.
void expect_tile(const WordMatrix& m, int row, int col, int box_rows, int box_cols, bool swizzled) {
  DeviceBuffer<std::uint16_t> global(m.words);
  const Matrix2d matrix{global.data, CU_TENSOR_MAP_DATA_TYPE_UINT16, std::uint64_t(m.rows), std::uint64_t(m.cols),
                        std::uint64_t(m.stride) * 2};
  const CUtensorMap map =
      make_tensor_map_2d(matrix, box_rows, box_cols, swizzled ? TileSwizzle::bytes128 : TileSwizzle::none);
  DeviceBuffer<std::uint16_t> out(std::size_t(box_rows) * box_cols);
  test::tma_tile(map, row, col, box_rows * box_cols * 2, out.data);
  const std::vector<std::uint16_t> got = out.read();
  int wrong = 0;
  std::ostringstream first;
  for (int r = 0; r < box_rows; ++r)
    for (int c = 0; c < box_cols; ++c) {
      const int chunk = swizzled ? ((c / 8) ^ (r % 8)) : c / 8;  // 16-byte chunk of the row it lands in
      const std::uint16_t value = got[std::size_t(r) * box_cols + chunk * 8 + c % 8];
      const std::uint16_t want = m.at(row + r, col + c);
      if (value != want && wrong++ == 0)
        first << "box element (" << r << ", " << c << ") = matrix (" << row + r << ", " << col + c << "): got 0x"
              << std::hex << value << ", want 0x" << want << std::dec;
    }
  EXPECT_EQ(wrong, 0) << "TMA " << (swizzled ? "128-byte swizzled" : "unswizzled") << " box " << box_rows << "x"
                      << box_cols << " at (" << row << ", " << col << ") of a " << m.rows << "x" << m.cols
                      << " matrix: " << wrong << " wrong elements, first " << first.str();
}

TEST_F(HopperTest, TmaTileReproducesTheGlobalTile) {
  const WordMatrix m(200, 150, 152);
  expect_tile(m, 32, 64, 64, 64, false);
  expect_tile(m, 0, 8, 16, 128, false);
}

TEST_F(HopperTest, TmaTileAtTheEdgeIsZeroFilled) {
  const WordMatrix m(200, 150, 152);
  expect_tile(m, 192, 128, 64, 64, false);  // rows 200.. and columns 150.. (the stride's gap too) are outside
  expect_tile(m, -8, -16, 32, 64, false);   // negative coordinates read as outside as well
}

TEST_F(HopperTest, TmaTileWith128ByteSwizzleMatchesTheDocumentedLayout) {
  const WordMatrix m(200, 150, 152);
  expect_tile(m, 32, 64, 64, 64, true);
  expect_tile(m, 160, 96, 64, 64, true);  // partly outside: zeros land in the swizzled places too
}

// A box stored by TMA at the matrix's corner lands on the elements inside it and leaves every other word as it was.
TEST_F(HopperTest, TmaStoreWritesTheBoxAndNothingPastTheEdge) {
  constexpr int kRows = 40, kCols = 48, kBoxRows = 16, kBoxCols = 32, kRow = 32, kCol = 32;
  const std::vector<std::uint16_t> poison(std::size_t(kRows) * kCols, 0xdead);
  DeviceBuffer<std::uint16_t> global(poison);
  const Matrix2d matrix{global.data, CU_TENSOR_MAP_DATA_TYPE_UINT16, kRows, kCols, kCols * 2};
  test::tma_store_box(make_tensor_map_2d(matrix, kBoxRows, kBoxCols, TileSwizzle::none), kRow, kCol, kBoxRows,
                      kBoxCols);
  const std::vector<std::uint16_t> got = global.read();
  int wrong = 0;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      const bool in_box = r >= kRow && c >= kCol;  // the box's rows and columns past the matrix are clipped
      const std::uint16_t want = in_box ? std::uint16_t((r - kRow) * 256 + (c - kCol)) : 0xdead;
      wrong += got[std::size_t(r) * kCols + c] != want;
    }
  EXPECT_EQ(wrong, 0) << "a " << kBoxRows << "x" << kBoxCols << " box stored at (" << kRow << ", " << kCol
                      << ") of a " << kRows << "x" << kCols << " matrix";
}

// Each block of a two-block cluster multicasts one 128-byte swizzled box (the second partly past the matrix's last
// row) into both; each block's landing area must hold both boxes as a plain load of each would leave them.
TEST_F(HopperTest, ClusterMulticastLandsInEveryBlockOfTheMask) {
  constexpr int kBoxRows = 64, kBoxCols = 64, kRow0 = 100;
  constexpr std::uint32_t kBoxBytes = kBoxRows * kBoxCols * 2;
  const WordMatrix m(200, 64, 64);
  DeviceBuffer<std::uint16_t> global(m.words);
  const Matrix2d matrix{global.data, CU_TENSOR_MAP_DATA_TYPE_UINT16, 200, 64, 128};
  const CUtensorMap map = make_tensor_map_2d(matrix, kBoxRows, kBoxCols, TileSwizzle::bytes128);
  DeviceBuffer<std::uint16_t> out(std::size_t(test::kClusterBlocks) * test::kClusterBlocks * kBoxRows * kBoxCols);
  test::cluster_multicast(map, kRow0, kBoxRows, kBoxBytes, out.data);
  const std::vector<std::uint16_t> got = out.read();
  int wrong = 0;
  for (int block = 0; block < test::kClusterBlocks; ++block)
    for (int box = 0; box < test::kClusterBlocks; ++box)
      for (int r = 0; r < kBoxRows; ++r)
        for (int c = 0; c < kBoxCols; ++c) {
          const std::size_t at = (std::size_t(block * test::kClusterBlocks + box) * kBoxRows + r) * kBoxCols +
                                 ((c / 8) ^ (r % 8)) * 8 + c % 8;
          wrong += got[at] != m.at(kRow0 + box * kBoxRows + r, c);
        }
  EXPECT_EQ(wrong, 0) << "elements of the multicast boxes wrong in some block";
}

TEST_F(HopperTest, MbarrierPhasesFlipAsExpected) {
  std::vector<std::uint32_t> src(4);
  for (auto& w : src) w = static_cast<std::uint32_t>(rng()());
  DeviceBuffer<std::uint32_t> source(src);
  DeviceBuffer<int> out(2 * test::kMbarrierSteps + 4);
  test::mbarrier_phases(source.data, out.data);
  const std::vector<int> got = out.read();
  // {parity 0 complete, parity 1 complete} after each step.
  const int want[test::kMbarrierSteps][2] = {{0, 1}, {0, 1}, {1, 0}, {0, 1}, {0, 1}, {1, 0}};
  const char* step[test::kMbarrierSteps] = {
      "fresh barrier of 32 arrivals",       "31 of 32 arrivals",
      "32 arrivals (phase 0 complete)",     "32 more (phase 1 complete)",
      "arrive_expect_tx(16), no bytes yet", "the bulk copy's 16 bytes landed"};
  for (int s = 0; s < test::kMbarrierSteps; ++s)
    for (int parity = 0; parity < 2; ++parity)
      EXPECT_EQ(got[2 * s + parity], want[s][parity])
          << "mbarrier step " << s << " (" << step[s] << "): test_wait of parity " << parity;
  EXPECT_EQ(std::memcmp(got.data() + 2 * test::kMbarrierSteps, src.data(), 16), 0)
      << "bulk_copy_to_shared did not bring the 16 source bytes";
}

// Random 16-bit words, bf16 or fp16 (values in [-1, 1), exactly representable), and the same values as
// doubles.
struct Matrix16 {
  Matrix16(int r, int c, bool fp16 = false) : rows(r), cols(c), words(std::size_t(r) * c), values(words.size()) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (std::size_t i = 0; i < words.size(); ++i) {
      const float x = uniform(rng());
      if (fp16) {
        const __half h = __float2half_rn(x);
        words[i] = __half_raw(h).x;
        values[i] = __half2float(h);
        continue;
      }
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      words[i] = static_cast<std::uint16_t>(bits >> 16);  // truncation: any bf16 will do
      bits = std::uint32_t(words[i]) << 16;
      float rounded;
      std::memcpy(&rounded, &bits, 4);
      values[i] = rounded;
    }
  }
  // The same values transposed (cols x rows).
  Matrix16 transposed() const {
    Matrix16 t(*this);
    t.rows = cols, t.cols = rows;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        t.words[std::size_t(j) * rows + i] = words[std::size_t(i) * cols + j];
        t.values[std::size_t(j) * rows + i] = values[std::size_t(i) * cols + j];
      }
    return t;
  }
  int rows, cols;
  std::vector<std::uint16_t> words;
  std::vector<double> values;
};

// Relative L2 error of c (m x n) against A B^T in fp64, and the worst element, for the failure message.
std::string gemm_mismatch(const Matrix16& a, const Matrix16& b, const std::vector<float>& c, double bound) {
  double num = 0, den = 0, worst = -1;
  std::ostringstream where;
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < b.rows; ++j) {
      double ref = 0;
      for (int p = 0; p < a.cols; ++p) ref += a.values[std::size_t(i) * a.cols + p] * b.values[std::size_t(j) * b.cols + p];
      const double got = c[std::size_t(i) * b.rows + j], diff = std::isfinite(got) ? std::abs(got - ref) : INFINITY;
      num += diff * diff;
      den += ref * ref;
      if (diff > worst) {
        worst = diff;
        where.str("");
        where << "C(" << i << ", " << j << ") = " << got << ", want " << ref;
      }
    }
  const double error = std::sqrt(num / den);
  if (error <= bound) return "";
  std::ostringstream out;
  out << "relative L2 error " << error << " over the bound " << bound << "; worst element " << where.str();
  return out.str();
}

// bf16 inputs are exact, so only fp32 accumulation errs: well under 1e-4 relatively for K <= 512. A wrong
// layout, descriptor or fragment gives errors of order 1.
constexpr double kGemmBound = 1e-3;

CUtensorMap tile_map(const DeviceBuffer<std::uint16_t>& data, const Matrix16& m, int box_rows,
                     CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) {
  const Matrix2d matrix{data.data, type, std::uint64_t(m.rows), std::uint64_t(m.cols),
                        std::uint64_t(m.cols) * 2};
  return make_tensor_map_2d(matrix, box_rows, 64, TileSwizzle::bytes128);
}

void check_gemm_warpgroup(int n, test::ASource source, const char* source_name) {
  for (const int k : {16, 112, 256}) {
    const Matrix16 a(64, k), b(n, k);
    DeviceBuffer<std::uint16_t> da(a.words), db(b.words);
    DeviceBuffer<float> dc(std::size_t(64) * n);
    test::gemm_warpgroup(n, source, tile_map(da, a, 64), tile_map(db, b, n), da.data, k, dc.data);
    EXPECT_EQ(gemm_mismatch(a, b, dc.read(), kGemmBound), "")
        << "wgmma m64n" << n << "k16 bf16, A " << source_name << ", B by TMA (128-byte swizzle), K = " << k;
  }
}

TEST_F(HopperTest, WgmmaGemmWithTmaOperandsMatchesFp64) {
  check_gemm_warpgroup(64, test::ASource::tma_swizzled, "by TMA (128-byte swizzle)");
  check_gemm_warpgroup(128, test::ASource::tma_swizzled, "by TMA (128-byte swizzle)");
}

TEST_F(HopperTest, WgmmaGemmWithAFromRegistersMatchesFp64) {
  check_gemm_warpgroup(64, test::ASource::registers, "from registers");
  check_gemm_warpgroup(128, test::ASource::registers, "from registers");
}

TEST_F(HopperTest, WgmmaGemmWithUnswizzledAFromPlainStoresMatchesFp64) {
  check_gemm_warpgroup(64, test::ASource::plain_stores, "by plain stores (no swizzle, fence.proxy.async)");
  check_gemm_warpgroup(128, test::ASource::plain_stores, "by plain stores (no swizzle, fence.proxy.async)");
}

// A B with B stored K x N (MN-major, the transpose bit), as attention's P V reads V: bf16 and fp16, A from
// shared memory and from registers, N = 64 (one 64-column box) and 128 (two, the leading offset apart).
TEST_F(HopperTest, WgmmaGemmWithMnMajorBMatchesFp64) {
  for (const bool fp16 : {false, true})
    for (const bool registers : {false, true})
      for (const int n : {64, 128})
        for (const int k : {16, 112, 256}) {
          const Matrix16 a(64, k, fp16), b_rows(k, n, fp16);  // b_rows: B as stored, K rows of N elements
          const CUtensorMapDataType type = fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
          DeviceBuffer<std::uint16_t> da(a.words), db(b_rows.words);
          DeviceBuffer<float> dc(std::size_t(64) * n);
          test::gemm_mn_major_b(n, fp16, registers, tile_map(da, a, 64, type), tile_map(db, b_rows, 64, type), da.data,
                                k, dc.data);
          EXPECT_EQ(gemm_mismatch(a, b_rows.transposed(), dc.read(), kGemmBound), "")
              << "wgmma m64n" << n << "k16 " << (fp16 ? "f16" : "bf16") << ", A "
              << (registers ? "from registers" : "by TMA") << ", B MN-major by TMA (transpose bit), K = " << k;
        }
}

// The transposed operands (imm-trans 1, descriptor_mn_major_sw128): A^T and B^T as row-major k x 64 matrices
// loaded whole by TMA, against A B^T in fp64. K = 16: one step; 64: one 1024-byte atom pair per step across
// a whole 128-byte row; 256: sixteen steps, TMA's largest box.
void check_gemm_mn_major(bool a_from_registers) {
  for (const int k : {16, 64, 256}) {
    const Matrix16 a(64, k), b(64, k);
    const Matrix16 a_t = a.transposed(), b_t = b.transposed();
    DeviceBuffer<std::uint16_t> da_t(a_t.words), db_t(b_t.words);
    DeviceBuffer<float> dc(std::size_t(64) * 64);
    test::gemm_mn_major(a_from_registers, tile_map(da_t, a_t, k), tile_map(db_t, b_t, k), da_t.data, k, dc.data);
    EXPECT_EQ(gemm_mismatch(a, b, dc.read(), kGemmBound), "")
        << "wgmma m64n64k16 bf16, B MN-major (imm-trans-b 1), A "
        << (a_from_registers ? "from registers" : "MN-major (imm-trans-a 1)") << ", K = " << k;
  }
}

TEST_F(HopperTest, WgmmaGemmWithMnMajorOperandsMatchesFp64) {
  check_gemm_mn_major(false);
  check_gemm_mn_major(true);
}

TEST_F(HopperTest, SetmaxnregProducerConsumerGemmMatchesFp64) {
  for (const int k : {64, 80, 512}) {  // one stage, a partial block, four rounds through both stages
    const Matrix16 a(128, k), b(128, k);
    DeviceBuffer<std::uint16_t> da(a.words), db(b.words);
    DeviceBuffer<float> dc(std::size_t(128) * 128);
    test::gemm_producer_consumer(tile_map(da, a, 128), tile_map(db, b, 128), k, dc.data);
    EXPECT_EQ(gemm_mismatch(a, b, dc.read(), kGemmBound), "")
        << "producer/consumer (setmaxnreg 40 / 232, 2-stage TMA ring, wgmma m64n128k16), K = " << k;
  }
}

}  // namespace
}  // namespace roofbench::hopper
