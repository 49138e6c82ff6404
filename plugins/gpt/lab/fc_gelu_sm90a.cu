// lab_fc_gelu_bf16 v5-v27 and lab_fc_gelu_backward_bf16 v3-v9 (sm_90a): the MLP's fc layer in one kernel,
// cuda/fc_gelu_sm90a.cuh's, each version a TileConfig of its features.
//
// Why: v4 writes xw with cuBLASLt, then its GELU pass reads xw back and writes gelu. At R3's shape (65536 x 2048
// out of 512 inputs) that read is 268 MB, and the pass took 208 us a launch in R3's profile on an H100.
//
// The versions:
//   v5: 128 x 128, three stages (96 KB) + the 9.5 KB table, two blocks an SM, a block a tile, each filling its
//       table and barriers and its first stages before its products;
//   v6: v5's on two blocks an SM that walk the tiles, so each block does that once and its producer loads the
//       next tile's first stages during the epilogue;
//   v7: 128 x 256 (two m64n128 products a k16 step), four stages (192 KB), one block an SM walking the tiles: 48
//       KB of operands a stage for 2^22 FLOPs where v5 loads 32 KB for 2^21, and three stages ahead of the
//       products where v5's blocks have one or two;
//   v8: v7 with each thread's stores 16 bytes of a row, after the four lanes of a row trade their pairs;
//   v9: v8's stores on 128 x 128 tiles, each warp group taking every other tile of the block whole (ping-pong), a
//       six-stage ring (192 KB), one block an SM: a group's epilogue beside the other's products;
//   v10: v6 with the epilogue's lookups batched (output_batch) and a fragment's bias loaded before its stores, 112
//       registers: in v5-v9 a branch per element kept the epilogue's instructions from interleaving, and it, not
//       the products, took most of the time (Nsight Compute on v9: 7.3 cycles a warp between instructions, SM and
//       memory throughput both near 30%);
//   v11: v9 (ping-pong) with v10's epilogue and its 4-byte stores;
//   v12: v11 on a 16 KB table of |z| in [2^-16, 2^16) whose two slots a pair come from packed 32-bit operations;
//   v13: v12 on a range of consecutive tiles a block, its current row block of x resident in shared memory (128 KB)
//       while it walks that row block's column tiles, a four-stage ring of w (Nsight Compute on v12: the L2 at 90% of
//       its throughput, DRAM at 38%);
//   v14: v12 on a four-stage ring whose freed 64 KB stage each group's stores: a 64-column half of xw and gelu
//       written into shared memory, then stored by TMA (v12's 4-byte stores write half sectors);
//   v15: v13 and v14 together, in 227 KB: a three-stage ring of w and 64-row staging boxes (32 KB);
//   v16: v15 on clusters of two blocks on adjacent row blocks, each multicasting half of every w stage to both
//       (v13's L2 reads: w's 128 KB a tile against x's 128 KB a row block);
//   v17: v14 with two buffers of 64-row staging boxes in its 64 KB, so that a group's writes of one box pair overlap
//       the TMA stores of the other (v14's writes wait for its last stores to have read the boxes).
//   v18: v14 on v16's clusters (w multicast to two blocks on adjacent row blocks), x loaded a stage at a time: 192 KB
//       of operands from the L2 a tile against v14's 256 (v16 paired v15's three-stage ring);
//   v19: v18 on a five-stage ring, its room from 64-row staging boxes;
//   v20: v14 on clusters of 2 x 2 blocks (two row blocks by two column tiles), sharing w between a column tile's
//       two blocks and x between a row block's: 128 KB of operands from the L2 a tile;
//   v21: v14 asking for its epilogue's bias pairs (global loads) before the tile's products;
//   v22: v14 on a five-stage ring, its room from 64-row staging boxes (v19 on single blocks);
//   v23: v14 whose consumers stage only xw; the producer group's three idle warps add the bias, look GELU up and
//       store both (Nsight Compute on v14: the tensor pipe 43% busy, one warp a scheduler issuing the epilogue);
//   v24: v23 with an xw box for each half of a group's tile and a GELU box of the helpers' own, each box handed back
//       when the next has landed: neither the consumers' second half nor the helpers wait for a store's read;
//   v25: v14 with GELU computed by erff, not looked up: each half's xw box written first, then read back 16 bytes a
//       thread at a time in a loop that is not unrolled (v23's and v24's three helper warps lost 40%: the consumers'
//       eight warps stay the ones that evaluate GELU; Nsight Compute on v14: the LSU data pipe 60% busy, the tensor
//       pipe 43%);
//   v26: v14 with each warp staging its own 16 rows of each fragment and storing them by TMA itself (16-row boxes),
//       no barrier of the group around the stores (Nsight Compute on v14: 14% of the warp samples wait at them);
//   v27: v26 on four consumer warp groups in two pairs, a pair sharing each tile (64 rows a group) and the pairs taking
//       every other tile in turns: two warps a scheduler for each epilogue, where v14's has one (Nsight Compute on
//       v14: a tile's epilogue about three times as long as its products).
// The backward's v3 and v4: v2 (kBackwardKeeperTile) on v18's and v20's clusters, w's stage shared as its two
// 64-column boxes; v5: v2 with v21's early bias; v6: v3 with GELU' computed by erff and expf for every element, not
// looked up (v25's trade on the backward); v7: v3 asking for its tile's xw before its turn at the tensor cores
// (Nsight Compute on v3: 7% of the warp samples wait for xw, asked for once the tile's products are issued); v8: v3
// with GELU' from a 16 KB table over [2^-13, 8) whose slots a pair's bits give by packed 32-bit operations (v12's
// trick on the backward); v9: v7 and v8 together.
#include "../cuda/fc_gelu_sm90a.cuh"

