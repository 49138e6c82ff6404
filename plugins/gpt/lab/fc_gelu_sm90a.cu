// lab_fc_gelu_bf16 v5 (sm_90a): the MLP's fc layer in one kernel. A wgmma GEMM of 128 x 128 output tiles whose
// epilogue rounds x w^T to bf16, stores it, adds the bias as gelu_forward_add_bias does and stores GELU of that
// from a per-block table of every bf16 value's (gelu.cuh): the same bits as v4's GELU pass on the same xw.
//
// Why: v4 writes xw with cuBLASLt, then its GELU pass reads xw back and writes gelu. At R3's shape (65536 x 2048
// out of 512 inputs) that read is 268 MB, and the pass took 208 us a launch in R3's profile on an H100.
//
// The tile: two consumer warp groups, 64 rows each, m64n128k16 on 128-byte swizzled K-major tiles that one
// producer thread loads by TMA, 64 columns of K a stage, three stages. Block: 288 threads (the two warp groups
// and the producer's warp), 96 KB of stages + the 9.5 KB table, two blocks an SM, so one block's epilogue runs
// beside the other's products.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "../cuda/attention_sm90a.cuh"
#include "../cuda/gelu.cuh"
#include "fc_gelu_sm90a.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/hopper.cuh"
#include "roofbench/hopper_host.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

namespace hw = roofbench::hopper;

constexpr int kTileRows = 128, kTileCols = 128, kTileK = 64, kStages = 3;
constexpr int kConsumerThreads = 256, kThreads = kConsumerThreads + 32, kBlocksPerSm = 2;
constexpr std::uint32_t kOperandTileBytes = kTileRows * kTileK * sizeof(bf16);  // 16 KB: 128 rows of 128 bytes
static_assert(kTileRows == kTileCols, "the A and B tiles share one size");

struct FcGeluSmem {
  unsigned char a[kStages][kOperandTileBytes];  // x's rows of the tile, K-major, 128-byte swizzle
  unsigned char b[kStages][kOperandTileBytes];  // w's rows (the tile's output columns), the same layout
  unsigned short gelu_table[kBf16TableSize];    // bf16 bits of GELU of every covered bf16 value
  std::uint64_t full[kStages], empty[kStages];  // a stage's bytes landed; both warp groups done with it
};
constexpr std::size_t kSmemBytes = sizeof(FcGeluSmem) + attention::kAtomBytes;  // room to align the start
static_assert(kBlocksPerSm * (kSmemBytes + 1024) <= 228 * 1024, "two blocks an SM");

// The producer: one thread loads each stage's x and w boxes once both warp groups have released it.
__device__ void load_stages(FcGeluSmem& s, const CUtensorMap* x_map, const CUtensorMap* w_map, int row0, int col0,
                            int k_blocks) {
  for (int kb = 0; kb < k_blocks; ++kb) {
    const int stage = kb % kStages;
    if (kb >= kStages) attention::wait_or_trap(&s.empty[stage], (kb / kStages - 1) & 1);
    hw::mbarrier_arrive_expect_tx(&s.full[stage], 2 * kOperandTileBytes);
    hw::tma_load_2d(s.a[stage], x_map, &s.full[stage], row0, kb * kTileK);
    hw::tma_load_2d(s.b[stage], w_map, &s.full[stage], col0, kb * kTileK);
  }
}

// A consumer warp group's 64 x 128 part of the tile, over every stage; one thread of the group releases each
// stage once the products that read it have completed (wait_group 1: all but the newest).
__device__ void multiply_stages(FcGeluSmem& s, float (&acc)[64], int group, int k_blocks) {
  const bool releases = threadIdx.x % 128 == 0;
  for (int kb = 0; kb < k_blocks; ++kb) {
    const int stage = kb % kStages;
    attention::wait_or_trap(&s.full[stage], (kb / kStages) & 1);
    hw::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kTileK / 16; ++k)
      hw::wgmma_bf16_ss(acc, hw::descriptor_k_major_sw128(s.a[stage] + group * 64 * attention::kSwizzleRow, k),
                        hw::descriptor_k_major_sw128(s.b[stage], k), kb > 0 || k > 0 ? 1u : 0u);
    hw::wgmma_commit_group();
    hw::wgmma_wait_group<1>();
    if (releases && kb > 0) hw::mbarrier_arrive(&s.empty[(kb - 1) % kStages]);
  }
  hw::wgmma_wait_group<0>();
  hw::fence_accumulators(acc);
}

// GELU's bf16 bits for a pre-activation's bits: the table where it covers the value, erff in place elsewhere.
__device__ inline unsigned short gelu_bits(const unsigned short* table, unsigned short pre) {
  const int slot = bf16_table_slot(pre);
  return slot >= 0 ? table[slot] : __bfloat16_as_ushort(__float2bfloat16_rn(gelu(__bfloat162float(__ushort_as_bfloat16(pre)))));
}

