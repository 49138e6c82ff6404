// The MLP's fc layer in one sm_90a kernel (the bf16 keepers', fc_gelu_sm90a.cu beside this header, and the lab's
// lab_fc_gelu_bf16 v5-v27 and lab_fc_gelu_backward_bf16 v2-v9, lab/fc_gelu_sm90a.cu, each a TileConfig): a wgmma
// GEMM whose epilogue rounds x w^T to bf16, stores it, adds the bias as gelu_forward_add_bias does and stores GELU of
// that from a per-block table of every bf16 value's (gelu.cuh): the same bits as the GELU pass on the same x w^T,
// without the pass's read of it.
//
// The block: two consumer warp groups, 64 rows of the 128-row tile each (or, ping-pong, every other tile whole; or,
// paired_groups, four in two pairs that take every other tile, 64 rows a group),
// m64n128k16 on 128-byte swizzled K-major tiles that one producer thread loads by TMA, 64 columns of K a stage; the
// two warp groups and the producer's warp (two blocks an SM) or warp group (one block an SM, its registers given to
// the others). launch<Shape> checks the operands and runs the kernel on its persistent grid (or a block a tile),
// configuring it at its first launch.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attention_sm90a.cuh"
#include "gelu.cuh"
#include "layers.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/hopper.cuh"
#include "roofbench/hopper_host.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::fc_gelu {
namespace {

namespace hw = roofbench::hopper;

constexpr int kTileRows = 128, kTileK = 64;
constexpr int kHelperThreads = 96;  // gelu_helpers: the producer group's three warps after the producer's
constexpr std::uint32_t kRowTileBytes = kTileRows * kTileK * sizeof(bf16);  // 16 KB: 128 rows of 128 bytes
constexpr int kMaxResidentK = 512;  // a resident row block of x: 128 rows x 512 columns, 128 KB

// The wide table (v12): GELU's bf16 bits for the magnitudes 0x3780 + m, m < 4096, i.e. |z| in [2^-16, 2^16), 16 KB.
// The backward's packed table (packed_slots): GELU' in fp32 for 0x3900 + m, m < 2048, i.e. |z| in [2^-13, 8), 16 KB.
// The values outside either (tiny, huge, NaN, infinity) are evaluated in place.
using WideTable = PairTable<0x3780, 12, 1>;
using PackedTable = PairTable<0x3900, 11, 2>;

// A version's features (TileConfig, the kernel's template argument, so that each version reads by name):
// cols: the tile's output columns (128 or 256); stages: the stages of K in the ring; blocks_per_sm: the blocks an
// SM holds. A warp group's part of a tile is `frags` fragments of 64 rows x 128 columns (an m64n128 product each
// k16 step): with the two warp groups sharing each tile (cooperative), rows 64 group .. and each 128 columns; with
// pingpong each warp group takes every other tile of the block whole (128 x 128: rows 0 and 64), so that one
// group's epilogue runs while the other's products use the tensor cores.
// wide_stores: the epilogue's stores 16 bytes a thread (8 columns of a row) after four lanes trade their pairs,
// instead of each thread's 4-byte pairs (half of a 32-byte sector a store per row).
// The producer: one block an SM has a producer warp group, which setmaxnreg leaves 40 registers so that the
// consumers have 232 (65,536 shared by 384 threads give 168 each at entry); two blocks an SM have a producer warp
// (288 threads) and no setmaxnreg (ptxas refuses the consumers' products within the 80 registers that two blocks of
// 384 threads would have at entry).
// batched_lookup: the epilogue looks up eight elements' GELU at once, unconditionally, and branches once (a warp
// vote) for values outside the table, instead of a branch per element (output_batch).
// wide_table: batched_lookup on a table of every magnitude in [2^-16, 2^16) (WideTable::slots: two slots from a
// bf16 pair in a few 32-bit operations, 16 KB) instead of bf16_table.hpp's [2^-16, 8).
// resident_x: each block takes a range of consecutive tiles and keeps the current row block of x (kMaxResidentK
// columns at most) in shared memory while it walks that row block's column tiles, the ring carrying w alone: x read
// from the L2 about once instead of once a tile.
// staged_rows (staged stores, 128 or 64): ping-pong's epilogue writes each 64-column half of a tile's xw and gelu
// into shared memory, staged_rows rows at a time (a staged_rows x 64 box each, 128-byte swizzle), and one thread
// stores both by TMA (whole sectors; no address arithmetic per store). staged_buffers (1 or 2): the boxes a group
// has of each output; with two, a group writes one pair while the TMA stores of the other still read it.
// backward: the layer after GELU's input gradient with GELU's backward (fc_gelu_backward_sm90a): A = dy, B the
// next layer's weight read MN-major (stored [in][out]: wgmma's imm-trans-b), and the epilogue loads the tile's
// pre-activation product xw (fc's, without its bias) by TMA into the staging boxes as soon as its products are
// issued (early_xw: before its turn), writes bf16(bf16(dy w) GELU'(bf16(xw + bias))) over it and stores that by
// TMA, and writes the tile's column sums of the unrounded products (fc's bias gradient) to its row block's row of
// the partials: gelu_backward_add_bias's arithmetic, its d_gelu the GEMM's accumulators rounded to bf16 as
// cuBLASLt's output is.
// cluster_rows, cluster_cols (1 or 2 each): blocks run in clusters of cluster_rows x cluster_cols that walk units of
// that many adjacent row blocks and column tiles, a block each. The blocks of a unit's column tile (cluster_rows of
// them) each load a half of every w stage (64 of the tile's rows of w; backward, one of its two 64-column boxes) and
// multicast it to each other, so that w is read from the L2 once for two row blocks; the blocks of a row block
// (cluster_cols) share x's stages in the same way.
// gelu_helpers: the consumers stage only xw (each 64-column half of their tile, rounded to bf16); the producer
// group's three other warps (kHelperThreads, 72 registers after setmaxnreg against the consumers' 216) read it back,
// write GELU(xw + bias) beside it and store both by TMA, so that the lookups run beside the consumers' next products
// instead of in their epilogue.
// xw_box_a_half (with gelu_helpers): each group stages its tile's two halves in two xw boxes (the staging pair's
// two boxes), so that its second half waits for no helper; the helpers write GELU into one box of their own (16 KB
// more) and hand each xw box back, and reuse their box, once the stores of the box after it are issued, so that the
// wait for a store's read overlaps the wait for the next box.
// computed_gelu: v14's staged epilogue with GELU computed, not looked up: each half's xw box is written first, then
// the group's 128 threads read it back 16 bytes at a time in a loop that is not unrolled and evaluate GELU by erff
// (the bits the table holds), trading the table's scattered 2-byte reads and their bank conflicts for arithmetic.
// Backward: GELU' evaluated in place for every element (erff and expf, the bits the table holds), no table.
// packed_slots (backward): GELU' from PackedTable's 4096 fp32 entries, whose two byte offsets a pair's bits give in a
// few 32-bit operations (PackedTable::slots), instead of bf16_table.hpp's table, a slot per element and a range check
// each (Nsight Compute on v3: integer operations about half of the epilogue's 24 instructions an element).
// early_xw (backward): a group asks for its tile's xw before it waits for its turn at the tensor cores, not once its
// products are issued, so that the load has the other group's products and its own to land under.
// warp_stores (staged stores, 128-row boxes): each warp stages its own 16 rows of each fragment and stores them by
// TMA itself (16-row boxes), so that no warp waits at the group's barriers for the slowest of the four (Nsight
// Compute on v14: 14% of the warp samples at those two barriers).
// paired_groups (ping-pong, warp stores): four consumer warp groups in two pairs; a pair shares each 128 x 128 tile
// (64 rows a group, 64 accumulators a thread) and the pairs take every other tile in turns, so that two warps a
// scheduler run the epilogue beside the other pair's products, not one (Nsight Compute on v14: a tile's epilogue
// took about three times its products with one warp a scheduler issuing it). 640 threads: 96 registers at entry
// (five warps a scheduler), then setmaxnreg's 32 for the producer group and 112 for the consumers.
// early_bias: the staged and backward epilogues' bias pairs (16 a thread, global loads from the L2) are asked for
// before the tile's products instead of at the epilogue's start, so that their latency hides under the products.
struct TileConfig {
  int cols, stages, blocks_per_sm;
  bool wide_stores = false, pingpong = false, batched_lookup = false, wide_table = false, resident_x = false;
  int staged_rows = 0, staged_buffers = 1;
  int cluster_rows = 1, cluster_cols = 1;
  bool backward = false, early_bias = false, gelu_helpers = false, xw_box_a_half = false, computed_gelu = false;
  bool early_xw = false, packed_slots = false, warp_stores = false, paired_groups = false;
};

template <TileConfig kConfig>
struct TileShape {
  static constexpr int cols = kConfig.cols, stages = kConfig.stages, blocks_per_sm = kConfig.blocks_per_sm;
  static constexpr bool staged_stores = kConfig.staged_rows > 0, pingpong = kConfig.pingpong;
  static constexpr int staged_rows = kConfig.staged_rows, staged_buffers = kConfig.staged_buffers;
  static_assert(staged_buffers == 1 || staged_buffers == 2, "one or two staging buffers");
  static_assert(staged_rows == 0 || staged_rows == 64 || staged_rows == 128, "a staging box is 64 or 128 rows");
  static constexpr bool batched_lookup = kConfig.batched_lookup || kConfig.wide_table;
  static_assert(!staged_stores || (pingpong && (batched_lookup || kConfig.backward)),
                "staged stores are a ping-pong epilogue's");
  static constexpr bool wide_table = kConfig.wide_table, resident_x = kConfig.resident_x;
  static constexpr int a_boxes = resident_x ? kMaxResidentK / kTileK : stages;  // x's tiles in shared memory
  static constexpr bool paired_groups = kConfig.paired_groups;
  static_assert(!paired_groups || (pingpong && kConfig.warp_stores && blocks_per_sm == 1 && !resident_x &&
                                   kConfig.cluster_rows * kConfig.cluster_cols == 1),
                "paired groups: v26's ping-pong block and stores");
  static constexpr int groups = paired_groups ? 4 : 2;  // consumer warp groups
  static constexpr int consumer_threads = 128 * groups;
  static constexpr bool producer_group = blocks_per_sm == 1;
  static constexpr int threads = consumer_threads + (producer_group ? 128 : 32);
  static constexpr int entry_registers = 65536 / (threads * blocks_per_sm) / 8 * 8;
  // The kernel's register cap (__maxnreg__): entry_registers, but for v5's and v6's 96, what __launch_bounds__(288,
  // 2) gave them when they were timed (v10 spilled 216 bytes at 96).
  static constexpr int max_registers = blocks_per_sm == 2 && !batched_lookup ? 96 : entry_registers;
  static constexpr bool wide_stores = kConfig.wide_stores;
  static constexpr int frags = paired_groups ? 1 : pingpong ? 2 : cols / 128;
  static constexpr std::uint32_t b_bytes = cols * kTileK * sizeof(bf16);
  static constexpr int cluster_rows = kConfig.cluster_rows, cluster_cols = kConfig.cluster_cols;
  static constexpr int cluster_blocks = cluster_rows * cluster_cols;
  // The warp groups that release each stage: one (ping-pong) or both, of each block whose loads land in it (its
  // own, its w partner's, its x partner's).
  static constexpr std::uint32_t releasers = (pingpong && !paired_groups ? 1 : 2) * (cluster_rows + cluster_cols - 1);
  static_assert(!pingpong || cols == 128, "a ping-pong warp group's tile is 128 x 128");
  static_assert((cluster_rows == 1 || cluster_rows == 2) && (cluster_cols == 1 || cluster_cols == 2),
                "a cluster shares w between two row blocks at most, x between two column tiles");
  static_assert(cluster_blocks == 1 || (producer_group && cols == 128), "clusters: one block an SM, 128 columns");
  static_assert(cluster_cols == 1 || !resident_x, "x shared by multicast a stage at a time, not resident");
  static constexpr bool backward = kConfig.backward, early_bias = kConfig.early_bias;
  static constexpr bool gelu_helpers = kConfig.gelu_helpers, xw_box_a_half = kConfig.xw_box_a_half;
  static constexpr bool computed_gelu = kConfig.computed_gelu, early_xw = kConfig.early_xw;
  static_assert(!early_xw || kConfig.backward, "early xw: the backward's load of its tile's xw");
  static constexpr bool packed_slots = kConfig.packed_slots, warp_stores = kConfig.warp_stores;
  static_assert(!warp_stores || (staged_rows == (paired_groups ? 64 : 128) && !kConfig.backward &&
                                 !kConfig.gelu_helpers && !kConfig.computed_gelu),
                "warp stores: v14's staged epilogue");
  // The rows of an output box the TMA stores: a warp's 16 (warp_stores) or the staging box's.
  static constexpr int store_box_rows = warp_stores ? 16 : staged_rows;
  static_assert(!packed_slots || (kConfig.backward && !computed_gelu), "packed slots: the backward's table");
  static_assert(!computed_gelu || (pingpong && staged_rows == 128 && staged_buffers == 1 && !gelu_helpers &&
                                   !early_bias),
                "computed GELU: v14's ping-pong block and staging boxes");
  static_assert(!xw_box_a_half || gelu_helpers, "an xw box a half: the GELU helpers' staging");
  static_assert(!gelu_helpers || (producer_group && pingpong && wide_table && staged_rows == 128 &&
                                  staged_buffers == 1 && !backward && cluster_blocks == 1),
                "GELU helpers: v14's ping-pong block and staging boxes");
  // setmaxnreg's split of the registers the block holds from its entry (its threads x entry_registers; an increase
  // beyond them waits forever), with a producer group: 40 for the producer group and 232 for the consumers, with
  // GELU helpers 72 and 216, with paired groups 32 and 112.
  static constexpr int producer_registers = gelu_helpers ? 72 : paired_groups ? 32 : 40;
  static constexpr int consumer_registers = gelu_helpers ? 216 : paired_groups ? 112 : 232;
  static_assert(!producer_group || 128 * producer_registers + consumer_threads * consumer_registers ==
                                       threads * entry_registers,
                "setmaxnreg: the consumers take what the producer group gives back");
  static_assert(!early_bias || staged_rows > 0, "early bias: the staged and backward epilogues");
  static_assert(!backward || (pingpong && staged_rows == 128 && staged_buffers == 1 && !resident_x && !wide_table),
                "the backward epilogue is a ping-pong group's on one pair of 128-row staging boxes");
  using TableEntry = std::conditional_t<backward, float, unsigned short>;  // GELU's bf16 bits, or GELU' in fp32
  static constexpr int table_size = wide_table     ? static_cast<int>(WideTable::size)
                                    : packed_slots ? static_cast<int>(PackedTable::size)
                                                   : kBf16TableSize;
  __device__ static int frag_row(int f, int group) {
    return paired_groups ? 64 * (group % 2) : pingpong ? 64 * f : 64 * group;
  }
  // The warp groups that take turns at the tensor cores, each a tile at a time: a group, or (paired_groups) a pair.
  __device__ static int team(int group) { return paired_groups ? group / 2 : group; }
  __device__ static int frag_col(int f) { return pingpong ? 0 : 128 * f; }
};

// The bf16 keeper's tile (lab_fc_gelu_bf16 v14): ping-pong on 128 x 128 tiles, a four-stage ring, the wide table,
// each group's outputs stored by TMA through 128-row staging boxes.
constexpr TileConfig kKeeperTile{
    .cols = 128, .stages = 4, .blocks_per_sm = 1, .pingpong = true, .wide_table = true, .staged_rows = 128};
// The bf16 backward keeper's (lab_fc_gelu_backward_bf16 v8): the same block on the backward's operands and
// epilogue, in clusters of two blocks sharing each stage of w, GELU' from the packed table (packed_slots).
constexpr TileConfig kBackwardKeeperTile{.cols = 128,
                                         .stages = 4,
                                         .blocks_per_sm = 1,
                                         .pingpong = true,
                                         .staged_rows = 128,
                                         .cluster_rows = 2,
                                         .backward = true,
                                         .packed_slots = true};

// Each consumer group's two staging boxes (xw, gelu) for staged stores, on a swizzle repeat; nothing otherwise (an
// empty member last in FcGeluSmem, so that it moves no other member).
template <int kRows, int kBuffers, int kGroups>
struct alignas(1024) StagingBoxes {
  // [group][buffer][xw, gelu]: kRows rows x 64 columns of bf16, 128-byte swizzle
  unsigned char box[kGroups][kBuffers][2][kRows * 128];
};
template <int kBuffers, int kGroups>
struct StagingBoxes<0, kBuffers, kGroups> {};

// xw_box_a_half: the helpers' own GELU box (128 rows x 64 columns, 128-byte swizzle); nothing otherwise.
template <bool kHelperBox>
struct alignas(1024) HelperGeluBox {
  unsigned char box[kTileRows * 128];
};
template <>
struct HelperGeluBox<false> {};

// Backward: each group's four warps' column sums of a tile, added in a fixed order; nothing otherwise.
template <bool kBackward>
struct ColumnScratch {
  float sums[2][4][128];  // [group][warp][column of the tile]
};
template <>
struct ColumnScratch<false> {};

template <typename Shape>
struct FcGeluSmem {
  unsigned char a[Shape::a_boxes][kRowTileBytes];  // x's rows of the tile (a stage's, or every k of a resident row
                                                   // block), K-major, 128-byte swizzle
  unsigned char b[Shape::stages][Shape::b_bytes];  // w's rows (the tile's output columns), the same layout
  typename Shape::TableEntry gelu_table[Shape::table_size];  // GELU's bf16 bits (GELU' in fp32, backward)
  std::uint64_t full[Shape::stages], empty[Shape::stages];  // a stage landed; its readers done with it
  std::uint64_t turn[2];  // ping-pong: team g's turn to multiply (the other has issued its products)
  std::uint64_t x_full, x_empty;  // resident x: a row block landed; its readers done with it
  std::uint64_t xw_full[2];       // backward: group g's tile of xw landed in its staging boxes
  // GELU helpers: group g's xw box (half h's, with xw_box_a_half; else [g][0]) written; its stores have read it.
  std::uint64_t box_full[2][2], box_empty[2][2];
  ColumnScratch<Shape::backward> columns;
  StagingBoxes<Shape::staged_rows, Shape::staged_buffers, Shape::groups> staging;
  HelperGeluBox<Shape::xw_box_a_half> helper_gelu;
};
template <typename Shape>
constexpr std::size_t kSmemBytes = sizeof(FcGeluSmem<Shape>) + attention::kAtomBytes;  // room to align the start

__device__ inline float float_of_bf16_bits(unsigned short bits) {
  return __bfloat162float(__ushort_as_bfloat16(bits));
}

// Every wait of the kernel: its consumers use setmaxnreg, so the trap is out of line.
__device__ __forceinline__ void wait_or_trap(std::uint64_t* bar, std::uint32_t parity) {
  hw::mbarrier_wait_or_trap<true>(bar, parity);
}

// A block's place in its cluster of kRows x kCols (rank = row_half + kRows col_half) and the ranks its loads land in:
// its w half in the blocks of its column tile, its x half in the blocks of its row block. The rank is blockIdx.x's
// place in its cluster, as %cluster_ctarank is for the one-dimensional clusters launch_config makes.
template <int kRows, int kCols>
struct ClusterPlace {
  int row_half, col_half;
  std::uint16_t w_mask, x_mask;
  __device__ static ClusterPlace here() {
    const int rank = static_cast<int>(blockIdx.x) % (kRows * kCols), row_half = rank % kRows,
              col_half = rank / kRows;
    const auto w_mask = static_cast<std::uint16_t>(((1 << kRows) - 1) << (kRows * col_half));
    const auto x_mask =
        static_cast<std::uint16_t>(kCols == 2 ? (1 << row_half) | (1 << (row_half + kRows)) : 1 << rank);
    return {row_half, col_half, w_mask, x_mask};
  }
};

// The tiles a block walks: tile t is unit t of row units t / col_tiles (kRows row blocks of 128 rows, the block's
// row_half-th) and column units t % col_tiles (kCols column tiles of `cols`, its col_half-th), so that the blocks at
// work at once share a few row blocks of x through the L2. A block (a cluster) takes its index, then every one of the
// grid's. With `contiguous` (resident x) it takes a range of consecutive tiles instead (its share, within one tile of
// the others'): a few units, whole but for the range's ends, and row_block(i) counts the units of its range up to
// its i-th tile.
template <int kRows, int kCols>
struct TileWalk {
  int col_tiles, tiles, k_blocks;  // col_tiles: column units
  bool contiguous;
  __device__ int unit_index() const { return static_cast<int>(blockIdx.x) / (kRows * kCols); }
  __device__ int units() const { return static_cast<int>(gridDim.x) / (kRows * kCols); }
  __device__ int row0(int t) const {
    return (t / col_tiles * kRows + ClusterPlace<kRows, kCols>::here().row_half) * kTileRows;
  }
  __device__ int col0(int t, int cols) const {
    return (t % col_tiles * kCols + ClusterPlace<kRows, kCols>::here().col_half) * cols;
  }
  __device__ int first_tile() const { return static_cast<int>(static_cast<long long>(unit_index()) * tiles / units()); }
  __device__ int block_tiles() const {
    if (!contiguous) return (tiles - unit_index() + units() - 1) / units();
    return static_cast<int>((unit_index() + 1ll) * tiles / units()) - first_tile();
  }
  __device__ int tile(int i) const { return contiguous ? first_tile() + i : unit_index() + i * units(); }
  __device__ int row_block(int i) const { return tile(i) / col_tiles - first_tile() / col_tiles; }
};

// Resident x: the block's r-th row block (tile t's) into `a`, once its readers are done with the (r - 1)-th.
template <typename Shape>
__device__ void load_row_block(FcGeluSmem<Shape>& s, const CUtensorMap* x_map,
                               const TileWalk<Shape::cluster_rows, Shape::cluster_cols>& walk, int t, int r) {
  if (r > 0) wait_or_trap(&s.x_empty, (r - 1) & 1);
  hw::mbarrier_arrive_expect_tx(&s.x_full, walk.k_blocks * kRowTileBytes);
  for (int kb = 0; kb < walk.k_blocks; ++kb) hw::tma_load_2d(s.a[kb], x_map, &s.x_full, walk.row0(t), kb * kTileK);
}

// One stage's x: the tile's 128 rows from row0, K columns 64 kb ..; with x shared, this block's half (rows 64
// col_half ..) multicast into the blocks of its row block.
template <typename Shape>
__device__ void load_x_stage(FcGeluSmem<Shape>& s, const CUtensorMap* x_map, int stage, int row0, int kb) {
  if constexpr (Shape::cluster_cols > 1) {
    const auto place = ClusterPlace<Shape::cluster_rows, Shape::cluster_cols>::here();
    hw::tma_load_2d_multicast(s.a[stage] + place.col_half * (kRowTileBytes / 2), x_map, &s.full[stage],
                              row0 + 64 * place.col_half, kb * kTileK, place.x_mask);
  } else {
    hw::tma_load_2d(s.a[stage], x_map, &s.full[stage], row0, kb * kTileK);
  }
}

// One stage's w: the tile's `cols` rows of w from col0, K columns 64 kb ..; with w shared, this block's half (rows
// 64 row_half ..; backward, the row_half-th of the two 64-column boxes) multicast into the blocks of its column tile.
template <typename Shape>
__device__ void load_w_stage(FcGeluSmem<Shape>& s, const CUtensorMap* w_map, int stage, int col0, int kb) {
  if constexpr (Shape::cluster_rows > 1) {
    const auto place = ClusterPlace<Shape::cluster_rows, Shape::cluster_cols>::here();
    const int half = place.row_half;
    unsigned char* box = s.b[stage] + half * (kRowTileBytes / 2);
    if constexpr (Shape::backward)
      hw::tma_load_2d_multicast(box, w_map, &s.full[stage], kb * kTileK, col0 + 64 * half, place.w_mask);
    else
      hw::tma_load_2d_multicast(box, w_map, &s.full[stage], col0 + 64 * half, kb * kTileK, place.w_mask);
  } else if constexpr (Shape::backward) {  // w [in][out]: K rows 64 kb .., two boxes of 64 output columns
    hw::tma_load_2d(s.b[stage], w_map, &s.full[stage], kb * kTileK, col0);
    hw::tma_load_2d(s.b[stage] + kRowTileBytes / 2, w_map, &s.full[stage], kb * kTileK, col0 + 64);
  } else {
#pragma unroll
    for (int h = 0; h < Shape::cols / 128; ++h)
      hw::tma_load_2d(s.b[stage] + h * kRowTileBytes, w_map, &s.full[stage], col0 + 128 * h, kb * kTileK);
  }
}

// The producer: one thread loads each stage's x and w boxes once its readers have released it. `step` counts the
// block's stages over all its tiles: stage step % stages, in its (step / stages)-th round. Clusters: each block loads
// its halves of the stage into its partners too, whose readers all release the stage; a block ends only once its
// last stages are released, so that no partner arrives on its barriers after it has exited.
template <typename Shape>
__device__ void load_tiles(FcGeluSmem<Shape>& s, const CUtensorMap* x_map, const CUtensorMap* w_map,
                           const TileWalk<Shape::cluster_rows, Shape::cluster_cols>& walk) {
  // Resident x: a row block's x is asked for after its first tile's first w stages (as many as the ring holds
  // without that tile's products), so that the wait for the previous row block's readers holds back no w.
  const int x_after = min(Shape::stages, walk.k_blocks) - 1;
  int step = 0;
  for (int i = 0; i < walk.block_tiles(); ++i) {
    const int t = walk.tile(i);
    const bool new_row_block = Shape::resident_x && (i == 0 || t % walk.col_tiles == 0);
    for (int kb = 0; kb < walk.k_blocks; ++kb, ++step) {
      const int stage = step % Shape::stages;
      if (step >= Shape::stages) wait_or_trap(&s.empty[stage], (step / Shape::stages - 1) & 1);
      hw::mbarrier_arrive_expect_tx(&s.full[stage], (Shape::resident_x ? 0 : kRowTileBytes) + Shape::b_bytes);
      if constexpr (!Shape::resident_x) load_x_stage(s, x_map, stage, walk.row0(t), kb);
      load_w_stage(s, w_map, stage, walk.col0(t, Shape::cols), kb);
      if (new_row_block && kb == x_after) load_row_block(s, x_map, walk, t, walk.row_block(i));
    }
  }
  if constexpr (Shape::cluster_blocks > 1)
    for (const int end = step + Shape::stages; step < end; ++step)
      if (step >= Shape::stages) wait_or_trap(&s.empty[step % Shape::stages], (step / Shape::stages - 1) & 1);
}

// A reader's release of a stage: on this block's barrier, or in a cluster on those of every block whose loads land
// in it (its own, its w and x partners').
template <typename Shape>
__device__ void release_stage(FcGeluSmem<Shape>& s, int stage) {
  if constexpr (Shape::cluster_blocks > 1) {
    const auto place = ClusterPlace<Shape::cluster_rows, Shape::cluster_cols>::here();
    const unsigned writers = place.w_mask | place.x_mask;
#pragma unroll
    for (int rank = 0; rank < Shape::cluster_blocks; ++rank)
      if (writers & (1u << rank)) hw::mbarrier_arrive_cluster(&s.empty[stage], static_cast<std::uint32_t>(rank));
  } else {
    hw::mbarrier_arrive(&s.empty[stage]);
  }
}

// A consumer warp group's fragments of one tile, its stages from `step` on; one thread of the group releases each
// stage once the products that read it have completed (wait_group 1: all but the newest; the last at the end).
// `issued()` runs once the last stage's products are issued.
template <typename Shape, typename Issued>
__device__ void multiply_tile(FcGeluSmem<Shape>& s, float (&acc)[Shape::frags][64], int group, int k_blocks, int step,
                              Issued issued) {
  const bool releases = threadIdx.x % 128 == 0;
  for (int kb = 0; kb < k_blocks; ++kb, ++step) {
    const int stage = step % Shape::stages;
    wait_or_trap(&s.full[stage], (step / Shape::stages) & 1);
    hw::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kTileK / 16; ++k)
#pragma unroll
      for (int f = 0; f < Shape::frags; ++f) {
        const std::uint64_t a = hw::descriptor_k_major_sw128(
            s.a[Shape::resident_x ? kb : stage] + Shape::frag_row(f, group) * attention::kSwizzleRow, k);
        if constexpr (Shape::backward)  // B MN-major: two 64-column boxes kRowTileBytes / 2 apart
          hw::wgmma_bf16_ss<0, 1>(acc[f], a, hw::descriptor_mn_major_sw128(s.b[stage], k, kRowTileBytes / 2),
                                  kb > 0 || k > 0 ? 1u : 0u);
        else
          hw::wgmma_bf16_ss(acc[f], a,
                            hw::descriptor_k_major_sw128(s.b[stage] + Shape::frag_col(f) * attention::kSwizzleRow, k),
                            kb > 0 || k > 0 ? 1u : 0u);
      }
    hw::wgmma_commit_group();
    if (kb == k_blocks - 1) issued();
    hw::wgmma_wait_group<1>();
    if (releases && kb > 0) release_stage(s, (step - 1) % Shape::stages);
  }
  hw::wgmma_wait_group<0>();
#pragma unroll
  for (int f = 0; f < Shape::frags; ++f) hw::fence_accumulators(acc[f]);
  if (releases) release_stage(s, (step - 1) % Shape::stages);
}