#include <string>
#include <type_traits>

#include "fc_gelu_sm90a.hpp"
#include "roofbench/hopper_host.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

using fc_gelu::FcGeluSmem;
using fc_gelu::kSmemBytes;
using fc_gelu::launch;
using fc_gelu::TileConfig;
using fc_gelu::TileShape;

using V5Shape = TileShape<TileConfig{.cols = 128, .stages = 3, .blocks_per_sm = 2}>;  // v5 and v6
using V7Shape = TileShape<TileConfig{.cols = 256, .stages = 4, .blocks_per_sm = 1}>;
using V8Shape = TileShape<TileConfig{.cols = 256, .stages = 4, .blocks_per_sm = 1, .wide_stores = true}>;
using V9Shape =
    TileShape<TileConfig{.cols = 128, .stages = 6, .blocks_per_sm = 1, .wide_stores = true, .pingpong = true}>;
using V10Shape = TileShape<TileConfig{.cols = 128, .stages = 3, .blocks_per_sm = 2, .batched_lookup = true}>;
using V11Shape =
    TileShape<TileConfig{.cols = 128, .stages = 6, .blocks_per_sm = 1, .pingpong = true, .batched_lookup = true}>;
using V12Shape =
    TileShape<TileConfig{.cols = 128, .stages = 6, .blocks_per_sm = 1, .pingpong = true, .wide_table = true}>;
using V13Shape = TileShape<TileConfig{
    .cols = 128, .stages = 4, .blocks_per_sm = 1, .pingpong = true, .wide_table = true, .resident_x = true}>;
constexpr TileConfig kV14Tile = fc_gelu::kKeeperTile;
using V14Shape = TileShape<kV14Tile>;  // the bf16 keeper's: its rows run fc_gelu_forward_sm90a
using V15Shape = TileShape<TileConfig{.cols = 128,
                                      .stages = 3,
                                      .blocks_per_sm = 1,
                                      .pingpong = true,
                                      .wide_table = true,
                                      .resident_x = true,
                                      .staged_rows = 64}>;
using V16Shape = TileShape<TileConfig{.cols = 128,
                                      .stages = 3,
                                      .blocks_per_sm = 1,
                                      .pingpong = true,
                                      .wide_table = true,
                                      .resident_x = true,
                                      .staged_rows = 64,
                                      .cluster_rows = 2}>;
using V17Shape = TileShape<TileConfig{.cols = 128,
                                      .stages = 4,
                                      .blocks_per_sm = 1,
                                      .pingpong = true,
                                      .wide_table = true,
                                      .staged_rows = 64,
                                      .staged_buffers = 2}>;

// `base` with `change` applied: v18-v27 and the backward's v3-v9 read as the version they change and what changed.
template <typename Change>
constexpr TileConfig changed(TileConfig base, Change change) {
  change(base);
  return base;
}
using V18Shape = TileShape<changed(kV14Tile, [](TileConfig& t) { t.cluster_rows = 2; })>;
using V19Shape = TileShape<changed(kV14Tile, [](TileConfig& t) {
  t.cluster_rows = 2;
  t.stages = 5;
  t.staged_rows = 64;
})>;
using V20Shape = TileShape<changed(kV14Tile, [](TileConfig& t) { t.cluster_rows = t.cluster_cols = 2; })>;
using V21Shape = TileShape<changed(kV14Tile, [](TileConfig& t) { t.early_bias = true; })>;
using V22Shape = TileShape<changed(kV14Tile, [](TileConfig& t) {
  t.stages = 5;
  t.staged_rows = 64;
})>;
using V23Shape = TileShape<changed(kV14Tile, [](TileConfig& t) { t.gelu_helpers = true; })>;
using V24Shape = TileShape<changed(kV14Tile, [](TileConfig& t) { t.gelu_helpers = t.xw_box_a_half = true; })>;
using V25Shape = TileShape<changed(kV14Tile, [](TileConfig& t) { t.computed_gelu = true; })>;
using V26Shape = TileShape<changed(kV14Tile, [](TileConfig& t) { t.warp_stores = true; })>;
using V27Shape = TileShape<changed(kV14Tile, [](TileConfig& t) {
  t.warp_stores = t.paired_groups = true;
  t.staged_rows = 64;  // a group's 64 rows of the tile
})>;
constexpr TileConfig kBackwardV2Tile{
    .cols = 128, .stages = 4, .blocks_per_sm = 1, .pingpong = true, .staged_rows = 128, .backward = true};
