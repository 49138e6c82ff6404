// Attention kernels for the transformer plugin, with the fp64 CPU reference their gates use.
//
// Layout everywhere: Q [batch, heads, q_len, head_dim], K and V [batch, heads, kv_len, head_dim], O like Q,
// contiguous, bf16 or fp16. Causal: query i (of q_len) sees keys j <= i + (kv_len - q_len), so a decode
// query (q_len 1) sees the whole cache. Scale: 1/sqrt(head_dim).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#ifdef __CUDACC__
#define ROOFBENCH_ATTENTION_HD __host__ __device__
#else
#define ROOFBENCH_ATTENTION_HD
#endif

namespace roofbench::kernels {

enum class AttentionType { bf16, fp16 };

struct AttentionShape {
  std::int64_t batch = 1, heads = 1, q_len = 1, kv_len = 1, head_dim = 64;
  bool causal = false;
  std::int64_t q_elements() const { return batch * heads * q_len * head_dim; }
  std::int64_t kv_elements() const { return batch * heads * kv_len * head_dim; }
  // (query, key) pairs that take part: all of them, or only the unmasked ones under a causal mask.
  double visible_pairs() const;
  // 2 FLOPs per multiply-add in QK^T and in PV, over the visible pairs only.
  double flops() const { return 4.0 * double(batch * heads) * double(head_dim) * visible_pairs(); }
  // Q, K and V read once, O written once.
  double min_bytes(std::size_t element_bytes) const {
    return double(element_bytes) * double(2 * q_elements() + 2 * kv_elements());
  }
  // Of min_bytes, the reads: Q, K and V (O is the one write).
  double min_bytes_read(std::size_t element_bytes) const {
    return double(element_bytes) * double(q_elements() + 2 * kv_elements());
  }
  // Keys query `row` sees: [0, visible_keys(row)).
  ROOFBENCH_ATTENTION_HD std::int64_t visible_keys(std::int64_t row) const {
    if (!causal) return kv_len;
    const std::int64_t last = row + (kv_len - q_len);
    return last < 0 ? 0 : (last + 1 < kv_len ? last + 1 : kv_len);
  }
};

// fp64 attention of one (batch, head) pair for the listed query rows. q: [q_len, head_dim] (only the listed
// rows are read), k and v: [kv_len, head_dim]; returns rows.size() x head_dim outputs, row by row.
std::vector<double> attention_reference(const AttentionShape& shape, const double* q, const double* k,
                                        const double* v, const std::vector<std::int64_t>& rows);

// A kernel that is wrong on purpose, so tests can show that the gate catches each kind of mistake.
enum class AttentionFault {
  none,
  drop_causal_mask,    // every query sees every key
  skip_last_kv_block,  // the last block (split) of keys is never read
  no_rescale,          // the online softmax does not rescale what it accumulated when the maximum rises
};

// ---- flash-attention forward (prefill), fp32 accumulation: mma.sync m16n8k16 (v1-v3) or wgmma (v4 to v16) ----
// Requires q_len == kv_len, a multiple of 128, and head_dim 64 or 128. version: one of fused_versions().
const std::vector<std::string>& fused_versions();
// Throws std::invalid_argument for a shape or version it does not take (the message says which).
void check_fused_supports(const AttentionShape& shape, const std::string& version);
// Whether `version` is sm_90a code (TMA, wgmma, warp specialisation: v4 to v16), which runs on compute
// capability 9.0 alone and only in a build that has it.
bool fused_version_needs_sm90a(const std::string& version);
// How `version` runs, for the `kernel` fact: empty for the mma.sync versions, else "sm_90a: TMA + wgmma, warp
// specialised" and what the version adds (persistent; ping-pong). Throws std::invalid_argument for an unknown one.
std::string fused_version_form(const std::string& version);
// Empty when `version` runs on `device`, else why not. Throws std::invalid_argument for an unknown version.
std::string fused_unavailable_reason(const std::string& version, int device);
void launch_fused_attention(const std::string& version, AttentionType type, const AttentionShape& shape,
                            const void* q, const void* k, const void* v, void* o, cudaStream_t stream,
                            AttentionFault fault = AttentionFault::none);
// The blocks of an sm_90a version's kernel that an SM of the current device holds at once (what its split of
// registers and shared memory was made for); 0 for the mma.sync versions. Throws roofbench::Error where the
// version does not run.
int fused_blocks_per_sm(const std::string& version, AttentionType type, int head_dim);
// (launch_fused_attention of a version unavailable on the current device throws roofbench::Error.)

// ---- split-KV decode (flash-decoding) ----
// One query per (batch, head); the KV length is cut into splits, each thread block does one split and
// writes its partial (max, sum, unnormalised output) in fp32; the last block of a (batch, head) to finish
// combines them. head_dim 64, bf16 or fp16.
// Balanced versions (balanced_blocks_per_sm > 0) instead cut the whole cache, (batch, head) after
// (batch, head), into `blocks` equal runs of split_len keys, one per block; a run may span heads.
struct SplitKvPlan {
  int keys_in_flight = 4;    // per group of 8 lanes per step, and
  bool streaming_loads = false;  // loads that skip L1 and prefetch 256 bytes into L2, and
  int balanced_blocks_per_sm = 0;  // the blocks per SM a balanced grid is sized for, and
  bool pipelined = false;          // the next step's loads issued before this step's arithmetic, and
  int bulk_stages = 0;  // > 0: a balanced run's steps staged through that many shared-memory stages by
                        // cp.async.bulk (sm_90), not loaded into registers: the version
  int splits = 1;            // splits per (batch, head); 0 when balanced
  std::int64_t split_len = 0;  // keys per split (a multiple of the keys a block reads per step), or per run
  std::int64_t blocks = 0;     // thread blocks launched
  std::size_t workspace_bytes = 0;  // partials and per-(batch, head) arrival counters
};
// version: one of split_kv_versions().
const std::vector<std::string>& split_kv_versions();
SplitKvPlan plan_split_kv(const AttentionShape& shape, int sm_count, const std::string& version);
// The workspace's counters must be zero before the first launch (zero_split_kv_workspace); every launch
// leaves them zero again, so launches can be replayed in a CUDA graph.
void zero_split_kv_workspace(const SplitKvPlan& plan, const AttentionShape& shape, void* workspace,
                             cudaStream_t stream);
void launch_split_kv_decode(AttentionType type, const AttentionShape& shape, const SplitKvPlan& plan, const void* q,
                            const void* k, const void* v, void* o, void* workspace, cudaStream_t stream,
                            AttentionFault fault = AttentionFault::none);

// ---- the naive path's softmax: scores (fp32, [rows, kv_len]) -> probabilities in the input type ----
// p = softmax(scale * s) over each row's visible keys (zero beyond them); rows are (batch, head, query).
void launch_masked_softmax(AttentionType type, const AttentionShape& shape, const float* scores, void* probabilities,
                           float scale, cudaStream_t stream, AttentionFault fault = AttentionFault::none);

}  // namespace roofbench::kernels