// GELU's bf16 bits for a value the table does not cover (|z| < 2^-16, |z| >= 8, NaN, infinity), out of line: the
// epilogue looks up each of a thread's 64 or 128 elements in unrolled code, and erff inlined at each of them made
// the kernel's code several times larger than the instruction caches.
__device__ __noinline__ unsigned short gelu_bits_in_place(unsigned short pre) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(gelu(float_of_bf16_bits(pre))));
}

// GELU's bf16 bits for a pre-activation's bits: the table where it covers the value, erff in place elsewhere.
__device__ inline unsigned short gelu_bits(const unsigned short* table, unsigned short pre) {
  const int slot = bf16_table_slot(pre);
  return slot >= 0 ? table[slot] : gelu_bits_in_place(pre);
}

// x w^T's pair rounded to bf16 (into xw) and the pre-activation pair bf16(xw + bias) returned, as 32-bit words.
__device__ inline std::uint32_t rounded_pair(float lo, float hi, __nv_bfloat162 bias, std::uint32_t& xw) {
  const __nv_bfloat162 product = __floats2bfloat162_rn(lo, hi);
  const __nv_bfloat162 sum = __hadd2(product, bias);  // round to nearest even once, as ColumnBias8::add_to
  xw = *reinterpret_cast<const std::uint32_t*>(&product);
  return *reinterpret_cast<const std::uint32_t*>(&sum);
}