using BackwardV2Shape = TileShape<kBackwardV2Tile>;
constexpr TileConfig kBackwardV3Tile = changed(kBackwardV2Tile, [](TileConfig& t) { t.cluster_rows = 2; });
using BackwardV3Shape = TileShape<kBackwardV3Tile>;
using BackwardV4Shape = TileShape<changed(kBackwardV2Tile, [](TileConfig& t) { t.cluster_rows = t.cluster_cols = 2; })>;
using BackwardV5Shape = TileShape<changed(kBackwardV2Tile, [](TileConfig& t) { t.early_bias = true; })>;
using BackwardV6Shape = TileShape<changed(kBackwardV3Tile, [](TileConfig& t) { t.computed_gelu = true; })>;
using BackwardV7Shape = TileShape<changed(kBackwardV3Tile, [](TileConfig& t) { t.early_xw = true; })>;
using BackwardV8Shape = TileShape<fc_gelu::kBackwardKeeperTile>;  // the keeper's: its rows run fc_gelu_backward_sm90a
static_assert(std::is_same_v<BackwardV8Shape, TileShape<changed(kBackwardV3Tile, [](TileConfig& t) {
                t.packed_slots = true;
              })>>,
              "v8 is v3 on the packed table");
using BackwardV9Shape = TileShape<changed(kBackwardV3Tile, [](TileConfig& t) {
  t.early_xw = true;
  t.packed_slots = true;
})>;

static_assert(V5Shape::blocks_per_sm * (kSmemBytes<V5Shape> + 1024) <= 228 * 1024, "two v5 blocks an SM");
static_assert(kSmemBytes<V7Shape> + 1024 <= 228 * 1024, "one v7 block an SM");
static_assert(sizeof(FcGeluSmem<V8Shape>) == sizeof(FcGeluSmem<V7Shape>), "v8 is v7 with other stores");
static_assert(kSmemBytes<V9Shape> + 1024 <= 228 * 1024, "one v9 block an SM");
static_assert(sizeof(FcGeluSmem<V10Shape>) == sizeof(FcGeluSmem<V5Shape>), "v10 is v6 with another epilogue");
static_assert(sizeof(FcGeluSmem<V11Shape>) == sizeof(FcGeluSmem<V9Shape>), "v11 is v9 with another epilogue");
static_assert(kSmemBytes<V12Shape> + 1024 <= 228 * 1024, "one v12 block an SM");
static_assert(kSmemBytes<V13Shape> + 1024 <= 228 * 1024, "one v13 block an SM");
static_assert(kSmemBytes<V14Shape> + 1024 <= 228 * 1024, "one v14 block an SM");
static_assert(kSmemBytes<V15Shape> + 1024 <= 228 * 1024, "one v15 block an SM");
static_assert(sizeof(FcGeluSmem<V16Shape>) == sizeof(FcGeluSmem<V15Shape>), "v16 is v15 in pairs");
static_assert(sizeof(FcGeluSmem<V17Shape>) == sizeof(FcGeluSmem<V14Shape>), "v17 stages in v14's 64 KB");
static_assert(sizeof(FcGeluSmem<V18Shape>) == sizeof(FcGeluSmem<V14Shape>), "v18 is v14 in pairs");
static_assert(kSmemBytes<V19Shape> + 1024 <= 228 * 1024, "one v19 block an SM");
static_assert(sizeof(FcGeluSmem<V22Shape>) == sizeof(FcGeluSmem<V19Shape>), "v22 is v19 on single blocks");
static_assert(sizeof(FcGeluSmem<V23Shape>) == sizeof(FcGeluSmem<V14Shape>), "v23 stages in v14's boxes");
static_assert(kSmemBytes<V24Shape> + 1024 <= 228 * 1024, "one v24 block an SM");
static_assert(kSmemBytes<BackwardV3Shape> + 1024 <= 228 * 1024, "one backward v3 block an SM");
static_assert(kSmemBytes<BackwardV9Shape> + 1024 <= 228 * 1024, "one backward v9 block an SM");
static_assert(sizeof(FcGeluSmem<V20Shape>) == sizeof(FcGeluSmem<V14Shape>), "v20 is v14 in clusters of four");
static_assert(offsetof(FcGeluSmem<V14Shape>, staging) % attention::kAtomBytes == 0, "staging on a swizzle repeat");

}  // namespace