// The epilogue of one accumulator pair: xw's two columns (col, col + 1) of `row`, and GELU of xw + bias.
__device__ inline void store_pair(bf16* xw, bf16* gelu_out, const unsigned short* table, std::size_t at, float lo,
                                  float hi, __nv_bfloat162 bias) {
  const __nv_bfloat162 product = __floats2bfloat162_rn(lo, hi);
  const __nv_bfloat162 pre = __hadd2(product, bias);  // round to nearest even once, as ColumnBias8::add_to
  const unsigned short low = gelu_bits(table, __bfloat16_as_ushort(pre.x)),
                       high = gelu_bits(table, __bfloat16_as_ushort(pre.y));
  *reinterpret_cast<__nv_bfloat162*>(xw + at) = product;
  *reinterpret_cast<std::uint32_t*>(gelu_out + at) = static_cast<std::uint32_t>(high) << 16 | low;
}

// Each thread's accumulators (hopper.cuh's m64n128 layout) to xw and gelu, rows and columns past the matrix
// skipped.
__device__ void store_tile(const FcGeluSmem& s, const float (&acc)[64], bf16* xw, bf16* gelu_out,
                           const bf16* bias, int rows, int cols, int row0, int col0) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, group = threadIdx.x / 128;
  const int row = row0 + 64 * group + 16 * warp + lane / 4;
#pragma unroll
  for (int j = 0; j < kTileCols / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
    if (col >= cols) continue;
    const __nv_bfloat162 b = __halves2bfloat162(bias[col], bias[col + 1]);  // bias: 2-byte alignment only
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row + 8 * half;
      if (r < rows)
        store_pair(xw, gelu_out, s.gelu_table, static_cast<std::size_t>(r) * cols + col, acc[4 * j + 2 * half],
                   acc[4 * j + 2 * half + 1], b);
    }
  }
}

__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    fc_gelu_v5_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map, bf16* xw,
                      bf16* gelu_out, const bf16* bias, int rows, int cols, int k_blocks) {
  extern __shared__ unsigned char raw[];
  FcGeluSmem& s = attention::aligned_smem<FcGeluSmem>(raw);
  const int row0 = blockIdx.y * kTileRows, col0 = blockIdx.x * kTileCols;
  if (threadIdx.x == kConsumerThreads) {
    hw::tma_prefetch_map(&x_map);
    hw::tma_prefetch_map(&w_map);
    for (int stage = 0; stage < kStages; ++stage) {
      hw::mbarrier_init(&s.full[stage], 1);
      hw::mbarrier_init(&s.empty[stage], 2);
    }
    hw::mbarrier_init_fence();
  }
  fill_bf16_table(s.gelu_table, [](float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(gelu(x))); });
  __syncthreads();
  if (threadIdx.x >= kConsumerThreads) {
    if (threadIdx.x == kConsumerThreads) load_stages(s, &x_map, &w_map, row0, col0, k_blocks);
    return;
  }
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  multiply_stages(s, acc, threadIdx.x / 128, k_blocks);
  store_tile(s, acc, xw, gelu_out, bias, rows, cols, row0, col0);
}

bool g_configured = false;

CUtensorMap operand_map(const bf16* data, int rows, int in) {
  const hopper::Matrix2d m{data, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<std::uint64_t>(rows),
                           static_cast<std::uint64_t>(in), static_cast<std::uint64_t>(in) * sizeof(bf16)};
  return hopper::make_tensor_map_2d(m, kTileRows, kTileK, hopper::TileSwizzle::bytes128);
}

}  // namespace

void fc_gelu_v5_configure() {
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  if (!hopper::hopper_path_available(device))
    throw NotApplicable("gpt lab_fc_gelu_bf16 v5 needs sm_90a (wgmma): a compute capability 9.0 GPU");
  roofbench::cuda::allow_dynamic_shared_memory(fc_gelu_v5_kernel, kSmemBytes);
  ROOFBENCH_CUDA(cudaFuncSetAttribute(fc_gelu_v5_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
  g_configured = true;
}

void fc_gelu_v5(bf16* xw, bf16* gelu_out, const bf16* x, const bf16* w, const bf16* bias, int rows, int in, int out,
                cudaStream_t stream) {
  if (!g_configured) throw Error("gpt: lab_fc_gelu_bf16 v5 runs after fc_gelu_v5_configure()");
  if (rows < 1 || (rows + kTileRows - 1) / kTileRows > 65535 || in < kTileK || in % kTileK != 0 || out < 8 ||
      out % 8 != 0)
    throw Error("gpt: lab_fc_gelu_bf16 v5 needs 1 <= rows <= 65535 * 128, in a multiple of 64 and out a multiple of 8 "
                "(got rows " +
                std::to_string(rows) + ", in " + std::to_string(in) + ", out " + std::to_string(out) + ")");
  if (!aligned16(xw) || !aligned16(gelu_out) || !aligned16(x) || !aligned16(w))
    throw Error("gpt: lab_fc_gelu_bf16 v5 needs x, w, xw and gelu 16-byte aligned");
  const CUtensorMap x_map = operand_map(x, rows, in), w_map = operand_map(w, out, in);
  const dim3 grid((out + kTileCols - 1) / kTileCols, (rows + kTileRows - 1) / kTileRows);
  fc_gelu_v5_kernel<<<grid, kThreads, kSmemBytes, stream>>>(x_map, w_map, xw, gelu_out, bias, rows, out, in / kTileK);
  ROOFBENCH_CUDA_LAUNCH();
}

}  // namespace roofbench::gpt::cuda::lab