// The epilogue of one accumulator pair: xw's two columns as bf16 and GELU of those plus the bias, each a pair of
// bf16 in 32 bits (the lower column in the low half). rounded_pair's arithmetic written out: through the helper,
// ptxas gave the two-blocks-an-SM kernel (v5, v6) 228 bytes of spills against 160.
struct OutputPairs {
  std::uint32_t xw, gelu;
};
__device__ inline OutputPairs output_pairs(const unsigned short* table, float lo, float hi, __nv_bfloat162 bias) {
  const __nv_bfloat162 product = __floats2bfloat162_rn(lo, hi);
  const __nv_bfloat162 pre = __hadd2(product, bias);  // round to nearest even once, as ColumnBias8::add_to
  const unsigned short low = gelu_bits(table, __bfloat16_as_ushort(pre.x)),
                       high = gelu_bits(table, __bfloat16_as_ushort(pre.y));
  return {*reinterpret_cast<const std::uint32_t*>(&product), static_cast<std::uint32_t>(high) << 16 | low};
}

// The GELU pairs of four pre-activation pairs, those whose bit in `outside` is set evaluated in place (both elements:
// in place and from a table they are the same bits), one call out of line for a batch (output_batch's and
// output_batch_wide's rare path); by value, so that the batch stays in registers on the common path.
__device__ __noinline__ uint4 gelu_pairs_in_place(uint4 pre, uint4 gelu, unsigned outside) {
  const auto fix = [](std::uint32_t pre_pair, std::uint32_t gelu_pair, bool off) {
    return off ? static_cast<std::uint32_t>(gelu_bits_in_place(static_cast<unsigned short>(pre_pair >> 16))) << 16 |
                     gelu_bits_in_place(static_cast<unsigned short>(pre_pair))
               : gelu_pair;
  };
  return make_uint4(fix(pre.x, gelu.x, outside & 1), fix(pre.y, gelu.y, outside & 2), fix(pre.z, gelu.z, outside & 4),
                    fix(pre.w, gelu.w, outside & 8));
}

