// The lab's attention tables (attention_versions.hpp). The "kernel" facts are the names the lab has always
// given these versions, so results of one version compare across runs; a keeper row's is the keeper's name as
// the rungs' facts give it.
#include "attention_versions.hpp"

#include <string>

#include "version_table.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

template <typename Elem>
void keeper_forward(Elem* out, float* lse, const Elem* qkv, const float* qkv_bias, RopeTable rope,
                    const AttentionShape& s, cudaStream_t stream) {
  fused_attention_forward(out, lse, qkv, qkv_bias, rope, s, stream);
}

template <typename Elem>
void keeper_backward(Elem* dqkv, float* delta, const Elem* dout, const Elem* out, const float* lse, const Elem* qkv,
                     const float* qkv_bias, RopeTable rope, const AttentionShape& s, cudaStream_t stream) {
  fused_attention_backward(dqkv, delta, dout, out, lse, qkv, qkv_bias, rope, s, stream);
}

// A row running the backward walk of kVersion (configure_backward_walk) on the keeper's forward, v29's (row v29 runs
// v26's walk).
template <int kVersion>
constexpr AttentionVersion<bf16> walk_on_keeper_forward(const char* name, const char* kernel) {
  return {name,
          kernel,
          false,
          configure_in_order<walk_configure<kVersion>, fused_attention_sm90a_forward_configure,
                             fused_attention_configure>,
          keeper_forward<bf16>,
          walk_backward<kVersion>};
}

const AttentionVersion<float> kFp32Versions[] = {
    {"v1", "v1 (SIMT fp32)", false, attention_v1_configure, attention_v1_forward, attention_v1_backward},
    {"v8", fp32_attention_keeper_name(), true, fused_attention_configure, keeper_forward<float>,
     keeper_backward<float>},
};