void fc_gelu_sm90a_configure() {
  int device = 0;
  ROOFBENCH_CUDA(cudaGetDevice(&device));
  if (!hopper::hopper_path_available(device))
    throw NotApplicable(
        "gpt lab_fc_gelu_bf16 v5-v27 and lab_fc_gelu_backward_bf16 v2-v9 need sm_90a (wgmma): a compute capability 9.0 "
        "GPU");
}

void fc_gelu_sm90a(int version, bf16* xw, bf16* gelu_out, const bf16* x, const bf16* w, const bf16* bias, int rows,
                   int in, int out, cudaStream_t stream) {
  switch (version) {
    case 5: return launch<V5Shape>("lab_fc_gelu_bf16 v5", xw, gelu_out, x, w, bias, rows, in, out, false, stream);
    case 6: return launch<V5Shape>("lab_fc_gelu_bf16 v6", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 7: return launch<V7Shape>("lab_fc_gelu_bf16 v7", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 8: return launch<V8Shape>("lab_fc_gelu_bf16 v8", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 9: return launch<V9Shape>("lab_fc_gelu_bf16 v9", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 10: return launch<V10Shape>("lab_fc_gelu_bf16 v10", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 11: return launch<V11Shape>("lab_fc_gelu_bf16 v11", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 12: return launch<V12Shape>("lab_fc_gelu_bf16 v12", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 13: return launch<V13Shape>("lab_fc_gelu_bf16 v13", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 14: return fc_gelu_forward_sm90a(xw, gelu_out, x, w, bias, rows, in, out, stream);  // the keeper
    case 15: return launch<V15Shape>("lab_fc_gelu_bf16 v15", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 16: return launch<V16Shape>("lab_fc_gelu_bf16 v16", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 17: return launch<V17Shape>("lab_fc_gelu_bf16 v17", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 18: return launch<V18Shape>("lab_fc_gelu_bf16 v18", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 19: return launch<V19Shape>("lab_fc_gelu_bf16 v19", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 20: return launch<V20Shape>("lab_fc_gelu_bf16 v20", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 21: return launch<V21Shape>("lab_fc_gelu_bf16 v21", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 22: return launch<V22Shape>("lab_fc_gelu_bf16 v22", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 23: return launch<V23Shape>("lab_fc_gelu_bf16 v23", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 24: return launch<V24Shape>("lab_fc_gelu_bf16 v24", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 25: return launch<V25Shape>("lab_fc_gelu_bf16 v25", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 26: return launch<V26Shape>("lab_fc_gelu_bf16 v26", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    case 27: return launch<V27Shape>("lab_fc_gelu_bf16 v27", xw, gelu_out, x, w, bias, rows, in, out, true, stream);
    default: throw Error("gpt: lab_fc_gelu_bf16 has no sm_90a version v" + std::to_string(version));
  }
}

void fc_gelu_backward_sm90a(int version, bf16* dz, float* dbias, float* partials, const bf16* dy, const bf16* w,
                            const bf16* xw, const bf16* bias, int rows, int in, int out, cudaStream_t stream) {
  const auto run = [&](auto shape, const char* name) {
    using Shape = typename decltype(shape)::type;
    fc_gelu::launch_backward<Shape>(name, dz, dbias, partials, dy, w, xw, bias, rows, in, out, stream);
  };
  switch (version) {
    case 2: return run(std::type_identity<BackwardV2Shape>{}, "lab_fc_gelu_backward_bf16 v2");
    case 3: return run(std::type_identity<BackwardV3Shape>{}, "lab_fc_gelu_backward_bf16 v3");
    case 4: return run(std::type_identity<BackwardV4Shape>{}, "lab_fc_gelu_backward_bf16 v4");
    case 5: return run(std::type_identity<BackwardV5Shape>{}, "lab_fc_gelu_backward_bf16 v5");
    case 6: return run(std::type_identity<BackwardV6Shape>{}, "lab_fc_gelu_backward_bf16 v6");
    case 7: return run(std::type_identity<BackwardV7Shape>{}, "lab_fc_gelu_backward_bf16 v7");
    case 8: return cuda::fc_gelu_backward_sm90a(dz, dbias, partials, dy, w, xw, bias, rows, in, out, stream);  // keeper
    case 9: return run(std::type_identity<BackwardV9Shape>{}, "lab_fc_gelu_backward_bf16 v9");
    default: throw Error("gpt: lab_fc_gelu_backward_bf16 has no sm_90a version v" + std::to_string(version));
  }
}

}  // namespace roofbench::gpt::cuda::lab