__device__ inline void unpack(uint4 v, std::uint32_t (&out)[4]) {
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}

// GELU of eight bf16 pre-activations (four pairs) from the wide table, those off it evaluated in place.
__device__ inline uint4 gelu_chunk(const unsigned short* table, uint4 pre) {
  const std::uint32_t pairs[4] = {pre.x, pre.y, pre.z, pre.w};
  std::uint32_t gelu[4];
  unsigned outside = 0;
  const auto* bytes = reinterpret_cast<const unsigned char*>(table);
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const WideTable::Slots slots = WideTable::slots(pairs[c]);
    outside |= slots.outside ? 1u << c : 0u;
    gelu[c] = static_cast<std::uint32_t>(*reinterpret_cast<const unsigned short*>(bytes + slots.high_bytes)) << 16 |
              *reinterpret_cast<const unsigned short*>(bytes + slots.low_bytes);
  }
  const uint4 out = make_uint4(gelu[0], gelu[1], gelu[2], gelu[3]);
  return __any_sync(kFullWarp, outside != 0) ? gelu_pairs_in_place(pre, out, outside) : out;
}

// output_batch on the wide table: two slots a pair from a few packed operations (WideTable::slots).
__device__ inline void output_batch_wide(const unsigned short* table, const float (&lo)[4], const float (&hi)[4],
                                         const __nv_bfloat162 (&bias)[4], std::uint32_t (&xw)[4],
                                         std::uint32_t (&gelu)[4]) {
  std::uint32_t pre[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) pre[c] = rounded_pair(lo[c], hi[c], bias[c], xw[c]);
  unpack(gelu_chunk(table, make_uint4(pre[0], pre[1], pre[2], pre[3])), gelu);
}

// Four pairs' outputs (output_pairs's) with the eight table lookups issued together, each unconditional (a value
// the table does not cover reads slot 0), then one warp vote: a batch with such a value in any lane evaluates those
// in place. Straight-line code, so that the eight elements' instructions interleave.
__device__ inline void output_batch(const unsigned short* table, const float (&lo)[4], const float (&hi)[4],
                                    const __nv_bfloat162 (&bias)[4], std::uint32_t (&xw)[4], std::uint32_t (&gelu)[4]) {
  std::uint32_t pre[4];
  unsigned outside = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    pre[c] = rounded_pair(lo[c], hi[c], bias[c], xw[c]);
    const int low = bf16_table_slot(static_cast<unsigned short>(pre[c])),
              high = bf16_table_slot(static_cast<unsigned short>(pre[c] >> 16));
    outside |= (low | high) < 0 ? 1u << c : 0u;
    gelu[c] = static_cast<std::uint32_t>(table[max(high, 0)]) << 16 | table[max(low, 0)];
  }
  if (__any_sync(kFullWarp, outside != 0)) {
    unpack(gelu_pairs_in_place(make_uint4(pre[0], pre[1], pre[2], pre[3]),
                               make_uint4(gelu[0], gelu[1], gelu[2], gelu[3]), outside),
           gelu);
  }
}

// v[i] for a run-time i in 0..3, by selects (an indexed register array would go to local memory).
__device__ inline std::uint32_t pick(const std::uint32_t (&v)[4], int i) {
  return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
}

// The four lanes of a row (lane % 4 = t) hold pair t of each of four 8-column chunks, p[c] for chunk c; afterwards
// lane t holds chunk t whole, its pairs in column order: three exchanges, lane t giving lane t ^ i its pair of
// chunk t ^ i.
__device__ inline uint4 gather_chunk(const std::uint32_t (&p)[4], int t) {
  const std::uint32_t by_distance[4] = {pick(p, t), __shfl_xor_sync(kFullWarp, pick(p, t ^ 1), 1),
                                        __shfl_xor_sync(kFullWarp, pick(p, t ^ 2), 2),
                                        __shfl_xor_sync(kFullWarp, pick(p, t ^ 3), 3)};
  return make_uint4(pick(by_distance, t), pick(by_distance, t ^ 1), pick(by_distance, t ^ 2),
                    pick(by_distance, t ^ 3));
}

// The bias pairs of a thread's columns in 128 (cols0 + 8 j + 2 t, j = 0..15); past the matrix's edge, its last pair
// (never stored). Two 2-byte loads a pair: the bias needs only bf16's alignment.
// kFirst, kCount: those of columns cols0 + 8 kFirst .. alone (b[kFirst] ..), the others left unset.
template <int kFirst = 0, int kCount = 16>
__device__ inline void load_bias_pairs(__nv_bfloat162 (&b)[16], const bf16* __restrict__ bias, int cols0, int t,
                                       int cols) {
#pragma unroll
  for (int j = kFirst; j < kFirst + kCount; ++j) {
    const int col = min(cols0 + 8 * j + 2 * t, cols - 2);
    b[j] = __halves2bfloat162(bias[col], bias[col + 1]);
  }
}

// Each thread's accumulators (hopper.cuh's m64n128 layout, once per fragment) to xw and gelu, rows and columns
// past the matrix skipped: 4 bytes a thread a store, or with Shape::wide_stores 16 after gather_chunk. With
// Shape::batched_lookup a fragment's 16 bias pairs are loaded before any of its stores (the outputs and the bias
// declared unaliased), where the other versions load each q's four between the stores.
template <typename Shape>
__device__ void store_tile(const FcGeluSmem<Shape>& s, const float (&acc)[Shape::frags][64], bf16* __restrict__ xw,
                           bf16* __restrict__ gelu_out, const bf16* __restrict__ bias, int rows, int cols, int row0,
                           int col0) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, group = threadIdx.x / 128, t = lane % 4;
#pragma unroll
  for (int f = 0; f < Shape::frags; ++f) {
    [[maybe_unused]] __nv_bfloat162 fragment_bias[16];
    if constexpr (Shape::batched_lookup) load_bias_pairs(fragment_bias, bias, col0 + Shape::frag_col(f), t, cols);
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // chunks 4 q .. 4 q + 3 of the 16 in 128 columns
      const int row = row0 + Shape::frag_row(f, group) + 16 * warp + lane / 4, cols0 = col0 + Shape::frag_col(f);
      __nv_bfloat162 b[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if constexpr (Shape::batched_lookup) {
          b[c] = fragment_bias[4 * q + c];
        } else {
          const int col = min(cols0 + 8 * (4 * q + c) + 2 * t, cols - 2);  // past the edge: never stored
          b[c] = __halves2bfloat162(bias[col], bias[col + 1]);  // bias: 2-byte alignment only
        }
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = row + 8 * half;
        std::uint32_t xw_pairs[4], gelu_pairs[4];
        if constexpr (Shape::batched_lookup) {
          float lo[4], hi[4];
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            lo[c] = acc[f][4 * (4 * q + c) + 2 * half];
            hi[c] = acc[f][4 * (4 * q + c) + 2 * half + 1];
          }
          if constexpr (Shape::wide_table)
            output_batch_wide(s.gelu_table, lo, hi, b, xw_pairs, gelu_pairs);
          else
            output_batch(s.gelu_table, lo, hi, b, xw_pairs, gelu_pairs);
        } else {
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int j = 4 * q + c;
            const OutputPairs o =
                output_pairs(s.gelu_table, acc[f][4 * j + 2 * half], acc[f][4 * j + 2 * half + 1], b[c]);
            xw_pairs[c] = o.xw;
            gelu_pairs[c] = o.gelu;
          }
        }
        if constexpr (Shape::wide_stores) {
          const uint4 xw_chunk = gather_chunk(xw_pairs, t), gelu_chunk = gather_chunk(gelu_pairs, t);
          const int col = cols0 + 8 * (4 * q + t);
          if (r < rows && col < cols) {
            const std::size_t at = static_cast<std::size_t>(r) * cols + col;
            *reinterpret_cast<uint4*>(xw + at) = xw_chunk;
            *reinterpret_cast<uint4*>(gelu_out + at) = gelu_chunk;
          }
        } else {
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int col = cols0 + 8 * (4 * q + c) + 2 * t;
            if (r < rows && col < cols) {
              const std::size_t at = static_cast<std::size_t>(r) * cols + col;
              *reinterpret_cast<std::uint32_t*>(xw + at) = xw_pairs[c];
              *reinterpret_cast<std::uint32_t*>(gelu_out + at) = gelu_pairs[c];
            }
          }
        }
      }
    }
  }
}

