// Launchers of the kernels that exercise roofbench/hopper.cuh (hopper_test_kernels.cu, built for sm_90a).
// Each runs one block on the current device, waits for it, and throws roofbench::Error on a CUDA error;
// a kernel whose mbarrier wait times out prints which wait and traps.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace roofbench::hopper::test {

// The box at (row, col) of `map` prefetched into the L2 (tma_prefetch_2d), then loaded by TMA into shared
// memory and copied byte for byte to `out` (device memory of `box_bytes`): the shared-memory image of the
// box, swizzled or not as the map says.
void tma_tile(const CUtensorMap& map, int row, int col, std::uint32_t box_bytes, void* out);

// A box_rows x box_cols box of 16-bit words written into shared memory by ordinary stores, word (r, c) = r * 256 +
// c, as tma_load_2d would lay out that box of `map` (unswizzled), then stored by TMA at (row, col) of map's
// matrix (tma_store_2d, waited for by bulk_wait_group).
void tma_store_box(const CUtensorMap& map, int row, int col, int box_rows, int box_cols);

// A cluster of kClusterBlocks blocks, block r multicasting the box at (row0 + r box_rows, 0) of `map` into every
// block's shared memory (tma_load_2d_multicast, the boxes side by side) and arriving on the next block's barrier
// (mbarrier_arrive_cluster); each block waits for all the boxes and its peer's arrival, then copies its landing area
// to part r of `out` (device memory of kClusterBlocks^2 box_bytes): each part the image of all the boxes.
inline constexpr int kClusterBlocks = 2;
void cluster_multicast(const CUtensorMap& map, int row0, int box_rows, std::uint32_t box_bytes, void* out);

// An mbarrier driven through kMbarrierSteps states; out (device) receives, per step, test_wait of parity 0
// and of parity 1 (1 = that phase reads as completed), then the 16 bytes the bulk copy of step 5 brought
// (from `src`, device memory of 16 bytes), as 4 ints.
inline constexpr int kMbarrierSteps = 6;
void mbarrier_phases(const void* src, int* out);

// How the 64 x K A operand of gemm_warpgroup reaches the tensor cores.
enum class ASource {
  tma_swizzled,  // TMA load with the 128-byte swizzle, descriptor_k_major_sw128
  registers,     // fragments loaded from global memory into registers, wgmma_bf16_rs
  plain_stores,  // ordinary shared-memory stores in the no-swizzle layout, fence_proxy_async_shared,
                 // descriptor_k_major_plain
};

// C (64 x n, fp32, row-major, device) = A (64 x k) B^T (B: n x k), bf16 row-major operands, by one warp
// group: TMA (128-byte swizzle, boxes of 64 rows x 64 columns for A and n x 64 for B) and wgmma m64nNk16.
// a_rows is A in device memory (read directly by registers and plain_stores). n is 64 or 128; k a multiple
// of 16.
void gemm_warpgroup(int n, ASource source, const CUtensorMap& a_map, const CUtensorMap& b_map,
                    const std::uint16_t* a_rows, int k, float* c);

// C (64 x n, fp32, row-major, device) = A (64 x k) B, with B given row-major as k x n: its K rows hold
// consecutive N elements (MN-major), read by wgmma with the transpose bit (descriptor_mn_major_sw128). Boxes
// of 64 x 64 (128-byte swizzle) for A and B; A from shared memory, or from registers (a_rows, _rs form).
// fp16: the operands are fp16 (wgmma_f16_*), else bf16. n is 64 or 128; k a multiple of 16.
void gemm_mn_major_b(int n, bool fp16, bool a_from_registers, const CUtensorMap& a_map, const CUtensorMap& b_map,
                     const std::uint16_t* a_rows, int k, float* c);

// C (64 x 64, fp32, row-major, device) = A B^T as gemm_warpgroup computes it, from the transposes: a_t
// (k x 64) holds A^T and b_t (k x 64) B^T, both row-major and both loaded whole by TMA (128-byte swizzle,
// boxes of k rows x 64 columns), so both operands are MN-major (descriptor_mn_major_sw128, imm-trans 1).
// A is read from shared memory (wgmma_bf16_ss<1, 1>) or, a_from_registers, as fragments gathered from
// a_t_rows (device) with only B transposed (wgmma_bf16_rs<1>). k: a multiple of 16, at most 256.
void gemm_mn_major(bool a_from_registers, const CUtensorMap& a_t_map, const CUtensorMap& b_t_map,
                   const std::uint16_t* a_t_rows, int k, float* c);

// C (128 x 128) = A (128 x k) B^T (B: 128 x k) by a producer warp group (one thread issuing TMA loads
// into a 2-stage ring, setmaxnreg.dec to 40) and two consumer warp groups (64 rows each, wgmma,
// setmaxnreg.inc to 232), with full and empty mbarriers per stage. Maps: boxes of 128 rows x 64 columns.
void gemm_producer_consumer(const CUtensorMap& a_map, const CUtensorMap& b_map, int k, float* c);

}  // namespace roofbench::hopper::test
