// Flash-attention forward on tensor cores (mma.sync m16n8k16, fp32 accumulation, online softmax; no
// T x T buffer), kept as a small lab of versions:
//   v1  64 queries per block (4 warps x 16 rows), one K/V stage: load, wait, compute, repeat.
//   v2  128 queries per block (8 warps), K/V double-buffered with cp.async so the next tile loads while
//       this one is computed, Q held in registers, causal blocks issued heaviest first.
//   v3  v2 with 32 query rows per warp (4 warps, 128 queries): each K/V fragment read from shared memory
//       feeds two MMAs, halving v2's shared-memory reads per FLOP, which bound v2 (8 warps x a whole K and
//       V tile read per 16 rows).
// Shared tiles are row-major with each row's 16-byte chunks XOR-swizzled by (row % 8), so the eight rows
// one ldmatrix reads land in different banks.
//
//   v4  FlashAttention-3's form on Hopper's own instructions (TMA, wgmma, warp specialisation, setmaxnreg):
//       sm_90a code, in fused_attention_sm90a.cu, run on compute capability 9.0 alone.
//   v5  v4 with deeper K/V rings, and head dim 128 on 64-key tiles so that its softmax overlaps P V too.
// v3 is the fastest mma.sync version at every prefill shape (B2 T4096 d64: 220 TFLOP/s against v2's 202 on an H200; the
// table is in plugins/transformer/README.md). Nsight Compute on v3 at T1024: 228 registers, 2 blocks (8
// warps) per SM; the MUFU exp2 of the softmax costs about what the MMAs of a d64 tile do, and mma.sync
// cannot overlap them the way Hopper's wgmma does (FA3).
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "attention_common.cuh"
#include "fused_attention_sm90a.hpp"
#include "roofbench/mma_sync.cuh"
#include "roofbench/cuda.hpp"

namespace roofbench::kernels {
namespace {
using namespace attention_detail;
using namespace mma_sync;

// Element (row, col) of a swizzled tile whose rows hold kD elements; col is a multiple of 8.
template <int kD>
__device__ __forceinline__ int swizzled(int row, int col) {
  return row * kD + (((col / 8) ^ (row % 8)) * 8);
}

// Copies rows [0, kRows) of a contiguous row-major [*, kD] global tile into a swizzled shared tile.
template <int kRows, int kD, int kThreads, typename T>
__device__ __forceinline__ void load_tile(T* shared, const T* global) {
  constexpr int kChunksPerRow = kD / 8, kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0);
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int chunk = threadIdx.x + i * kThreads;
    const int row = chunk / kChunksPerRow, col = (chunk % kChunksPerRow) * 8;
    cp_async16(shared + swizzled<kD>(row, col), global + row * kD + col);
  }
}

// One version's shape: warps per block, 16-row m-tiles per warp (K and V fragments read from shared memory
// once serve every m-tile of the warp), keys per K/V tile, double-buffered K/V, Q fragments in registers.
template <int kWarps_, int kMTiles_, int kBlockN_, bool kPipelined_, bool kQInRegisters_>
struct FusedConfig {
  static constexpr int kWarps = kWarps_, kMTiles = kMTiles_, kBlockN = kBlockN_;
  static constexpr bool kPipelined = kPipelined_, kQInRegisters = kQInRegisters_;
  static constexpr int kThreads = kWarps * 32, kBlockM = 16 * kMTiles * kWarps, kStages = kPipelined ? 2 : 1;
  template <int kD, typename T>
  static constexpr std::size_t shared_bytes() {
    return sizeof(T) * kD * (kBlockM + 2 * kStages * kBlockN);
  }
};