// Staged stores: a ping-pong group's tile (its two fragments, rows 0-63 and 64-127) to xw and gelu through its two
// staging boxes, one 64-column half and Shape::staged_rows rows (both fragments, or one) at a time. The group's own
// named barrier (1 + group, 128 threads) orders its threads' shared-memory writes before the TMA stores and the
// stores' reads before the next box's writes.
struct OutputMaps {
  const CUtensorMap* xw;
  const CUtensorMap* gelu;
};
__device__ inline void group_barrier(int group) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + group) : "memory"); }

// Byte offset of the pair at (row, col) (col even) in a box of 64 bf16 columns in the 128-byte swizzle.
__device__ inline std::uint32_t swizzled_pair_offset(int row, int col) {
  return static_cast<std::uint32_t>(row * 128 + (((col / 8) ^ (row % 8)) * 16) + (col % 8) * 2);
}

// One fragment's columns 64 h .. 64 h + 63 (chunks q = 2 h, 2 h + 1) into the staging boxes, its rows from box_row0.
template <typename Shape>
__device__ void stage_fragment_half(const FcGeluSmem<Shape>& s, unsigned char* xw_box, unsigned char* gelu_box,
                                    const float (&acc)[64], const __nv_bfloat162 (&bias)[16], int h, int box_row0) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, t = lane % 4;
#pragma unroll
  for (int q = 2 * h; q < 2 * h + 2; ++q) {
    const __nv_bfloat162 b[4] = {bias[4 * q], bias[4 * q + 1], bias[4 * q + 2], bias[4 * q + 3]};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      std::uint32_t xw_pairs[4], gelu_pairs[4];
      float lo[4], hi[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        lo[c] = acc[4 * (4 * q + c) + 2 * half];
        hi[c] = acc[4 * (4 * q + c) + 2 * half + 1];
      }
      output_batch_wide(s.gelu_table, lo, hi, b, xw_pairs, gelu_pairs);
      const int row = box_row0 + 16 * warp + lane / 4 + 8 * half;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const std::uint32_t at = swizzled_pair_offset(row, 8 * (4 * (q - 2 * h) + c) + 2 * t);
        *reinterpret_cast<std::uint32_t*>(xw_box + at) = xw_pairs[c];
        *reinterpret_cast<std::uint32_t*>(gelu_box + at) = gelu_pairs[c];
      }
    }
  }
}

// warp_stores: store_tile_staged with each warp's 16 rows of each fragment staged and stored by the warp alone (its
// lane 0 issues and waits for its own stores), so that the group's warps never wait for one another.
// With paired_groups each half's bias pairs are loaded at the half's start (eight registers live, not sixteen, in the
// consumers' 112), tile_bias unused.
template <typename Shape>
__device__ void store_tile_staged_by_warp(FcGeluSmem<Shape>& s, const float (&acc)[Shape::frags][64], OutputMaps maps,
                                          const __nv_bfloat162 (&tile_bias)[16], const bf16* __restrict__ bias,
                                          int cols, int row0, int col0) {
  static_assert(Shape::warp_stores && Shape::batched_lookup && Shape::wide_table, "v14's epilogue, stored by warp");
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4;
  const bool issues = threadIdx.x % 32 == 0;
  auto& boxes = s.staging.box[group][0];  // [xw, gelu]
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // columns 64 h .. 64 h + 63
    if (col0 + 64 * h >= cols) break;  // the whole half past the matrix (uniform across the group)
    [[maybe_unused]] __nv_bfloat162 half_bias[16];
    if constexpr (Shape::paired_groups) {
      if (h == 0) load_bias_pairs<0, 8>(half_bias, bias, col0, threadIdx.x % 4, cols);
      else load_bias_pairs<8, 8>(half_bias, bias, col0, threadIdx.x % 4, cols);
    }
    if (issues) hw::bulk_wait_group_read<0>();  // this warp's last stores have read its rows
    __syncwarp();
    const __nv_bfloat162(&loaded)[16] = half_bias;
    const __nv_bfloat162(&b)[16] = Shape::paired_groups ? loaded : tile_bias;
#pragma unroll
    for (int f = 0; f < Shape::frags; ++f)
      stage_fragment_half(s, boxes[0], boxes[1], acc[f], b, h, Shape::frag_row(f, group) % Shape::staged_rows);
    hw::fence_proxy_async_shared();
    __syncwarp();
    if (issues) {
#pragma unroll
      for (int f = 0; f < Shape::frags; ++f) {
        const int tile_row = Shape::frag_row(f, group) + 16 * warp;
        const int box_row = tile_row % Shape::staged_rows;  // a multiple of 8: the swizzle holds
        hw::tma_store_2d(maps.xw, boxes[0] + box_row * 128, row0 + tile_row, col0 + 64 * h);
        hw::tma_store_2d(maps.gelu, boxes[1] + box_row * 128, row0 + tile_row, col0 + 64 * h);
      }
      hw::bulk_commit_group();
    }
  }
}

// `staged` counts the group's boxes stored so far: with two buffers, box n goes through buffer n % 2, and its writes
// wait only for the stores of box n - 2 to have read it.
template <typename Shape>
__device__ void store_tile_staged(FcGeluSmem<Shape>& s, const float (&acc)[Shape::frags][64], OutputMaps maps,
                                  const __nv_bfloat162 (&tile_bias)[16], int cols, int row0, int col0, int& staged) {
  static_assert(Shape::batched_lookup && Shape::wide_table && !Shape::wide_stores, "v12's epilogue, staged");
  constexpr int kParts = kTileRows / Shape::staged_rows, kFragsPerPart = Shape::frags / kParts;
  const int group = threadIdx.x / 128;
  const bool issues = threadIdx.x % 128 == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // columns 64 h .. 64 h + 63
    if (col0 + 64 * h >= cols) break;  // the whole half past the matrix (uniform across the group)
#pragma unroll
    for (int part = 0; part < kParts; ++part, ++staged) {
      auto& boxes = s.staging.box[group][staged % Shape::staged_buffers];  // [xw, gelu]
      if (issues) hw::bulk_wait_group_read<Shape::staged_buffers - 1>();  // the buffer's last stores have read it
      group_barrier(group);
#pragma unroll
      for (int f = part * kFragsPerPart; f < (part + 1) * kFragsPerPart; ++f)
        stage_fragment_half(s, boxes[0], boxes[1], acc[f], tile_bias, h,
                            Shape::frag_row(f, group) % Shape::staged_rows);
      hw::fence_proxy_async_shared();
      group_barrier(group);
      if (issues) {
        const int row = row0 + part * Shape::staged_rows;
        hw::tma_store_2d(maps.xw, boxes[0], row, col0 + 64 * h);
        hw::tma_store_2d(maps.gelu, boxes[1], row, col0 + 64 * h);
        hw::bulk_commit_group();
      }
    }
  }
}

// Backward: GELU' of four pre-activation pairs from the fp32 table (every element looked up, a value off the table
// reading slot 0), the pairs with a value off it evaluated in place after one warp vote.
__device__ __noinline__ float2 gelu_derivative_pair_in_place(std::uint32_t pre) {
  return make_float2(gelu_derivative(float_of_bf16_bits(static_cast<unsigned short>(pre))),
                     gelu_derivative(float_of_bf16_bits(static_cast<unsigned short>(pre >> 16))));
}
// The pairs a lookup found off its table (bit c of `outside` for pair c) evaluated in place, once a warp vote says
// any lane has one.
__device__ inline void derivatives_off_the_table(const std::uint32_t (&pre)[4], unsigned outside,
                                                 float2 (&derivative)[4]) {
  if (__any_sync(kFullWarp, outside != 0)) {
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (outside & (1u << c)) derivative[c] = gelu_derivative_pair_in_place(pre[c]);
  }
}

// packed_slots: derivative_batch on the packed table.
__device__ inline void packed_derivative_batch(const float* table, const std::uint32_t (&pre)[4],
                                               float2 (&derivative)[4]) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(table);
  unsigned outside = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const PackedTable::Slots at = PackedTable::slots(pre[c]);
    outside |= at.outside ? 1u << c : 0u;
    derivative[c] = make_float2(*reinterpret_cast<const float*>(bytes + at.low_bytes),
                                *reinterpret_cast<const float*>(bytes + at.high_bytes));
  }
  derivatives_off_the_table(pre, outside, derivative);
}
__device__ inline void derivative_batch(const float* table, const std::uint32_t (&pre)[4], float2 (&derivative)[4]) {
  unsigned outside = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int low = bf16_table_slot(static_cast<unsigned short>(pre[c])),
              high = bf16_table_slot(static_cast<unsigned short>(pre[c] >> 16));
    outside |= (low | high) < 0 ? 1u << c : 0u;
    derivative[c] = make_float2(table[max(low, 0)], table[max(high, 0)]);
  }
  derivatives_off_the_table(pre, outside, derivative);
}

// Backward: one 64-column half of a group's tile, its xw in `box` (landed), overwritten with the input gradient;
// `sums` gathers the thread's unrounded products, per column pair (chunk j of the tile: columns 8 j + 2 t ..).
template <typename Shape>
__device__ void backward_half(const FcGeluSmem<Shape>& s, unsigned char* box, const float (&acc)[Shape::frags][64],
                              const __nv_bfloat162 (&bias)[16], int h, float2 (&sums)[16]) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, t = lane % 4;
#pragma unroll
  for (int f = 0; f < Shape::frags; ++f)
