// Hopper device primitives (PTX ISA 8.0+, sm_90a): TMA tile loads (cp.async.bulk.tensor) completing on
// mbarriers, also multicast to a cluster's blocks, TMA tile stores in bulk groups, cluster barriers and arrivals
// on a peer's mbarriers, the wgmma shared-memory matrix descriptors, wgmma.mma_async m64nNk16 on bf16 or fp16
// with fp32 accumulators (B K-major, or MN-major through the transpose bit), and warp-group
// register reallocation (setmaxnreg). kernels/hopper/README.md describes the layouts; in short:
//   - A shared-memory operand tile is K-major: each row (an M row of A, an N row of B) holds consecutive
//     K elements. With Swizzle::bytes128 a row is 64 bf16 (128 bytes), 8 rows form a 1024-byte atom, and
//     the 16-byte chunk c of row r sits at chunk c ^ (r % 8) of that row: the layout a TMA load with
//     CU_TENSOR_MAP_SWIZZLE_128B and 128-byte box rows writes. Tiles must start 1024-byte aligned.
//   - The m64nN accumulator, float d[N / 2] per thread: warp w of the warp group, lane 4 g + t, holds
//     d[4 j + 0..1] at (row 16 w + g, cols 8 j + 2 t + 0..1) and d[4 j + 2..3] at (row 16 w + g + 8,
//     same cols), j = 0 .. N / 8 - 1 (mma.sync's m16n8 C layout, once per 8 columns).
//   - A from registers (the _rs form), per k16 step: the mma.sync m16n8k16 A fragment of rows 16 w ..
//     16 w + 15, a[0] (g, 2t..2t+1), a[1] (g+8, 2t..), a[2] (g, 2t+8..), a[3] (g+8, 2t+8..), two bf16
//     each, the lower column in the low half.
// wgmma and setmaxnreg exist only in the sm_90a target: a file including this header is compiled for
// sm_90a alone (CMake: roofbench_hopper_sm90a), and the host picks that path with
// roofbench::hopper::hopper_path_available (roofbench/hopper_host.hpp).
#pragma once
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "roofbench/hopper.cuh needs the sm_90a target alone: -gencode=arch=compute_90a,code=sm_90a (roofbench_hopper_sm90a)"
#endif

namespace roofbench::hopper {

// The 32-bit shared-window address of a generic pointer into shared memory, as the PTX below takes it.
__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier: a 64-bit shared-memory barrier with an arrival count and a transaction (byte) count.
// A phase completes when the expected arrivals have arrived and the expected bytes have landed; the
// barrier then re-arms for the next phase, whose parity is the other one. Phase 0 is the first.

// `arrivals` arrivals complete each phase. One thread calls it; then mbarrier_init_fence and a
// __syncthreads before anyone else (or the copy engine) uses the barrier.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, std::uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) as well as to the other threads.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival (release semantics: this thread's earlier writes are visible to whoever waits).
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(shared_address(bar))
               : "memory");
}
// One arrival that also makes the current phase wait for `bytes` more bytes of asynchronous copies.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                   shared_address(bar)),
               "r"(bytes)
               : "memory");
}
// Whether the phase of parity `parity` has completed, i.e. the barrier's current phase has the other
// parity. On a fresh barrier parity 1 reads as completed (the phase "before" phase 0), parity 0 not.
// test_wait returns at once; try_wait may suspend the thread a while (time set by the hardware) first.
#define RB_MBARRIER_POLL(op) \
  "{\n.reg .pred p;\nmbarrier." op ".parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
__device__ __forceinline__ bool mbarrier_test_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(RB_MBARRIER_POLL("test_wait") : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
  return done != 0;
}
__device__ __forceinline__ bool mbarrier_try_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(RB_MBARRIER_POLL("try_wait") : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
  return done != 0;
}
#undef RB_MBARRIER_POLL
// Blocks until the phase of parity `parity` has completed (acquire: the writes it covers are visible).
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}
// The trap of a wait that timed out, as a call: out of line, so that in a kernel whose consumers raise their
// registers with setmaxnreg ptxas allocates them the registers setmaxnreg gives (with an inline trap it keeps them
// within the registers a thread has at entry).
static __device__ __noinline__ void mbarrier_wait_timed_out() { __trap(); }
// mbarrier_wait with a limit of about a second (2^31 cycles; a real wait takes microseconds): a phase that never
// completes (a wrong byte count or parity) ends the kernel with an error instead of a hang. kOutOfLineTrap: the
// trap as mbarrier_wait_timed_out's call, for kernels that use setmaxnreg.
template <bool kOutOfLineTrap = false>
__device__ __forceinline__ void mbarrier_wait_or_trap(std::uint64_t* bar, std::uint32_t parity) {
  if (mbarrier_try_wait(bar, parity)) return;
  const long long start = clock64();
  while (!mbarrier_try_wait(bar, parity))
    if (clock64() - start > (1ll << 31)) {
      if constexpr (kOutOfLineTrap)
        mbarrier_wait_timed_out();
      else
        __trap();
    }
}