// v44, the keeper, is refused where its kernels would be v9's (no sm_90a path), so that its row always times v44.
// Rows v16 to v18 and v21 run v15's forward where a batch's heads number at least four per block of its grid and
// v9's below, as the keeper did until v22; rows v22 and v25 run v22's forward by the same rule, as the keeper did
// until v26; rows v26 and v27 run v26's forward by the same rule, as the keeper did until v29.
const AttentionVersion<bf16> kBf16Versions[] = {
    {"v7", "v7 (v6, forward softmax online, ex2.approx)", false, attention_v7_configure, attention_v7_forward,
     attention_v7_backward},
    {"v9", "v9 (v7, backward persistent, the next head fetched ahead)", false, fused_attention_v9_configure,
     fused_attention_v9_forward, fused_attention_v9_backward},
    {"v10", "v10 (TMA + wgmma forward, sm_90a; v9's backward)", false, attention_v10_configure,
     attention_v10_forward, fused_attention_v9_backward},
    {"v11", "v11 (v10 persistent: producer warp group, two TMA head stages; v9's backward)", false,
     attention_v11_configure, attention_v11_forward, fused_attention_v9_backward},
    {"v12", "v12 (v11's forward; persistent TMA + wgmma backward, sm_90a)", false,
     configure_in_order<attention_v12_backward_configure, attention_v11_configure>, attention_v11_forward,
     attention_v12_backward},
    {"v13", "v13 (v9's forward; v12's backward, sm_90a)", false,
     configure_in_order<attention_v12_backward_configure, fused_attention_v9_configure>, fused_attention_v9_forward,
     attention_v12_backward},
    {"v14", "v14 (v9's forward; v12's backward steps, a head a warp group, two blocks an SM, sm_90a)", false,
     configure_in_order<walk_configure<14>, fused_attention_v9_configure>, fused_attention_v9_forward,
     walk_backward<14>},
    {"v15", "v15 (TMA + wgmma forward, a head a warp group, three blocks an SM, sm_90a; v12's backward)", false,
     configure_in_order<attention_v15_forward_configure, attention_v12_backward_configure>, attention_v15_forward,
     attention_v12_backward},
    {"v16", "v16 (v14's backward; v15's forward from 4 heads a resident block, else v9's; sm_90a)", false,
     configure_in_order<walk_configure<14>, attention_v15_forward_configure, fused_attention_v9_configure>,
     attention_v15_or_v9_forward, walk_backward<14>},
    {"v17", "v17 (v14's backward loading the next head's v and dout early; v15's forward from 4 heads a resident "
            "block, else v9's; sm_90a)",
     false,
     configure_in_order<walk_configure<17>, attention_v15_forward_configure, fused_attention_v9_configure>,
     attention_v15_or_v9_forward, walk_backward<17>},
    {"v18", "v18 (v17's backward with the head's lse held across the box wait and the next head's lse asked of the "
            "L2; v15's forward from 4 heads a resident block, else v9's; sm_90a)",
     false,
     configure_in_order<walk_configure<18>, attention_v15_forward_configure, fused_attention_v9_configure>,
     attention_v15_or_v9_forward, walk_backward<18>},
    {"v19", "v19 (v15's forward with the next head's q and k loaded during half 1 and v landing during half 0's "
            "scores, sm_90a; v17's backward)",
     false, configure_in_order<attention_v19_forward_configure, walk_configure<17>>,
     attention_v19_forward, walk_backward<17>},
    {"v20", "v20 (v19's forward; v18's backward; sm_90a)", false,
     configure_in_order<attention_v19_forward_configure, walk_configure<18>>, attention_v19_forward, walk_backward<18>},
    {"v21", "v21 (v15's forward from 4 heads a resident block, else v9's; v18's backward with dq's RoPE factors "
            "fetched under the dq product, sm_90a)", false,
     configure_in_order<walk_configure<21>, attention_v15_forward_configure, fused_attention_v9_configure>,
     attention_v15_or_v9_forward, walk_backward<21>},
    {"v22", "v22 (v18's kernels with the preparation's bias and RoPE factors fetched by 16-byte loads; v22's forward "
            "from 4 heads a resident block, else v9's; sm_90a)",
     false, attention_v22_configure, attention_v22_forward, attention_v22_backward},
    {"v23", "v23 (v22 with its forward at four blocks an SM, sm_90a)", false, attention_v23_configure,
     attention_v23_forward, attention_v22_backward},
    {"v24", "v24 (v23 with the forward's bias and RoPE factors fetched once the boxes have landed, sm_90a)", false,
     attention_v24_configure, attention_v24_forward, attention_v22_backward},
    {"v25", "v25 (v22 with dq stored from the registers and the next head's q loaded with its v and dout, sm_90a)",
     false, configure_in_order<walk_configure<25>, attention_v22_configure>, attention_v22_forward,
     walk_backward<25>},
    {"v26",
     "v26 (v22's kernels without the L2 prefetch of the next head's boxes; v26's forward from 4 heads a resident "
     "block, else v9's; sm_90a)",
     false,
     configure_in_order<attention_v26_forward_configure, walk_configure<26>>, attention_v26_forward, walk_backward<26>},
    {"v27", "v27 (v26 with dk's and dq's RoPE factors asked of the L1 ahead of their loads, sm_90a)", false,
     configure_in_order<walk_configure<27>, attention_v26_forward_configure>, attention_v26_forward, walk_backward<27>},
    {"v28", "v28 (v27 with the next head's boxes asked of the L2 half a head ahead, forward and backward, sm_90a)",
     false, attention_v28_configure, attention_v28_forward, attention_v28_backward},
    walk_on_keeper_forward<26>("v29", "v29 (v26's kernels, the forward loading each head's q a head ahead; v29's "
                                      "forward from 4 heads a resident block, else v9's; sm_90a)"),
    walk_on_keeper_forward<30>("v30", "v30 (v29 with the backward loading the next head's out once query half 0 has "
                                      "read its tile, sm_90a)"),
    walk_on_keeper_forward<31>("v31", "v31 (v30 with the next head's out loaded once query half 0's dq product has "
                                      "completed, no barrier, sm_90a)"),
    walk_on_keeper_forward<32>("v32", "v32 (v29 with the backward loading each head's q a head ahead into a tile of "
                                      "its own, sm_90a)"),
    walk_on_keeper_forward<33>("v33", "v33 (v32 with both query halves' dq products issued at once, sm_90a)"),
    walk_on_keeper_forward<34>("v34", "v34 (v29 with both query halves' dq products issued at once, sm_90a)"),
    walk_on_keeper_forward<35>("v35", "v35 (v34 with key half 1's scores issued before key half 0's gradients are "
                                      "stored, sm_90a)"),
    walk_on_keeper_forward<36>("v36", "v36 (v34 with dq staged in dS^T's first tile and the next head's q loaded with "
                                      "its v and dout, sm_90a)"),
    walk_on_keeper_forward<37>("v37", "v37 (v34 with dk's and dq's RoPE factors fetched while the tensor cores compute "
                                      "dk and dq, sm_90a)"),
    walk_on_keeper_forward<38>("v38", "v38 (v37 with those factors from the RoPE table's lane-ordered copy, 16-byte "
                                      "loads, sm_90a)"),
    walk_on_keeper_forward<39>("v39", "v39 (v34 with a masked chunk's exponents dropped by a select, not branched "
                                      "around, sm_90a)"),
    walk_on_keeper_forward<40>("v40", "v40 (v38 and v39 together, sm_90a)"),
    walk_on_keeper_forward<41>("v41", "v41 (v40 with dk's RoPE factors fetched as v37's, sm_90a)"),
    walk_on_keeper_forward<42>("v42", "v42 (v38 with v39's select in key half 1 alone, sm_90a)"),
    walk_on_keeper_forward<43>("v43", "v43 (v38 with delta from the scores, out unread, sm_90a)"),
    {"v44", bf16_attention_keeper_name(true), true,
     configure_in_order<fused_attention_sm90a_forward_configure, fused_attention_configure>, keeper_forward<bf16>,
     keeper_backward<bf16>},
    walk_on_keeper_forward<45>("v45", "v45 (v44 with a head's q, k and v landing in two parts, rows 0 .. 63 half a "
                                      "head ahead, sm_90a)"),
    walk_on_keeper_forward<46>("v46", "v46 (v44 with a branch on whether a chunk is masked, no compare in the unmasked "
                                      "ones, sm_90a)"),
    walk_on_keeper_forward<47>("v47", "v47 (v45's two-part loads and v46's branch on whether a chunk is masked, "
                                      "sm_90a)"),
    walk_on_keeper_forward<48>("v48", "v48 (v46's branch on whether a chunk is masked in key half 1 alone, sm_90a)"),
    walk_on_keeper_forward<49>("v49", "v49 (v44's steps, two warp groups a block sharing a ring of three head slots, "
                                      "sm_90a)"),
    {"v50",
     "v50 (v44 with its forward's steps by three warp groups a block sharing a ring of four head slots, from 4 heads a "
     "warp group, else v9's; sm_90a)",
     false,
     configure_in_order<attention_v50_forward_configure, fused_attention_configure>, attention_v50_forward,
     keeper_backward<bf16>},
    {"v51", "v51 (v50's forward and v49's backward, sm_90a)", false,
     configure_in_order<attention_v50_forward_configure, walk_configure<49>, fused_attention_configure>,
     attention_v50_forward, walk_backward<49>},
    walk_on_keeper_forward<52>("v52", "v52 (v49 with v46's branch on whether a chunk is masked, sm_90a)"),
};

}  // namespace

std::span<const AttentionVersion<float>> fp32_attention_versions() { return kFp32Versions; }
std::span<const AttentionVersion<bf16>> bf16_attention_versions() { return kBf16Versions; }

const AttentionVersion<float>& fp32_attention_version(const std::string& name) {
  return find_version(fp32_attention_versions(), name, "lab_attention");
}
const AttentionVersion<bf16>& bf16_attention_version(const std::string& name) {
  return find_version(bf16_attention_versions(), name, "lab_attention_bf16");
}

}  // namespace roofbench::gpt::cuda::lab