#pragma unroll
    for (int q = 2 * h; q < 2 * h + 2; ++q)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = Shape::frag_row(f, 0) + 16 * warp + lane / 4 + 8 * half;
        std::uint32_t at[4], pre[4];
        __nv_bfloat162 dgelu[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int j = 4 * q + c;
          at[c] = swizzled_pair_offset(row, 8 * (4 * (q - 2 * h) + c) + 2 * t);
          const __nv_bfloat162 xw = *reinterpret_cast<const __nv_bfloat162*>(box + at[c]);
          const __nv_bfloat162 sum = __hadd2(xw, bias[j]);  // round to nearest even once, as ColumnBias8::add_to
          pre[c] = *reinterpret_cast<const std::uint32_t*>(&sum);
          dgelu[c] = __floats2bfloat162_rn(acc[f][4 * j + 2 * half], acc[f][4 * j + 2 * half + 1]);
        }
        float2 derivative[4];
        if constexpr (Shape::computed_gelu) {
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const float2 z = widen_bf16_pair(pre[c]);
            derivative[c] = make_float2(gelu_derivative(z.x), gelu_derivative(z.y));
          }
        } else if constexpr (Shape::packed_slots) {
          packed_derivative_batch(s.gelu_table, pre, derivative);
        } else {
          derivative_batch(s.gelu_table, pre, derivative);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float lo = __low2float(dgelu[c]) * derivative[c].x, hi = __high2float(dgelu[c]) * derivative[c].y;
          sums[4 * q + c].x += lo;
          sums[4 * q + c].y += hi;
          *reinterpret_cast<__nv_bfloat162*>(box + at[c]) = __floats2bfloat162_rn(lo, hi);
        }
      }
}

// Backward: the group's column sums of the tile, added across the lanes of a column (the rows of a warp), then
// across its four warps in a fixed order, into its row block's row of the partials.
__device__ inline void write_column_sums(float (&scratch)[4][128], float2 (&sums)[16], float* partials, int rows,
                                         int cols, int row0, int col0, int group) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int mask = 4; mask < 32; mask *= 2) {
      sums[j].x += __shfl_xor_sync(kFullWarp, sums[j].x, mask);
      sums[j].y += __shfl_xor_sync(kFullWarp, sums[j].y, mask);
    }
  if (lane < 4)
#pragma unroll
    for (int j = 0; j < 16; ++j) *reinterpret_cast<float2*>(&scratch[warp][8 * j + 2 * lane]) = sums[j];
  group_barrier(group);
  const int c = static_cast<int>(threadIdx.x % 128);
  if (row0 < rows && col0 + c < cols)  // clusters: a unit's second row block may lie past the matrix
    partials[static_cast<std::size_t>(row0 / kTileRows) * cols + col0 + c] =
        ((scratch[0][c] + scratch[1][c]) + scratch[2][c]) + scratch[3][c];
}

// Backward: the group's tile (its xw asked for by load_xw_tile) to the input gradient, by TMA from the staging
// boxes, and its column sums to the partials. The scratch is written again only after the next tile's barriers,
// which every thread reaches after its reads here.
template <typename Shape>
__device__ void store_tile_backward(FcGeluSmem<Shape>& s, const float (&acc)[Shape::frags][64],
                                    const CUtensorMap* out_map, const __nv_bfloat162 (&tile_bias)[16],
                                    float* partials, int rows, int cols, int row0, int col0, int n) {
  const int group = threadIdx.x / 128;
  const bool issues = threadIdx.x % 128 == 0;
  float2 sums[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) sums[j] = make_float2(0.0f, 0.0f);
  wait_or_trap(&s.xw_full[group], n & 1);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (col0 + 64 * h >= cols) break;  // the whole half past the matrix (uniform across the group)
    unsigned char* box = s.staging.box[group][0][h];
    backward_half(s, box, acc, tile_bias, h, sums);
    hw::fence_proxy_async_shared();
    group_barrier(group);
    if (issues) {
      hw::tma_store_2d(out_map, box, row0, col0 + 64 * h);
      hw::bulk_commit_group();
    }
  }
  write_column_sums(s.columns.sums[group], sums, partials, rows, cols, row0, col0, group);
}

// Backward: one thread of the group asks for its tile's xw (two 64-column halves) in its staging boxes, once the
// stores of its last tile have read them.
template <typename Shape>
__device__ void load_xw_tile(FcGeluSmem<Shape>& s, const CUtensorMap* xw_map, int group, int row0, int col0) {
  hw::bulk_wait_group_read<0>();
  hw::mbarrier_arrive_expect_tx(&s.xw_full[group], 2 * kRowTileBytes);
  hw::tma_load_2d(s.staging.box[group][0][0], xw_map, &s.xw_full[group], row0, col0);
  hw::tma_load_2d(s.staging.box[group][0][1], xw_map, &s.xw_full[group], row0, col0 + 64);
}

// The group's tile's columns 64 h .. 64 h + 63 rounded to bf16 into an xw box (128 rows, the 128-byte swizzle).
template <typename Shape>
__device__ void write_xw_half(unsigned char* box, const float (&acc)[Shape::frags][64], int h) {
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, t = lane % 4;
#pragma unroll
  for (int f = 0; f < Shape::frags; ++f)
#pragma unroll
    for (int j = 8 * h; j < 8 * h + 8; ++j)  // chunks of 8 columns
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = Shape::frag_row(f, group) + 16 * warp + lane / 4 + 8 * half;
        const __nv_bfloat162 pair = __floats2bfloat162_rn(acc[f][4 * j + 2 * half], acc[f][4 * j + 2 * half + 1]);
        *reinterpret_cast<__nv_bfloat162*>(box + swizzled_pair_offset(row, 8 * (j - 8 * h) + 2 * t)) = pair;
      }
}

// GELU helpers, the consumers' side: each 64-column half of the group's tile rounded to bf16 into its xw box (with
// xw_box_a_half, the half's own), handed to the helpers (box_full) once the helpers' stores have read the box's last
// contents (box_empty). `handed` counts the group's boxes (with xw_box_a_half, each half's: handed[h]).
template <typename Shape>
__device__ void stage_xw(FcGeluSmem<Shape>& s, const float (&acc)[Shape::frags][64], int cols, int col0,
                         int (&handed)[2]) {
  const int group = threadIdx.x / 128;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (col0 + 64 * h >= cols) break;  // the whole half past the matrix (uniform across the group)
    const int box_index = Shape::xw_box_a_half ? h : 0;
    unsigned char* box = s.staging.box[group][0][box_index];
    int& count = handed[box_index];
    if (count > 0) wait_or_trap(&s.box_empty[group][box_index], (count - 1) & 1);
    write_xw_half<Shape>(box, acc, h);
    hw::fence_proxy_async_shared();  // the helpers' TMA store reads the box
    hw::mbarrier_arrive(&s.box_full[group][box_index]);
    ++count;
  }
}


// GELU of eight bf16 pre-activations (four pairs) by erff in place: the bits the tables hold.
__device__ inline uint4 gelu_chunk_computed(uint4 pre) {
  const auto pair = [](std::uint32_t p) {
    const float2 z = widen_bf16_pair(p);
    const __nv_bfloat162 g = __floats2bfloat162_rn(gelu(z.x), gelu(z.y));
    return *reinterpret_cast<const std::uint32_t*>(&g);
  };
  return make_uint4(pair(pre.x), pair(pre.y), pair(pre.z), pair(pre.w));
}

// The bias pairs of a box chunk's 8 columns (cols0 + 8 chunk ..), in column order; past the matrix's edge, its last
// pair (never stored).
__device__ inline void chunk_bias_pairs(std::uint32_t (&b)[4], const bf16* __restrict__ bias, int cols0, int chunk,
                                        int cols) {
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int col = min(cols0 + 8 * chunk + 2 * c, cols - 2);
    const __nv_bfloat162 pair = __halves2bfloat162(bias[col], bias[col + 1]);
    b[c] = *reinterpret_cast<const std::uint32_t*>(&pair);
  }
}

// One box's GELU(bf16(xw + bias)) by kThreads threads: the xw box read back 16 bytes (8 columns of a row) at a time
// and the results written at the same offsets of gelu_box. Thread k takes chunk k % 8 of rows k / 8, k / 8 +
// kThreads / 8, .., so that its eight bias values (b, from chunk_bias_pairs) stay in registers. gelu_of: eight
// pre-activations' GELU (gelu_chunk on a table, or gelu_chunk_computed); the loop is not unrolled, so that erff
// appears once in the code.
template <int kThreads, typename GeluOf>
__device__ inline void gelu_box_from_xw(const unsigned char* xw_box, unsigned char* gelu_box,
                                        const std::uint32_t (&b)[4], int k, GeluOf gelu_of) {
  const int chunk = k % 8;
#pragma unroll 1
  for (int row = k / 8; row < kTileRows; row += kThreads / 8) {
    const std::uint32_t at = static_cast<std::uint32_t>(row * 128 + ((chunk ^ (row % 8)) * 16));
    const uint4 xw = *reinterpret_cast<const uint4*>(xw_box + at);
    const auto add = [](std::uint32_t a, std::uint32_t bias_pair) {  // round to nearest even once
      const __nv_bfloat162 sum = __hadd2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                         *reinterpret_cast<const __nv_bfloat162*>(&bias_pair));
      return *reinterpret_cast<const std::uint32_t*>(&sum);
    };
    const uint4 pre = make_uint4(add(xw.x, b[0]), add(xw.y, b[1]), add(xw.z, b[2]), add(xw.w, b[3]));
    *reinterpret_cast<uint4*>(gelu_box + at) = gelu_of(pre);
  }
}