// ---- Copies through the copy engine (TMA), completing on an mbarrier as transaction bytes.

// Loads the tensor map's box whose first element is (row, col) into shared memory at `dst` (128-byte
// aligned; 1024 for the 128-byte swizzle). Elements past the matrix's edge (rows, cols, also negative
// coordinates) arrive as zeros, and the whole box counts towards the barrier's bytes. `map` is the address
// of a `const __grid_constant__ CUtensorMap` kernel parameter (or of one in global or constant memory).
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, std::uint64_t* bar, std::int32_t row,
                                            std::int32_t col) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(col), "r"(row), "r"(shared_address(bar))
      : "memory");
}
// Fetches the box tma_load_2d(.., row, col) would load into the L2 alone (no shared memory, no barrier): a
// hint, so that a later load of it reads the L2 rather than DRAM. Coordinates as tma_load_2d's.
__device__ __forceinline__ void tma_prefetch_2d(const CUtensorMap* map, std::int32_t row, std::int32_t col) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(col), "r"(row)
               : "memory");
}
// Fetches the tensor map into the cache ahead of its first use (optional).
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}
// A plain bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) global -> shared.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, std::uint32_t bytes,
                                                    std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}

// ---- Thread-block clusters (a launch with cudaLaunchAttributeClusterDimension): a cluster's blocks run at once on
// one GPC, and a copy or an mbarrier arrival may reach a peer block's shared memory at the same offset as its own.

// This block's rank in its cluster (0 .. cluster size - 1).
__device__ __forceinline__ std::uint32_t cluster_rank() {
  std::uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// Every thread of every block of the cluster arrives, then waits for all the others (release, acquire): after each
// block has initialised its barriers (before a peer's copy or arrival may reach them), and before a block exits
// while a peer's copies or arrivals may still reach its shared memory.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// tma_load_2d's box, landing at dst's offset in every block of the cluster whose bit (1 << rank) is set in
// cta_mask, each block's barrier at bar's offset counting the box's bytes (each expects them itself).
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, std::uint64_t* bar,
                                                      std::int32_t row, std::int32_t col, std::uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(col), "r"(row), "r"(shared_address(bar)), "h"(cta_mask)
      : "memory");
}
// One arrival on the barrier at bar's offset in block `rank` of the cluster (this block's own too), with PTX's
// default semantics (release at CTA scope), as CUTLASS's cluster barriers arrive: enough to hand a stage back once
// its readers' wgmma products have completed. A release at cluster scope is a memory barrier at each arrival
// (Nsight Compute: fc + GELU's four-block clusters stalled on it 1.4 cycles an instruction).
__device__ __forceinline__ void mbarrier_arrive_cluster(std::uint64_t* bar, std::uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(shared_address(bar)),
      "r"(rank)
      : "memory");
}

// Stores the box of `map` whose first element is (row, col) from shared memory at `src` (128-byte aligned; 1024 for
// the 128-byte swizzle), laid out as tma_load_2d writes that box. Elements past the matrix's edge are not written.
// The writing threads make their shared-memory stores visible first (fence_proxy_async_shared, then a barrier);
// the store joins the issuing thread's bulk group: bulk_commit_group closes the group, bulk_wait_group_read<n>
// waits until at most n groups still read their shared memory (then `src` may be written again), and
// bulk_wait_group<n> until at most n groups' global writes are still pending.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, std::int32_t row,
                                             std::int32_t col) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(col), "r"(row), "r"(shared_address(src))
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  static_assert(kPending >= 0 && kPending <= 63);
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
  static_assert(kPending >= 0 && kPending <= 63);
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Orders this thread's ordinary shared-memory writes (st.shared, stmatrix) before later reads by the async
// proxy (wgmma operands, TMA stores). Each writing thread calls it, then a barrier, then the async use.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- wgmma shared-memory matrix descriptors (64 bits): start address, leading- and stride-dimension
// byte offsets (all >> 4, 14 bits each, at bits 0, 16 and 32), base offset 0 (bits 49-51: the tile is
// aligned to its swizzle's repeat) and the swizzle mode (bits 62-63).
enum class Swizzle : std::uint64_t { none = 0, bytes128 = 1, bytes64 = 2, bytes32 = 3 };