template <typename T, int kD, typename Cfg, bool kCausal, AttentionFault kFault>
__global__ __launch_bounds__(Cfg::kThreads) void flash_forward_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                                     const T* __restrict__ v, T* __restrict__ o,
                                                                     int seq_len, float scale_log2) {
  constexpr int kThreads = Cfg::kThreads, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kM = Cfg::kMTiles;
  constexpr bool kPipelined = Cfg::kPipelined, kQInRegisters = Cfg::kQInRegisters;
  constexpr int kKSteps = kD / 16;       // k-steps of QK^T
  constexpr int kSTiles = kBlockN / 8;   // 8-key column tiles of S
  constexpr int kOTiles = kD / 8;        // 8-wide column tiles of O
  extern __shared__ uint4 shared_raw[];
  T* sq = reinterpret_cast<T*>(shared_raw);
  T* sk = sq + kBlockM * kD;
  T* sv = sk + Cfg::kStages * kBlockN * kD;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  // Causal blocks near the end of the sequence have the most keys: issue them first.
  const int m_block = kCausal && kPipelined ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const std::int64_t head_offset = std::int64_t(blockIdx.y) * seq_len * kD;
  const T* q_tile = q + head_offset + std::int64_t(m_block) * kBlockM * kD;
  const T* k_head = k + head_offset;
  const T* v_head = v + head_offset;

  int kv_blocks = seq_len / kBlockN;
  if (kCausal) kv_blocks = min(kv_blocks, (m_block + 1) * kBlockM / kBlockN);
  if (kFault == AttentionFault::skip_last_kv_block) kv_blocks -= 1;

  load_tile<kBlockM, kD, kThreads>(sq, q_tile);
  load_tile<kBlockN, kD, kThreads>(sk, k_head);
  load_tile<kBlockN, kD, kThreads>(sv, v_head);
  cp_async_commit();

  unsigned q_frag[kQInRegisters ? kM : 1][kQInRegisters ? kKSteps : 1][4];
  float o_acc[kM][kOTiles][4] = {};
  float row_max[kM][2], row_sum[kM][2] = {};
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) row_max[mt][0] = row_max[mt][1] = -INFINITY;
  const int warp_row = warp * 16 * kM;
  auto q_address = [&](int mt, int kk) {
    return sq + swizzled<kD>(warp_row + mt * 16 + lane % 16, kk * 16 + (lane / 16) * 8);
  };

  for (int j = 0; j < kv_blocks; ++j) {
    const int stage = kPipelined ? j % 2 : 0;
    if (kPipelined && j + 1 < kv_blocks) {
      const int next = (j + 1) % 2;
      load_tile<kBlockN, kD, kThreads>(sk + next * kBlockN * kD, k_head + std::int64_t(j + 1) * kBlockN * kD);
      load_tile<kBlockN, kD, kThreads>(sv + next * kBlockN * kD, v_head + std::int64_t(j + 1) * kBlockN * kD);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* k_tile = sk + stage * kBlockN * kD;
    const T* v_tile = sv + stage * kBlockN * kD;

    if constexpr (kQInRegisters) {
      if (j == 0) {
#pragma unroll
        for (int mt = 0; mt < kM; ++mt)
#pragma unroll
          for (int kk = 0; kk < kKSteps; ++kk) ldmatrix_x4(q_frag[mt][kk], q_address(mt, kk));
      }
    }

    // S = Q K^T for this warp's rows and the tile's keys.
    float s[kM][kSTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      unsigned a[kM][4];
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[mt][i] = q_frag[mt][kk][i];
        } else {
          ldmatrix_x4(a[mt], q_address(mt, kk));
        }
      }
#pragma unroll
      for (int np = 0; np < kSTiles / 2; ++np) {
        unsigned b[4];
        ldmatrix_x4(b, k_tile + swizzled<kD>(np * 16 + lane % 8 + (lane / 16) * 8, kk * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          mma16816<T>(s[mt][2 * np], a[mt], b[0], b[1]);
          mma16816<T>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }

#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
      // Causal mask where the tile crosses the diagonal.
      const int query0 = m_block * kBlockM + warp_row + mt * 16 + g;
      if (kCausal && kFault != AttentionFault::drop_causal_mask && (j + 1) * kBlockN - 1 > m_block * kBlockM) {
#pragma unroll
        for (int n = 0; n < kSTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = j * kBlockN + n * 8 + 2 * t + (e & 1);
            if (key > query0 + (e >= 2 ? 8 : 0)) s[mt][n][e] = -INFINITY;
          }
      }

      // Online softmax: rows g (elements 0, 1) and g + 8 (elements 2, 3); a row spans a quad's 4 lanes.
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = row_max[mt][r];
#pragma unroll
        for (int n = 0; n < kSTiles; ++n)
          tile_max = fmaxf(tile_max, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]) * scale_log2);
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float rescale = exp2f(row_max[mt][r] - tile_max);  // 0 on the first tile (-inf - finite)
        row_max[mt][r] = tile_max;
        float tile_sum = 0;
#pragma unroll
        for (int n = 0; n < kSTiles; ++n)
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            s[mt][n][e] = exp2f(fmaf(s[mt][n][e], scale_log2, -tile_max));
            tile_sum += s[mt][n][e];
          }
        if (kFault == AttentionFault::no_rescale && j > 0) {
          row_sum[mt][r] += tile_sum;
        } else {
          row_sum[mt][r] = row_sum[mt][r] * rescale + tile_sum;
#pragma unroll
          for (int n = 0; n < kOTiles; ++n) o_acc[mt][n][2 * r] *= rescale, o_acc[mt][n][2 * r + 1] *= rescale;
        }
      }
    }

    // O += P V: S's accumulator layout is the A operand's layout, two 8-key tiles per 16-key step.
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      unsigned p[kM][4];
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        p[mt][0] = pack2<T>(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        p[mt][1] = pack2<T>(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        p[mt][2] = pack2<T>(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        p[mt][3] = pack2<T>(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kOTiles / 2; ++dp) {
        unsigned b[4];
        ldmatrix_x4_trans(b, v_tile + swizzled<kD>(ks * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 16 + (lane / 16) * 8));
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          mma16816<T>(o_acc[mt][2 * dp], p[mt], b[0], b[1]);
          mma16816<T>(o_acc[mt][2 * dp + 1], p[mt], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
    if (!kPipelined && j + 1 < kv_blocks) {
      load_tile<kBlockN, kD, kThreads>(sk, k_head + std::int64_t(j + 1) * kBlockN * kD);
      load_tile<kBlockN, kD, kThreads>(sv, v_head + std::int64_t(j + 1) * kBlockN * kD);
      cp_async_commit();
    }
  }

#pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
    T* o_rows = o + head_offset + (std::int64_t(m_block) * kBlockM + warp_row + mt * 16) * kD;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = row_sum[mt][r];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      const float inverse = 1.0f / total;
      T* row = o_rows + (g + 8 * r) * kD;
#pragma unroll
      for (int n = 0; n < kOTiles; ++n)
        *reinterpret_cast<unsigned*>(row + n * 8 + 2 * t) =
            pack2<T>(o_acc[mt][n][2 * r] * inverse, o_acc[mt][n][2 * r + 1] * inverse);
    }
  }
}

// The lab. v3 keeps its K/V tiles at 32 keys for head dim 128, where 2 m-tiles of O already take 128
// registers per thread.
using V1 = FusedConfig<4, 1, 64, false, false>;
using V2 = FusedConfig<8, 1, 64, true, true>;
using V3d64 = FusedConfig<4, 2, 64, true, true>;
using V3d128 = FusedConfig<4, 2, 32, true, false>;

struct FusedVersion {
  const char* name;
  int block_m, block_n;  // what the sequence length must be a multiple of (v1-v3: their tiles)
};
constexpr FusedVersion kVersions[] = {{"v1", V1::kBlockM, V1::kBlockN},
                                      {"v2", V2::kBlockM, V2::kBlockN},
                                      {"v3", V3d64::kBlockM, V3d64::kBlockN},
                                      {"v4", 128, 128},   // fused_attention_sm90a.cu
                                      {"v5", 128, 128},
                                      {"v6", 128, 128},
                                      {"v7", 128, 128},
                                      {"v8", 128, 128},
                                      {"v9", 128, 128},
                                      {"v10", 128, 128},
                                      {"v11", 128, 128},
                                      {"v12", 128, 128},
                                      {"v13", 128, 128},
                                      {"v14", 128, 128},
                                      {"v15", 128, 128},
                                      {"v16", 128, 128}};
static_assert(V3d64::kBlockM == V3d128::kBlockM && V3d128::kBlockN <= V3d64::kBlockN);

const FusedVersion& find_version(const std::string& name) {
  for (const FusedVersion& v : kVersions)
    if (name == v.name) return v;
  throw std::invalid_argument("fused attention: no version '" + name + "'");
}

template <typename T, int kD, typename Cfg, bool kCausal, AttentionFault kFault>
void launch_instance(const AttentionShape& shape, const T* q, const T* k, const T* v, T* o, cudaStream_t stream) {
  constexpr std::size_t kShared = Cfg::template shared_bytes<kD, T>();
  auto kernel = flash_forward_kernel<T, kD, Cfg, kCausal, kFault>;
  roofbench::cuda::allow_dynamic_shared_memory(kernel, kShared);
  const dim3 grid(unsigned(shape.q_len / Cfg::kBlockM), unsigned(shape.batch * shape.heads));
  const float scale_log2 = kLog2e / std::sqrt(float(kD));
  kernel<<<grid, Cfg::kThreads, kShared, stream>>>(q, k, v, o, int(shape.q_len), scale_log2);
}

template <typename T, int kD, typename Cfg>
void launch_with_mask(const AttentionShape& shape, const T* q, const T* k, const T* v, T* o, cudaStream_t stream,
                      AttentionFault fault) {
  auto go = [&]<bool kCausal, AttentionFault kFault>() {
    launch_instance<T, kD, Cfg, kCausal, kFault>(shape, q, k, v, o, stream);
  };
  const bool causal = shape.causal;
  switch (fault) {
    case AttentionFault::none:
      causal ? go.template operator()<true, AttentionFault::none>() : go.template operator()<false, AttentionFault::none>();
      break;
    case AttentionFault::drop_causal_mask:
      go.template operator()<true, AttentionFault::drop_causal_mask>();
      break;
    case AttentionFault::skip_last_kv_block:
      causal ? go.template operator()<true, AttentionFault::skip_last_kv_block>()
             : go.template operator()<false, AttentionFault::skip_last_kv_block>();
      break;
    case AttentionFault::no_rescale:
      causal ? go.template operator()<true, AttentionFault::no_rescale>()
             : go.template operator()<false, AttentionFault::no_rescale>();
      break;
  }
}

}  // namespace