// computed_gelu: each half's xw box written from the accumulators, then turned into its GELU box by the group's 128
// threads (GELU by erff), and both stored by TMA; the pair of boxes is written again once the last stores have read it.
template <typename Shape>
__device__ void store_tile_computed(FcGeluSmem<Shape>& s, const float (&acc)[Shape::frags][64], OutputMaps maps,
                                    const bf16* __restrict__ bias, int cols, int row0, int col0) {
  const int group = threadIdx.x / 128, k = threadIdx.x % 128;
  const bool issues = k == 0;
  auto& boxes = s.staging.box[group][0];  // [xw, gelu]
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // columns 64 h .. 64 h + 63
    if (col0 + 64 * h >= cols) break;  // the whole half past the matrix (uniform across the group)
    std::uint32_t b[4];
    chunk_bias_pairs(b, bias, col0 + 64 * h, k % 8, cols);
    if (issues) hw::bulk_wait_group_read<0>();  // the last stores have read both boxes
    group_barrier(group);
    write_xw_half<Shape>(boxes[0], acc, h);
    group_barrier(group);
    gelu_box_from_xw<128>(boxes[0], boxes[1], b, k, gelu_chunk_computed);
    hw::fence_proxy_async_shared();
    group_barrier(group);
    if (issues) {
      hw::tma_store_2d(maps.xw, boxes[0], row0, col0 + 64 * h);
      hw::tma_store_2d(maps.gelu, boxes[1], row0, col0 + 64 * h);
      hw::bulk_commit_group();
    }
  }
}

__device__ inline void helpers_barrier() { asm volatile("bar.sync 3, %0;\n" ::"n"(kHelperThreads) : "memory"); }

// GELU helpers, their side: the block's tiles in the consumers' order (tile i by group i % 2), each 64-column half's
// xw box turned into a gelu box (the group's, or with xw_box_a_half the helpers' own) and both stored by TMA. The
// leader hands each xw box back once the stores have read it: at once, or with xw_box_a_half when the next box has
// landed, before any helper writes the gelu box again.
template <typename Shape>
__device__ void gelu_helper_loop(FcGeluSmem<Shape>& s, OutputMaps maps, const bf16* __restrict__ bias, int cols,
                                 const TileWalk<Shape::cluster_rows, Shape::cluster_cols>& walk) {
  const int k = static_cast<int>(threadIdx.x) - (Shape::consumer_threads + 32), chunk = k % 8;
  const bool leader = k == 0;
  // Each box's count so far, [group][box]: scalars, since an array indexed at run time (or a reference to one of
  // them) would be local memory.
  int handed00 = 0, handed01 = 0, handed10 = 0, handed11 = 0;
  std::uint64_t* last_empty = nullptr;  // xw_box_a_half: the box whose stores were issued last, not yet handed back
  for (int i = 0; i < walk.block_tiles(); ++i) {
    const int t = walk.tile(i), group = i % 2, col0 = walk.col0(t, Shape::cols);
    for (int h = 0; h < 2 && col0 + 64 * h < cols; ++h) {
      const int box = Shape::xw_box_a_half ? h : 0;
      unsigned char* xw_box = s.staging.box[group][0][box];
      unsigned char* gelu_box;
      if constexpr (Shape::xw_box_a_half)
        gelu_box = s.helper_gelu.box;
      else
        gelu_box = s.staging.box[group][0][1];
      std::uint32_t b[4];  // this thread's 8 columns' bias
      chunk_bias_pairs(b, bias, col0 + 64 * h, chunk, cols);
      const int count = group == 0 ? (box == 0 ? handed00 : handed01) : (box == 0 ? handed10 : handed11);
      wait_or_trap(&s.box_full[group][box], count & 1);
      if constexpr (Shape::xw_box_a_half) {  // the last box's stores have read the gelu box and their xw box
        if (leader && last_empty != nullptr) {
          hw::bulk_wait_group_read<0>();
          hw::mbarrier_arrive(last_empty);
        }
        helpers_barrier();
      }
      gelu_box_from_xw<kHelperThreads>(xw_box, gelu_box, b, k,
                                       [&](uint4 pre) { return gelu_chunk(s.gelu_table, pre); });
      hw::fence_proxy_async_shared();
      helpers_barrier();
      if (leader) {
        hw::tma_store_2d(maps.xw, xw_box, walk.row0(t), col0 + 64 * h);
        hw::tma_store_2d(maps.gelu, gelu_box, walk.row0(t), col0 + 64 * h);
        hw::bulk_commit_group();
        if constexpr (Shape::xw_box_a_half) {
          last_empty = &s.box_empty[group][box];
        } else {
          hw::bulk_wait_group_read<0>();
          hw::mbarrier_arrive(&s.box_empty[group][box]);
        }
      }
      if (group == 0)
        (box == 0 ? handed00 : handed01) = count + 1;
      else
        (box == 0 ? handed10 : handed11) = count + 1;
    }
  }
  if (leader) hw::bulk_wait_group<0>();  // the last stores' writes, before the block ends
}

template <typename Shape>
__global__ void __launch_bounds__(Shape::threads) __maxnreg__(Shape::max_registers)
    fc_gelu_sm90a_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                         const __grid_constant__ CUtensorMap xw_map, const __grid_constant__ CUtensorMap out_map,
                         bf16* xw, bf16* gelu_out, const bf16* bias, int rows, int cols,
                         TileWalk<Shape::cluster_rows, Shape::cluster_cols> walk, float* partials) {
  extern __shared__ unsigned char raw[];
  FcGeluSmem<Shape>& s = attention::aligned_smem<FcGeluSmem<Shape>>(raw);
  if (threadIdx.x == Shape::consumer_threads) {
    hw::tma_prefetch_map(&x_map);
    hw::tma_prefetch_map(&w_map);
    for (int stage = 0; stage < Shape::stages; ++stage) {
      hw::mbarrier_init(&s.full[stage], 1);
      hw::mbarrier_init(&s.empty[stage], Shape::releasers);
    }
    hw::mbarrier_init(&s.turn[0], Shape::groups / 2);  // a team's groups each arrive
    hw::mbarrier_init(&s.turn[1], Shape::groups / 2);
    hw::mbarrier_init(&s.x_full, 1);
    hw::mbarrier_init(&s.x_empty, 2);  // both warp groups release each row block
    hw::mbarrier_init(&s.xw_full[0], 1);
    hw::mbarrier_init(&s.xw_full[1], 1);
    for (int g = 0; g < 2; ++g)
      for (int box = 0; box < 2; ++box) {
        hw::mbarrier_init(&s.box_full[g][box], 128);  // every thread of the group, after its writes
        hw::mbarrier_init(&s.box_empty[g][box], 1);   // the helpers' leader, once the box's stores have read it
      }
    hw::mbarrier_init_fence();
  }
  if constexpr (Shape::computed_gelu && Shape::backward)
    ;  // no table (v25, the forward's, fills the wide table it does not read, as when it was timed)
  else if constexpr (Shape::packed_slots)
    for (std::uint32_t slot = threadIdx.x; slot < PackedTable::size; slot += blockDim.x)
      s.gelu_table[slot] = gelu_derivative(float_of_bf16_bits(PackedTable::bits_of_slot(slot)));
  else if constexpr (Shape::backward)
    fill_bf16_table(s.gelu_table, [](float x) { return gelu_derivative(x); });
  else if constexpr (Shape::wide_table)
    for (std::uint32_t slot = threadIdx.x; slot < WideTable::size; slot += blockDim.x)
      s.gelu_table[slot] =
          __bfloat16_as_ushort(__float2bfloat16_rn(gelu(float_of_bf16_bits(WideTable::bits_of_slot(slot)))));
  else
    fill_bf16_table(s.gelu_table, [](float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(gelu(x))); });
  __syncthreads();
  if constexpr (Shape::cluster_blocks > 1) hw::cluster_sync();  // both blocks' barriers before either's copies
  if (threadIdx.x >= Shape::consumer_threads) {
    if constexpr (Shape::producer_group) hw::setmaxnreg_dec<Shape::producer_registers>();
    if (threadIdx.x == Shape::consumer_threads) load_tiles(s, &x_map, &w_map, walk);
    if constexpr (Shape::gelu_helpers)
      if (threadIdx.x >= Shape::consumer_threads + 32)
        gelu_helper_loop(s, OutputMaps{&xw_map, &out_map}, bias, cols, walk);
    return;
  }
  if constexpr (Shape::producer_group) hw::setmaxnreg_inc<Shape::consumer_registers>();
  // The block's i-th tile (TileWalk::tile) has its stages from i k_blocks on; ping-pong warp groups take every
  // other one, in turns: a group waits for its stages only after the other has waited for all of its own, so
  // each stage's earlier phases have completed and the parity wait cannot pass on an earlier one.
  // Resident x: a group waits for its tile's row block before multiplying, and releases it once the products of its
  // last tile in it have completed; a row block of the range without a tile of the group (one tile at the range's
  // end, or every other with one column tile) it releases once that row block has landed, so that each release
  // counts toward its own row block's phase.
  const int group = threadIdx.x / 128, team = Shape::team(group);
  const int first = Shape::pingpong ? team : 0, stride = Shape::pingpong ? 2 : 1;
  const bool signals = threadIdx.x % 128 == 0;
  float acc[Shape::frags][64];
  int staged = 0;  // staged stores: the group's boxes stored
  [[maybe_unused]] int handed[2] = {0, 0};  // GELU helpers: the group's xw boxes handed over (each box's)
  for (int i = first, n = 0, released = 0; i < walk.block_tiles(); i += stride, ++n) {
    const int t = walk.tile(i), row_block = walk.row_block(i);
    const int col0 = walk.col0(t, Shape::cols);
    if constexpr (Shape::early_xw)
      if (signals) load_xw_tile(s, &xw_map, group, walk.row0(t), col0);
    if constexpr (Shape::pingpong) {
      const int turn = team == 0 ? n - 1 : n;  // team 0 starts without waiting
      if (turn >= 0) wait_or_trap(&s.turn[team], turn & 1);
    }
    if constexpr (Shape::resident_x) {
      for (; released < row_block; ++released) {
        wait_or_trap(&s.x_full, released & 1);
        // Every warp of the group past this wait before the release: a release lets the next row block land, and
        // a warp still to wait would then see its phase's parity two phases on, and wait forever.
        group_barrier(group);
        if (signals) hw::mbarrier_arrive(&s.x_empty);
      }
      wait_or_trap(&s.x_full, row_block & 1);
    }
    [[maybe_unused]] __nv_bfloat162 tile_bias[16];  // the staged and backward epilogues' bias pairs
    if constexpr (Shape::early_bias) load_bias_pairs(tile_bias, bias, col0, threadIdx.x % 4, cols);
    multiply_tile(s, acc, group, walk.k_blocks, i * walk.k_blocks, [&] {
      if (Shape::pingpong && signals) hw::mbarrier_arrive(&s.turn[1 - team]);
      if constexpr (Shape::backward && !Shape::early_xw)
        if (signals) load_xw_tile(s, &xw_map, group, walk.row0(t), col0);
    });
    if constexpr (Shape::resident_x)
      if (i + stride >= walk.block_tiles() || walk.row_block(i + stride) != row_block) {
        if (signals) hw::mbarrier_arrive(&s.x_empty);
        released = row_block + 1;
      }
    constexpr bool computed_forward = Shape::computed_gelu && !Shape::backward;  // its bias read by chunks
    if constexpr (Shape::staged_stores && !Shape::early_bias && !Shape::gelu_helpers && !computed_forward &&
                  !Shape::paired_groups)
      load_bias_pairs(tile_bias, bias, col0, threadIdx.x % 4, cols);
    if constexpr (Shape::gelu_helpers)
      stage_xw(s, acc, cols, col0, handed);
    else if constexpr (computed_forward)
      store_tile_computed(s, acc, OutputMaps{&xw_map, &out_map}, bias, cols, walk.row0(t), col0);
    else if constexpr (Shape::backward)
      store_tile_backward(s, acc, &out_map, tile_bias, partials, rows, cols, walk.row0(t), col0, n);
    else if constexpr (Shape::warp_stores)
      store_tile_staged_by_warp(s, acc, OutputMaps{&xw_map, &out_map}, tile_bias, bias, cols, walk.row0(t), col0);
    else if constexpr (Shape::staged_stores)
      store_tile_staged(s, acc, OutputMaps{&xw_map, &out_map}, tile_bias, cols, walk.row0(t), col0, staged);
    else
      store_tile(s, acc, xw, gelu_out, bias, rows, cols, walk.row0(t), col0);
  }
  if constexpr (Shape::staged_stores && !Shape::gelu_helpers)
    if (threadIdx.x % (Shape::warp_stores ? 32 : 128) == 0) hw::bulk_wait_group<0>();  // the last stores' writes
}