__device__ __forceinline__ std::uint64_t matrix_descriptor(const void* tile, std::uint32_t leading_bytes,
                                                           std::uint32_t stride_bytes, Swizzle swizzle) {
  const auto field = [](std::uint32_t bytes) { return std::uint64_t((bytes & 0x3FFFF) >> 4); };
  return field(shared_address(tile)) | field(leading_bytes) << 16 | field(stride_bytes) << 32 |
         std::uint64_t(swizzle) << 62;
}
// K-major bf16 tile in the 128-byte swizzle (rows of 64 elements, 1024-byte atoms of 8 rows, atoms
// consecutive), for the k16 step starting at column 16 k (k = 0..3): the step moves the start 32 bytes
// into the atom, and the hardware applies the swizzle to the resulting addresses. The leading offset is
// unused by this layout; the stride offset is the 1024 bytes from one 8-row atom to the next.
__device__ __forceinline__ std::uint64_t descriptor_k_major_sw128(const void* tile, int k) {
  return matrix_descriptor(static_cast<const char*>(tile) + 32 * k, 16, 1024, Swizzle::bytes128);
}
// K-major bf16 tile with no swizzle, for the k16 step starting at column 16 k: the tile is made of 8 x 8
// core matrices (8 rows of 16 contiguous bytes, 128 bytes each); `k_core_bytes` apart along K (the leading
// offset) and `row_core_bytes` apart from one 8-row group to the next (the stride offset).
__device__ __forceinline__ std::uint64_t descriptor_k_major_plain(const void* tile, int k, std::uint32_t k_core_bytes,
                                                                  std::uint32_t row_core_bytes) {
  return matrix_descriptor(static_cast<const char*>(tile) + 2 * k * k_core_bytes, k_core_bytes, row_core_bytes,
                           Swizzle::none);
}

// MN-major 16-bit tile in the 128-byte swizzle (the transposed operand, imm-trans 1), for the k16 step starting
// at K row 16 k: each K row holds 64 consecutive M or N elements (128 bytes), 8 K rows form a 1024-byte atom
// (chunk c of K row r at chunk c ^ (r % 8)), what a TMA load with TileSwizzle::bytes128 writes from a
// row-major K x 64 matrix. The step starts 2 atoms (16 K rows, 2048 bytes) further per k; the stride offset
// is the 1024 bytes from one 8-row atom to the next along K; the leading offset `mn_block_bytes` is the
// distance between the tiles of consecutive 64-element MN blocks (PTX ISA, the matrix descriptor's table for
// MN-major swizzled layouts; CUTLASS's make_gmma_desc agrees). It is unused where M or N is 64: pass
// kSingleMnBlock there. No default, so that a 128-wide caller cannot leave it out.
inline constexpr std::uint32_t kSingleMnBlock = 1024;
__device__ __forceinline__ std::uint64_t descriptor_mn_major_sw128(const void* tile, int k,
                                                                   std::uint32_t mn_block_bytes) {
  return matrix_descriptor(static_cast<const char*>(tile) + 2048 * k, mn_block_bytes, 1024, Swizzle::bytes128);
}