const std::vector<std::string>& fused_versions() { return attention_detail::version_names<kVersions>(); }

void check_fused_supports(const AttentionShape& shape, const std::string& version) {
  const FusedVersion& v = find_version(version);
  if (shape.q_len != shape.kv_len) throw std::invalid_argument("fused attention: needs q_len == kv_len (prefill)");
  if (shape.q_len % v.block_m != 0 || shape.kv_len % v.block_n != 0)
    throw std::invalid_argument("fused attention " + version + ": sequence length must be a multiple of " +
                                std::to_string(v.block_m));
  if (shape.head_dim != 64 && shape.head_dim != 128)
    throw std::invalid_argument("fused attention: head_dim must be 64 or 128");
}

bool fused_version_needs_sm90a(const std::string& version) { return sm90a::is_sm90a_version(version); }

std::string fused_version_form(const std::string& version) {
  find_version(version);
  if (!sm90a::is_sm90a_version(version)) return "";
  const sm90a::Form f = sm90a::form_of(version);
  std::string form = "sm_90a: TMA + wgmma, warp specialised";
  if (f.persistent) form += ", persistent (one block an SM)";
  if (f.head_major) form += ", items head by head";
  if (f.ping_pong) form += ", its consumer groups taking turns on the tensor cores";
  if (f.rescale_under_scores) form += ", O rescaled under the next scores' product";
  if (f.raw_maxima) form += ", row maxima of the raw scores";
  if (f.skip_unit_rescale) form += ", unit rescales skipped";
  if (f.store_under_scores) form += ", O stored under the next item's first scores";
  return form;
}