// Each shape's kernel's persistent grid, set by configure at its first launch: the blocks the device holds at once
// (in whole clusters).
template <typename Shape>
int g_persistent_grid = 0;

// A launch of `Shape`'s kernel on `blocks` blocks, in clusters of Shape::cluster_blocks.
template <typename Shape>
cudaLaunchConfig_t launch_config(int blocks, cudaStream_t stream, cudaLaunchAttribute& cluster) {
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = Shape::cluster_blocks;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(Shape::threads);
  config.dynamicSmemBytes = kSmemBytes<Shape>;
  config.stream = stream;
  config.attrs = &cluster;
  config.numAttrs = Shape::cluster_blocks > 1 ? 1 : 0;  // the other versions launch as <<<>>> would
  return config;
}

// A row-major bf16 matrix's map in boxes of box_rows x 64 columns, 128-byte swizzle.
CUtensorMap matrix_map(const bf16* data, int rows, int cols, int box_rows = kTileRows) {
  const hopper::Matrix2d m{data, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<std::uint64_t>(rows),
                           static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(cols) * sizeof(bf16)};
  return hopper::make_tensor_map_2d(m, static_cast<std::uint32_t>(box_rows), kTileK, hopper::TileSwizzle::bytes128);
}

// setmaxnreg moves registers within the block's pool, which ptxas sized: a kernel compiled to other than
// Shape::entry_registers would leave the consumers' setmaxnreg.inc waiting forever, so configure refuses it.
template <typename Shape>
void configure(const char* version) {
  cudaFuncAttributes attributes{};
  ROOFBENCH_CUDA(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(fc_gelu_sm90a_kernel<Shape>)));
  if (Shape::producer_group && attributes.numRegs != Shape::entry_registers)
    throw Error(std::string("gpt: ") + version + "'s kernel has " + std::to_string(attributes.numRegs) +
                " registers a thread where its setmaxnreg split needs " + std::to_string(Shape::entry_registers));
  g_persistent_grid<Shape> =
      attention::configure_shared_sm90a(version, fc_gelu_sm90a_kernel<Shape>, Shape::threads, kSmemBytes<Shape>);
  if constexpr (Shape::cluster_blocks > 1) {
    cudaLaunchAttribute cluster{};
    const cudaLaunchConfig_t config = launch_config<Shape>(Shape::cluster_blocks, nullptr, cluster);
    int clusters = 0;
    ROOFBENCH_CUDA(cudaOccupancyMaxActiveClusters(&clusters, fc_gelu_sm90a_kernel<Shape>, &config));
    if (clusters < 1)
      throw Error(std::string("gpt: ") + version + "'s clusters of " + std::to_string(Shape::cluster_blocks) +
                  " blocks do not fit this GPU");
    g_persistent_grid<Shape> = clusters * Shape::cluster_blocks;
  }
}

// A launch's operands: the A (x, or dy) and B (w) maps, the epilogue's two maps (staged stores: xw and gelu stored;
// backward: xw loaded, the input gradient stored), and the pointers the other epilogues write or read.
struct KernelOperands {
  CUtensorMap a_map, b_map, xw_map, out_map;
  bf16* xw;
  bf16* out;
  const bf16* bias;
  float* partials;  // backward: a row of column sums a row block
};

void check_shape(const char* version, int rows, int in, int out) {
  if (rows < 1 || in < kTileK || in % kTileK != 0 || out < 8 || out % 8 != 0)
    throw Error(std::string("gpt: ") + version + " needs rows >= 1, in a multiple of 64 and out a multiple of 8 (got " +
                "rows " + std::to_string(rows) + ", in " + std::to_string(in) + ", out " + std::to_string(out) + ")");
}

// The kernel of `Shape` over every tile of a rows x out product with `in` terms, on one block a tile or on its
// persistent grid; the kernel configured at its first launch (`version` names it in a refusal).
template <typename Shape>
void run_kernel(const char* version, const KernelOperands& ops, int rows, int in, int out, bool persistent,
                cudaStream_t stream) {
  if (g_persistent_grid<Shape> == 0) configure<Shape>(version);
  const int col_units = (out + Shape::cluster_cols * Shape::cols - 1) / (Shape::cluster_cols * Shape::cols);
  const int row_units = (rows + Shape::cluster_rows * kTileRows - 1) / (Shape::cluster_rows * kTileRows);
  const TileWalk<Shape::cluster_rows, Shape::cluster_cols> walk{col_units, col_units * row_units, in / kTileK,
                                                               Shape::resident_x};
  if (Shape::resident_x && in > kMaxResidentK)
    throw Error(std::string("gpt: ") + version + " keeps at most " + std::to_string(kMaxResidentK) +
                " columns of x (got in " + std::to_string(in) + ")");
  const int blocks = Shape::cluster_blocks * (persistent ? std::min(walk.tiles, g_persistent_grid<Shape> /
                                                                                    Shape::cluster_blocks)
                                                         : walk.tiles);
  cudaLaunchAttribute cluster{};
  const cudaLaunchConfig_t config = launch_config<Shape>(blocks, stream, cluster);
  ROOFBENCH_CUDA(cudaLaunchKernelEx(&config, fc_gelu_sm90a_kernel<Shape>, ops.a_map, ops.b_map, ops.xw_map,
                                    ops.out_map, ops.xw, ops.out, ops.bias, rows, out, walk, ops.partials));
}

// The forward: xw = x w^T and gelu = GELU(bf16(xw + bias)) (x [rows, in], w [out, in]).
template <typename Shape>
void launch(const char* version, bf16* xw, bf16* gelu_out, const bf16* x, const bf16* w, const bf16* bias, int rows,
            int in, int out, bool persistent, cudaStream_t stream) {
  static_assert(!Shape::backward);
  check_shape(version, rows, in, out);
  if (!aligned16(xw) || !aligned16(gelu_out) || !aligned16(x) || !aligned16(w))
    throw Error(std::string("gpt: ") + version + " needs x, w, xw and gelu 16-byte aligned");
  // Clusters load x and w in halves of a tile's rows and columns. Staged stores' outputs, in the staging boxes' shape,
  // are encoded for those versions alone (the others never read them).
  KernelOperands ops{matrix_map(x, rows, in, kTileRows / Shape::cluster_cols),
                     matrix_map(w, out, in, kTileRows / Shape::cluster_rows), {}, {},
                     xw, gelu_out, bias, nullptr};
  if constexpr (Shape::staged_stores) {
    ops.xw_map = matrix_map(xw, rows, out, Shape::store_box_rows);
    ops.out_map = matrix_map(gelu_out, rows, out, Shape::store_box_rows);
  }
  run_kernel<Shape>(version, ops, rows, in, out, persistent, stream);
}

// The backward: dz = bf16(bf16(dy w) GELU'(bf16(xw + bias))) and dbias its column sums (fp32), dy [rows, in], w
// [in, out] (the next layer's weight as stored), xw [rows, out]; partials: layers.hpp's
// fc_gelu_backward_partials_floats(rows, out), a row of column sums for each 128 rows.
template <typename Shape>
void launch_backward(const char* version, bf16* dz, float* dbias, float* partials, const bf16* dy, const bf16* w,
                     const bf16* xw, const bf16* bias, int rows, int in, int out, cudaStream_t stream) {
  static_assert(Shape::backward);
  static_assert(kTileRows == 128, "layers.hpp's fc_gelu_backward_partials_floats counts 128-row blocks");
  check_shape(version, rows, in, out);
  if (!aligned16(dz) || !aligned16(dy) || !aligned16(w) || !aligned16(xw))
    throw Error(std::string("gpt: ") + version + " needs dz, dy, w and xw 16-byte aligned");
  const KernelOperands ops{matrix_map(dy, rows, in, kTileRows / Shape::cluster_cols), matrix_map(w, in, out, kTileK),
                           matrix_map(xw, rows, out),     matrix_map(dz, rows, out),
                           nullptr,                       dz,
                           bias,                          partials};
  run_kernel<Shape>(version, ops, rows, in, out, true, stream);
  column_finish(ColumnOutputs{{dbias}, out}, partials, (rows + kTileRows - 1) / kTileRows, out, stream);
}

}  // namespace
}  // namespace roofbench::gpt::cuda::fc_gelu