// ---- wgmma: issued by all 128 threads of a warp group (4 consecutive warps, the first a multiple of 4).
// wgmma_fence before the first wgmma and whenever the accumulators or A registers were touched by other
// instructions; commit_group closes the wgmmas issued since the last commit into one group;
// wait_group<n> blocks until at most n groups are still running, after which their accumulators may be
// read. fence_accumulators keeps the compiler from moving accumulator accesses across these points.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(kPending >= 0 && kPending <= 7);
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
template <int kCount>
__device__ __forceinline__ void fence_accumulators(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (+)= A B for a 64 x N x 16 step, 16-bit inputs (bf16: wgmma_bf16_*, fp16: wgmma_f16_*), fp32
// accumulators, N = 2 x the accumulator count (64 or 128). A (64 x 16) and B come as descriptors (_ss), or A
// as the register fragment described at the top (_rs). B is K-major (N x 16, i.e. B transposed: the product
// is A B^T for row-major A and B) and A is K-major (64 x 16) unless kTransB / kTransA (PTX imm-trans-b /
// imm-trans-a, default 0) is 1: that shared-memory operand is then read MN-major (descriptor_mn_major_sw128:
// A stored [K][M], B stored [K][N]); the register A of _rs has no such choice. accumulate == 0 overwrites d
// instead of adding.
#define RB_WGMMA_D8(d, i)                                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define RB_WGMMA_D32_AT(d, i) RB_WGMMA_D8(d, i), RB_WGMMA_D8(d, i + 8), RB_WGMMA_D8(d, i + 16), RB_WGMMA_D8(d, i + 24)
#define RB_WGMMA_D32(d) RB_WGMMA_D32_AT(d, 0)
#define RB_WGMMA_D64(d) RB_WGMMA_D32_AT(d, 0), RB_WGMMA_D32_AT(d, 32)
#define RB_WGMMA_LIST32 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19," \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define RB_WGMMA_LIST64 RB_WGMMA_LIST32 ", "\
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49," \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
// Both forms for N = 2 COUNT and the PTX input type TYPE (bf16 or f16): the accumulators are operands
// %0 .. %COUNT-1 (listed by D_LIST, bound by D_OPERANDS); I0 .. I6 are the numbers, as strings, of the
// operands after them.
#define RB_WGMMA(TYPE, N, COUNT, D_LIST, D_OPERANDS, I0, I1, I2, I3, I4, I5, I6)                               \
  template <int kTransA = 0, int kTransB = 0>                                                                  \
  __device__ __forceinline__ void wgmma_##TYPE##_ss(float(&d)[COUNT], std::uint64_t a, std::uint64_t b,        \
                                                    std::uint32_t accumulate) {                                \
    static_assert((kTransA == 0 || kTransA == 1) && (kTransB == 0 || kTransB == 1));                           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I2 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N           \
                 "k16.f32." #TYPE "." #TYPE " {" D_LIST "}, %" I0 ", %" I1 ", p, 1, 1, %" I3 ", %" I4 ";\n}\n"    \
                 : D_OPERANDS(d)                                                                              \
                 : "l"(a), "l"(b), "r"(accumulate), "n"(kTransA), "n"(kTransB));                             \
  }                                                                                                            \
  template <int kTransB = 0>                                                                                   \
  __device__ __forceinline__ void wgmma_##TYPE##_rs(float(&d)[COUNT], const std::uint32_t(&a)[4],              \
                                                    std::uint64_t b, std::uint32_t accumulate) {               \
    static_assert(kTransB == 0 || kTransB == 1);                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I5 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N           \
                 "k16.f32." #TYPE "." #TYPE " {" D_LIST "}, {%" I0 ", %" I1 ", %" I2 ", %" I3 "}, %" I4             \
                 ", p, 1, 1, %" I6 ";\n}\n"                                                                     \
                 : D_OPERANDS(d)                                                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB));        \
  }

RB_WGMMA(bf16, 64, 32, RB_WGMMA_LIST32, RB_WGMMA_D32, "32", "33", "34", "35", "36", "37", "38")
RB_WGMMA(bf16, 128, 64, RB_WGMMA_LIST64, RB_WGMMA_D64, "64", "65", "66", "67", "68", "69", "70")
RB_WGMMA(f16, 64, 32, RB_WGMMA_LIST32, RB_WGMMA_D32, "32", "33", "34", "35", "36", "37", "38")
RB_WGMMA(f16, 128, 64, RB_WGMMA_LIST64, RB_WGMMA_D64, "64", "65", "66", "67", "68", "69", "70")

#undef RB_WGMMA
#undef RB_WGMMA_LIST64
#undef RB_WGMMA_LIST32
#undef RB_WGMMA_D64
#undef RB_WGMMA_D32
#undef RB_WGMMA_D32_AT
#undef RB_WGMMA_D8

// The same products named by the element type, __nv_bfloat16 or __half, for kernels templated on it.
template <typename Elem, int kTransposeB = 0, int kCount>
__device__ __forceinline__ void wgmma_ss(float (&d)[kCount], std::uint64_t a, std::uint64_t b, std::uint32_t accumulate) {
  static_assert(std::is_same_v<Elem, __nv_bfloat16> || std::is_same_v<Elem, __half>);
  if constexpr (std::is_same_v<Elem, __half>)
    wgmma_f16_ss<0, kTransposeB>(d, a, b, accumulate);
  else
    wgmma_bf16_ss<0, kTransposeB>(d, a, b, accumulate);
}
template <typename Elem, int kTransposeB = 0, int kCount>
__device__ __forceinline__ void wgmma_rs(float (&d)[kCount], const std::uint32_t (&a)[4], std::uint64_t b,
                                         std::uint32_t accumulate) {
  static_assert(std::is_same_v<Elem, __nv_bfloat16> || std::is_same_v<Elem, __half>);
  if constexpr (std::is_same_v<Elem, __half>)
    wgmma_f16_rs<kTransposeB>(d, a, b, accumulate);
  else
    wgmma_bf16_rs<kTransposeB>(d, a, b, accumulate);
}

// ---- Register reallocation between warp groups. A kernel with a register cap at entry
// (__launch_bounds__(threads, 1)) may move registers from producer warp groups (dec) to consumer warp
// groups (inc); every thread of the warp group executes it, each role one branch of a single if/else.
// kRegs: 24 to 256, a multiple of 8. inc blocks until enough registers have been released.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0);
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0);
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace roofbench::hopper