std::string fused_unavailable_reason(const std::string& version, int device) {
  find_version(version);
  return sm90a::is_sm90a_version(version) ? sm90a::fused_sm90a_unavailable(version, device) : "";
}

int fused_blocks_per_sm(const std::string& version, AttentionType type, int head_dim) {
  find_version(version);
  return sm90a::is_sm90a_version(version) ? sm90a::fused_sm90a_blocks_per_sm(version, type, head_dim) : 0;
}

void launch_fused_attention(const std::string& version, AttentionType type, const AttentionShape& shape,
                            const void* q, const void* k, const void* v, void* o, cudaStream_t stream,
                            AttentionFault fault) {
  check_fused_supports(shape, version);
  const FusedVersion& chosen = find_version(version);
  if (sm90a::is_sm90a_version(version)) {
    sm90a::launch_fused_sm90a(version, type, shape, q, k, v, o, stream, fault);
    return;
  }
  dispatch_type(type, [&]<typename T>() {
    const auto* qt = static_cast<const T*>(q);
    const auto* kt = static_cast<const T*>(k);
    const auto* vt = static_cast<const T*>(v);
    auto* ot = static_cast<T*>(o);
    const bool d64 = shape.head_dim == 64;
    const std::string name = chosen.name;
    if (name == "v1") {
      d64 ? launch_with_mask<T, 64, V1>(shape, qt, kt, vt, ot, stream, fault)
          : launch_with_mask<T, 128, V1>(shape, qt, kt, vt, ot, stream, fault);
    } else if (name == "v2") {
      d64 ? launch_with_mask<T, 64, V2>(shape, qt, kt, vt, ot, stream, fault)
          : launch_with_mask<T, 128, V2>(shape, qt, kt, vt, ot, stream, fault);
    } else {
      d64 ? launch_with_mask<T, 64, V3d64>(shape, qt, kt, vt, ot, stream, fault)
          : launch_with_mask<T, 128, V3d128>(shape, qt, kt, vt, ot, stream, fault);
    }
  });
  ROOFBENCH_CUDA(cudaGetLastError());
}

}  // namespace roofbench::kernels
