// Tests of the transformer plugin. The first group needs no GPU (shapes, work counts, the gate's sampling,
// the case list); the second drives every implementation through setup, poisoned outputs, run and the
// gate on a CUDA device, and shows that kernels wrong on purpose (no causal mask, last KV block skipped,
// softmax not rescaled) fail that same gate.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_gate.hpp"
#include "cases.hpp"
#include "gemv.hpp"
#include "roofbench/case_support/cuda_test_context.hpp"
#include "roofbench/case_support/input_copies.hpp"

namespace roofbench::transformer {
namespace {

using kernels::AttentionFault;
using kernels::AttentionShape;
using kernels::AttentionType;
using case_support::testing::CudaTestContext;
using case_support::testing::gate_after_setup;
using case_support::testing::gpu_present;

// The linear case's impl name ("gemv_v1" ...) of each GEMV version that `keep` takes, in gemv_versions()'s order.
std::vector<std::string> gemv_impls(bool (*keep)(const std::string& version)) {
  std::vector<std::string> impls;
  for (const std::string& version : gemv_versions())
    if (keep(version)) impls.push_back("gemv_" + version);
  return impls;
}
bool any_gemv(const std::string&) { return true; }
bool needs_sm90(const std::string& version) { return !gemv_sm90_feature(version).empty(); }
// v6 is v2 launched with PDL, v2's arithmetic and not v1's: every other version that overlaps gives v1's bits.
bool gives_v1s_bits(const std::string& version) { return version == "v1" || (gemv_launches_overlap(version) && version != "v6"); }
bool v1_or_overlapping(const std::string& version) { return version == "v1" || gemv_launches_overlap(version); }

// ---- CPU only ----

TEST(TransformerShapes, PrefillShapeParses) {
  const AttentionShape s = parse_prefill_shape("8x12x1024x64", true);
  EXPECT_EQ(s.batch, 8);
  EXPECT_EQ(s.heads, 12);
  EXPECT_EQ(s.q_len, 1024);
  EXPECT_EQ(s.kv_len, 1024);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_TRUE(s.causal);
  for (const char* bad : {"8x12x1024", "8x12x1024x64x1", "axbxcxd", "0x12x1024x64"})
    EXPECT_THROW(parse_prefill_shape(bad, false), Error) << bad;
}

TEST(TransformerWork, PrefillCountsUnmaskedFlopsAndEachTensorOnce) {
  const AttentionShape causal = parse_prefill_shape("8x12x1024x64", true);
  const Work w = make_prefill_attention("naive", AttentionType::bf16, causal)->work();
  EXPECT_DOUBLE_EQ(w.flops, 4.0 * 96 * 64 * (1024.0 * 1025 / 2));
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * 4 * 96 * 1024 * 64);  // Q, K, V, O in bf16
  EXPECT_DOUBLE_EQ(w.bytes_read, 2.0 * 3 * 96 * 1024 * 64);  // Q, K, V
  EXPECT_DOUBLE_EQ(w.items, 8192);
  EXPECT_EQ(w.item_name, "tokens");
  EXPECT_FALSE(w.read_dominated);
  const Work full = make_prefill_attention("fused", AttentionType::fp16, parse_prefill_shape("8x12x1024x64", false))->work();
  EXPECT_DOUBLE_EQ(full.flops, 4.0 * 96 * 64 * 1024 * 1024);
}

TEST(TransformerWork, DecodeReadsTheKvCacheAndIsReadDominated) {
  const AttentionShape decode{.batch = 64, .heads = 12, .q_len = 1, .kv_len = 1024, .head_dim = 64, .causal = true};
  const Work w = make_decode_attention("split_kv", decode)->work();
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * (2 * 64 * 12 * 1024 * 64 + 2 * 64 * 12 * 64));
  EXPECT_DOUBLE_EQ(w.flops, 4.0 * 64 * 12 * 1024 * 64);
  EXPECT_NEAR(w.flops / w.bytes, 1.0, 0.01);  // ~1 FLOP per byte whatever the batch
  EXPECT_DOUBLE_EQ(w.items, 64);
  EXPECT_DOUBLE_EQ(w.bytes_read, w.bytes - 2.0 * 64 * 12 * 64);  // all but the one output row per head
  EXPECT_TRUE(w.read_dominated);
}

TEST(TransformerWork, LinearIsAWeightReadAtOneTokenAndComputeAtMany) {
  const Work one = make_linear(768, 3072, 1)->work();
  EXPECT_DOUBLE_EQ(one.flops, 2.0 * 768 * 3072);
  EXPECT_DOUBLE_EQ(one.bytes, 2.0 * (768 * 3072 + 768 + 3072));
  EXPECT_DOUBLE_EQ(one.bytes_read, 2.0 * (768 * 3072 + 768));  // the weight and x; y is written
  EXPECT_TRUE(one.read_dominated);
  const Work many = make_linear(768, 3072, 8192)->work();
  EXPECT_DOUBLE_EQ(many.flops, 2.0 * 8192 * 768 * 3072);
  EXPECT_FALSE(many.read_dominated);
  EXPECT_GT(many.flops / many.bytes, 206);  // past the H200's bf16 ridge point
  EXPECT_LT(one.flops / one.bytes, 1.01);
  // The hand GEMV counts the same work and refuses token counts it has no kernel for.
  EXPECT_DOUBLE_EQ(make_linear(768, 3072, 1, "gemv")->work().bytes, one.bytes);
  EXPECT_THROW(make_linear(768, 3072, 16, "gemv"), NotApplicable);
  EXPECT_THROW(make_linear(1000, 3072, 1, "gemv"), NotApplicable);
  EXPECT_THROW(make_linear(768, 3072, 1, "cublas"), Error);
}

// The text figure `name` of a case before setup; empty where it has none.
std::string fact(const Case& c, const std::string& name) {
  for (const Figure& f : c.figures())
    if (f.is_text && f.name == name) return f.text;
  return {};
}

// Each fused_vN names its kernel when made; `fused` names none until setup has chosen its version.
TEST(TransformerWork, FusedVersionsNameTheirKernelWhenMadeAndTheKeeperAtSetup) {
  const AttentionShape shape = parse_prefill_shape("8x12x1024x64", true);
  for (const std::string& v : kernels::fused_versions()) {
    const std::unique_ptr<Case> c = make_prefill_attention("fused_" + v, AttentionType::bf16, shape);
    EXPECT_EQ(fact(*c, "kernel").rfind("fused_" + v, 0), 0u) << v << ": " << fact(*c, "kernel");
  }
  EXPECT_EQ(fact(*make_prefill_attention("fused", AttentionType::bf16, shape), "kernel"), "");
}

TEST(TransformerWork, GemvChainedVersionsSayTheirLaunchesOverlap) {
  const std::unique_ptr<Case> v3 = make_linear(3072, 768, 1, "gemv_v3");
  EXPECT_EQ(fact(*v3, "kernel").rfind("gemv_v3", 0), 0u) << fact(*v3, "kernel");
  EXPECT_NE(fact(*v3, "launch").find("a chain's time per layer"), std::string::npos) << fact(*v3, "launch");
  EXPECT_TRUE(fact(*make_linear(3072, 768, 1, "gemv_v1"), "launch").empty());
  EXPECT_EQ(gemv_sm90_feature("v1"), "");
  EXPECT_TRUE(gemv_code_has_sm90("v1", 0));  // asks no GPU: v1 has no sm_90 instructions to look for
  EXPECT_NE(gemv_sm90_feature("v3").find("programmatic dependent launch"), std::string::npos);
  EXPECT_THROW(make_linear(768, 3072, 16, "gemv_v3"), NotApplicable);
  EXPECT_THROW(gemv_blocks_per_sm("v2", 768, 1, 0), std::invalid_argument);  // asks no GPU
  EXPECT_THROW(gemv_blocks_per_sm("v5", 1000, 1, 0), std::invalid_argument);
  EXPECT_EQ(fact(*make_linear(3072, 768, 1, "gemv"), "kernel"), "");  // named at setup, for its device
  for (const std::string& chained : gemv_impls(gemv_launches_overlap)) {
    const std::unique_ptr<Case> c = make_linear(3072, 768, 1, chained);
    EXPECT_EQ(fact(*c, "kernel").rfind(chained, 0), 0u) << fact(*c, "kernel");
    EXPECT_EQ(fact(*c, "launch"), fact(*v3, "launch")) << chained;
  }
  EXPECT_TRUE(fact(*make_linear(3072, 768, 1, "gemv_v2"), "launch").empty());
  EXPECT_TRUE(gemv_needs_chain("v7"));
  EXPECT_FALSE(gemv_needs_chain("v3"));
  for (const auto& [version, ahead] : {std::pair{"v3", 0}, std::pair{"v7", 0}, std::pair{"v8", 1}, std::pair{"v9", 1},
                                       std::pair{"v10", 2}, std::pair{"v99", 0}})
    EXPECT_EQ(gemv_prefetch_distance(version), ahead) << version;
  EXPECT_THROW(gemv_bf16("v7", nullptr, nullptr, nullptr, 768, 3072, 1, nullptr), std::invalid_argument);  // no chain
  // What v8 to v10 prefetch must be 16-byte multiples under 4 GiB; refused before any launch.
  alignas(16) static const unsigned char next[32] = {};
  for (const GemvNextRun bad : {GemvNextRun{next + 8, 16}, GemvNextRun{next, 24}, GemvNextRun{next, 16, next + 4, 16},
                                GemvNextRun{next, std::size_t(1) << 32}})
    EXPECT_THROW(gemv_bf16("v9", nullptr, nullptr, nullptr, 768, 3072, 1, nullptr, nullptr, bad),
                 std::invalid_argument);
}

TEST(TransformerGate, SamplesTheEdgesAndStaysInRange) {
  const auto rows = sampled_rows(1024, 16, 7);
  for (std::int64_t r : {0, 1, 63, 64, 127, 128, 1023, 1022, 960, 959, 896, 895}) EXPECT_TRUE(std::count(rows.begin(), rows.end(), r)) << r;
  for (std::int64_t r : rows) EXPECT_TRUE(r >= 0 && r < 1024);
  EXPECT_EQ(sampled_rows(1, 16, 7), std::vector<std::int64_t>{0});
  const auto pairs = sampled_pairs(96, 4, 7);
  EXPECT_EQ(pairs.size(), 4u);
  EXPECT_EQ(pairs.front(), 0);
  EXPECT_EQ(pairs.back(), 95);
  EXPECT_EQ(sampled_pairs(2, 24, 7).size(), 2u);
}

TEST(TransformerGate, ComparesTheHeadsWhereABalancedRunStartsMidHead) {
  // 3 heads of 1000 keys in runs of 700: runs start at 700 (head 0), 1400 (head 1), 2100 (head 2), 2800 (head 2).
  EXPECT_EQ(run_boundary_pairs(5, 700, 1000, 3, 8), (std::vector<std::int64_t>{0, 1, 2}));
  // Runs of exactly one head start at head boundaries: no head is merged from two blocks.
  EXPECT_TRUE(run_boundary_pairs(4, 1000, 1000, 4, 8).empty());
  // B256 x 12 heads x KV 4096 in 528 runs (v7 on 132 SMs): at most `count`, all in range, sorted, distinct.
  const std::int64_t run = (3072 * 4096 + 527) / 528;
  const auto spread = run_boundary_pairs(528, run, 4096, 3072, 8);
  EXPECT_EQ(spread.size(), 8u);
  for (std::size_t i = 0; i < spread.size(); ++i) {
    EXPECT_TRUE(spread[i] >= 0 && spread[i] < 3072);
    if (i) {
      EXPECT_LT(spread[i - 1], spread[i]);
    }
  }
  EXPECT_GT(spread.back(), 3072 / 2);  // spread over the grid, not only its first blocks
  EXPECT_TRUE(run_boundary_pairs(1, 700, 1000, 3, 8).empty());
}

TEST(TransformerPlugin, PrefillShapesFromHeadsAndT) {
  const AttentionShape gpt2 = prefill_shape("12x64", 1024, true);
  EXPECT_EQ(gpt2.batch, 8);
  EXPECT_EQ(gpt2.heads, 12);
  EXPECT_EQ(gpt2.q_len, 1024);
  EXPECT_EQ(gpt2.kv_len, 1024);
  EXPECT_EQ(gpt2.head_dim, 64);
  EXPECT_TRUE(gpt2.causal);
  const AttentionShape wide = prefill_shape("16x128", 4096, false);  // the FlashAttention papers' B4 H16 T4096 d128
  EXPECT_EQ(wide.batch, 4);
  EXPECT_EQ(wide.heads, 16);
  EXPECT_EQ(wide.head_dim, 128);
  EXPECT_EQ(prefill_shape("12x64", 8192, true).batch, 1);
  EXPECT_THROW(prefill_shape("12x64", 3000, true), Error);
  EXPECT_THROW(prefill_shape("12", 1024, true), Error);
}

TEST(TransformerPlugin, DescribesTheCasesOfTheIssue) {
  Plugin p;
  describe(p);
  std::set<std::string> names;
  for (const CaseSpec& c : p.cases) names.insert(c.name);
  EXPECT_EQ(names, (std::set<std::string>{"attention_prefill_bf16", "attention_prefill_fp16", "attention_decode_bf16",
                                          "linear_bf16"}));
  const CaseSpec& prefill = p.cases.front();
  const auto& impls = prefill.axes.front().values;
  for (const char* impl :
       {"naive", "fused", "fused_v1", "fused_v2", "fused_v3", "fused_v4", "fused_v5", "fused_v6", "fused_v7", "fused_v8",
        "fused_v9", "fused_v10", "fused_v11", "fused_v12", "fused_v13", "fused_v14", "fused_v15", "fused_v16", "cudnn"})
    EXPECT_TRUE(std::count(impls.begin(), impls.end(), impl)) << impl;
  const auto& decode_impls = p.cases[2].axes.front().values;
  for (const char* impl : {"naive", "split_kv", "split_kv_v1", "split_kv_v2", "split_kv_v3", "split_kv_v5", "cudnn"})
    EXPECT_TRUE(std::count(decode_impls.begin(), decode_impls.end(), impl)) << impl;
  const auto& linear_impls = p.cases.back().axes.back().values;
  EXPECT_EQ(linear_impls,
            (std::vector<std::string>{"cublaslt", "gemv", "gemv_v1", "gemv_v2", "gemv_v3", "gemv_v4", "gemv_v5",
                                      "gemv_v6", "gemv_v7", "gemv_v8", "gemv_v9", "gemv_v10"}));
  EXPECT_TRUE(std::count(kernels::fused_versions().begin(), kernels::fused_versions().end(), kBestFusedVersion));
  for (const char* keeper :
       {kBestHopperFusedVersionD64, kBestHopperFusedVersionD128Causal, kBestHopperFusedVersionD128Full})
    EXPECT_TRUE(std::count(kernels::fused_versions().begin(), kernels::fused_versions().end(), keeper)) << keeper;
}

// The sm_90a keeper for the head dim and mask (v9 at 64, v16 causal and v14 full at 128) only where its code runs; a
// device that cannot run it (here: none, or not compute capability 9.0) and a shape it does not take get fused_v3.
TEST(TransformerPlugin, FusedPicksTheSm90aVersionOnlyWhereItRuns) {
  const AttentionShape shape{.batch = 8, .heads = 12, .q_len = 1024, .kv_len = 1024, .head_dim = 64, .causal = true};
  int device = 0;
  const bool hopper = cudaGetDevice(&device) == cudaSuccess &&
                      kernels::fused_unavailable_reason(kBestHopperFusedVersionD64, device).empty();
  (void)cudaGetLastError();
  EXPECT_EQ(best_fused_version(shape, device), hopper ? "v9" : "v3");
  AttentionShape d128 = shape;
  d128.head_dim = 128;
  EXPECT_EQ(best_fused_version(d128, device), hopper ? "v16" : "v3");
  d128.causal = false;
  EXPECT_EQ(best_fused_version(d128, device), hopper ? "v14" : "v3");
  AttentionShape full = shape;
  full.causal = false;
  EXPECT_EQ(best_fused_version(full, device), hopper ? "v9" : "v3");
  AttentionShape decode = shape;
  decode.q_len = 1;
  EXPECT_EQ(best_fused_version(decode, device), "v3");
}

TEST(TransformerPlugin, SplitKvPicksItsVersionByTheHeadsInFlight) {
  auto shape = [](std::int64_t batch, std::int64_t kv = 1024) {
    return AttentionShape{.batch = batch, .heads = 12, .q_len = 1, .kv_len = kv, .head_dim = 64, .causal = true};
  };
  EXPECT_EQ(best_split_kv_version(shape(1), 132, true), "v3");
  EXPECT_EQ(best_split_kv_version(shape(8), 132, true), "v3");
  EXPECT_EQ(best_split_kv_version(shape(64), 132, true), "v9");
  EXPECT_EQ(best_split_kv_version(shape(256, 4096), 132, true), "v7");  // 23832 keys per balanced block
  EXPECT_EQ(best_split_kv_version(shape(256), 132, true), "v9");        // 5958
  EXPECT_EQ(best_split_kv_version(shape(128, 4096), 132, true), "v7");  // 11916
  // Without cp.async.bulk (before sm_90) the middle band falls back to v2, the rest is unchanged.
  EXPECT_EQ(best_split_kv_version(shape(64), 132, false), "v2");
  EXPECT_EQ(best_split_kv_version(shape(256, 4096), 132, false), "v7");
  EXPECT_EQ(best_split_kv_version(shape(1), 132, false), "v3");
  for (const char* v : {"v2", "v3", "v7", "v9"})
    EXPECT_TRUE(std::count(kernels::split_kv_versions().begin(), kernels::split_kv_versions().end(), v)) << v;
  EXPECT_THROW(make_decode_attention("split_kv_v99", shape(1)), Error);
}

TEST(TransformerPlugin, FusedRefusesShapesItDoesNotTake) {
  EXPECT_THROW(make_prefill_attention("fused_v2", AttentionType::bf16, parse_prefill_shape("1x1x200x64", true)),
               NotApplicable);
  EXPECT_THROW(make_prefill_attention("fused_v1", AttentionType::bf16, parse_prefill_shape("1x1x256x96", true)),
               NotApplicable);
  EXPECT_THROW(make_prefill_attention("fused_v99", AttentionType::bf16, parse_prefill_shape("1x1x256x64", true)),
               NotApplicable);
}

// ---- on a GPU ----

struct GateRun {
  bool applicable = true;
  std::string why_not;
  Check check;
};

// The host's gate run: setup, outputs poisoned with 0xFF, `runs` runs, check.
GateRun gate(std::unique_ptr<Case> c, int runs = 1) {
  CudaTestContext ctx(Params{});
  GateRun result;
  try {
    c->setup(ctx);
  } catch (const NotApplicable& e) {
    result.applicable = false;
    result.why_not = e.what();
    return result;
  }
  result.check = gate_after_setup(*c, ctx, {.runs = runs}).check;
  return result;
}

bool passes(const Check& check, Precision p) { return check.rel_l2_error <= default_tolerance(p); }

class TransformerGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  }
};

const std::vector<std::string> kPrefillImpls = {"naive",    "fused_v1", "fused_v2", "fused_v3", "fused_v4",
                                                "fused_v5", "fused_v6", "fused_v7", "fused_v8", "fused_v9",
                                                "fused_v10", "fused_v11", "fused_v12", "fused_v13", "fused_v14",
                                                "fused_v15", "fused_v16", "fused", "cudnn"};

// Whether `impl` may be not applicable on this device: cuDNN's refusals, and the sm_90a versions off compute
// capability 9.0 or in a build without sm_90a code.
bool may_be_refused(const std::string& impl) {
  if (impl == "cudnn") return true;
  if (impl.rfind("fused_", 0) != 0) return false;
  const std::string version = impl.substr(6);
  return kernels::fused_version_needs_sm90a(version) && !kernels::fused_unavailable_reason(version, 0).empty();
}

TEST_F(TransformerGpu, EveryPrefillImplementationPassesItsGate) {
  for (const auto& [type, precision] : {std::pair{AttentionType::bf16, Precision::bf16}, std::pair{AttentionType::fp16, Precision::fp16}})
    for (const char* shape : {"2x3x256x64", "1x2x320x128"})
      for (bool causal : {true, false})
        for (const std::string& impl : kPrefillImpls) {
          const std::string what = impl + " " + shape + (causal ? " causal " : " full ") + to_string(precision);
          if (impl.rfind("fused", 0) == 0 && std::string(shape) == "1x2x320x128" && impl != "fused_v1") {
            // 320 is not a multiple of the 128-query blocks of v2 to v6: refused at make().
            EXPECT_THROW(make_prefill_attention(impl, type, parse_prefill_shape(shape, causal)), NotApplicable) << what;
            continue;
          }
          const GateRun r = gate(make_prefill_attention(impl, type, parse_prefill_shape(shape, causal)));
          if (!r.applicable) {
            EXPECT_TRUE(may_be_refused(impl)) << what << ": " << r.why_not;
            std::printf("[ not applicable ] %s: %s\n", what.c_str(), r.why_not.c_str());
            continue;
          }
          EXPECT_TRUE(passes(r.check, precision)) << what << ": rel err " << r.check.rel_l2_error << "; " << r.check.detail;
        }
}

// The sm_90a versions through the gate at head dim 128 over several key tiles (T 640: five query blocks, each
// K/V ring going round more than once), both masks and both types: v6's overlapped loop runs there, v4's
// serial one.
TEST_F(TransformerGpu, Sm90aPrefillVersionsPassTheGateAtHeadDim128) {
  for (const auto& [type, precision] : {std::pair{AttentionType::bf16, Precision::bf16}, std::pair{AttentionType::fp16, Precision::fp16}})
    for (bool causal : {true, false})
      for (const std::string& version : kernels::fused_versions()) {
        if (!kernels::fused_version_needs_sm90a(version)) continue;
        const std::string impl = "fused_" + version, what = impl + (causal ? " causal " : " full ") + to_string(precision);
        const GateRun r = gate(make_prefill_attention(impl, type, parse_prefill_shape("1x3x640x128", causal)));
        if (!r.applicable) {
          EXPECT_TRUE(may_be_refused(impl)) << what << ": " << r.why_not;
          continue;
        }
        EXPECT_TRUE(passes(r.check, precision)) << what << ": rel err " << r.check.rel_l2_error << "; " << r.check.detail;
      }
}

// `fused` resolves its version at setup: after it, one kernel fact names the version best_fused_version picks
// for this device (fused_v6 on an H100 or H200 in a build with sm_90a code), and that version passes the gate.
TEST_F(TransformerGpu, FusedNamesTheVersionItResolvesAtSetup) {
  const AttentionShape shape = parse_prefill_shape("2x3x256x64", true);
  const std::unique_ptr<Case> c = make_prefill_attention("fused", AttentionType::bf16, shape);
  CudaTestContext ctx(Params{});
  c->setup(ctx);
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  const std::string version = best_fused_version(shape, device);
  const std::vector<Figure> figures = c->figures();
  EXPECT_EQ(std::count_if(figures.begin(), figures.end(), [](const Figure& f) { return f.is_text && f.name == "kernel"; }), 1);
  EXPECT_EQ(fact(*c, "kernel").rfind("fused_" + version, 0), 0u) << fact(*c, "kernel") << " against " << version;
  std::printf("fused resolves to %s: %s\n", version.c_str(), fact(*c, "kernel").c_str());
  const Check check = gate_after_setup(*c, ctx, {.runs = 2}).check;
  EXPECT_TRUE(passes(check, Precision::bf16)) << "rel err " << check.rel_l2_error << "; " << check.detail;
}

TEST_F(TransformerGpu, GateCatchesBrokenPrefillKernels) {
  for (const std::string& impl :
       {std::string("fused_v1"), std::string("fused_v2"), std::string("fused_v3"), std::string("fused_v4"),
        std::string("fused_v5"), std::string("fused_v6"), std::string("fused_v7"),
        std::string("fused_v8"), std::string("fused_v9"), std::string("fused_v10"), std::string("fused_v11"),
        std::string("fused_v12"), std::string("fused_v13"), std::string("fused_v14"),
        std::string("fused_v15"), std::string("fused_v16")})
    for (const char* shape : {"2x3x512x64", "2x3x512x128"})
      for (AttentionFault fault :
           {AttentionFault::drop_causal_mask, AttentionFault::skip_last_kv_block, AttentionFault::no_rescale}) {
        const GateRun r = gate(make_prefill_attention(impl, AttentionType::bf16, parse_prefill_shape(shape, true), fault));
        if (!r.applicable && may_be_refused(impl)) continue;
        EXPECT_FALSE(passes(r.check, Precision::bf16))
            << impl << " " << shape << " fault " << int(fault) << " passed: rel err " << r.check.rel_l2_error;
      }
  const GateRun naive = gate(make_prefill_attention("naive", AttentionType::bf16, parse_prefill_shape("2x3x512x64", true),
                                                    AttentionFault::drop_causal_mask));
  EXPECT_FALSE(passes(naive.check, Precision::bf16)) << "naive without its mask passed: " << naive.check.rel_l2_error;
}

AttentionShape decode_shape(std::int64_t batch, std::int64_t kv) {
  return {.batch = batch, .heads = 12, .q_len = 1, .kv_len = kv, .head_dim = 64, .causal = true};
}

std::vector<std::string> decode_impls_to_gate() {
  std::vector<std::string> impls = {"naive", "split_kv", "cudnn"};
  for (const std::string& v : kernels::split_kv_versions()) impls.push_back("split_kv_" + v);
  return impls;
}

TEST_F(TransformerGpu, EveryDecodeImplementationPassesItsGate) {
  // Small enough for the test context's host-side random fill (a B64 KV4096 cache is 400M values).
  for (const auto& [batch, kv] : {std::pair{1, 1024}, std::pair{3, 1000}, std::pair{8, 4096}, std::pair{2, 16384}, std::pair{1, 40}})
    for (const std::string& impl : decode_impls_to_gate()) {
      // Three runs: the split-KV arrival counters must be left at zero for the next launch.
      const GateRun r = gate(make_decode_attention(impl, decode_shape(batch, kv)), 3);
      const std::string what = impl + " B" + std::to_string(batch) + " KV" + std::to_string(kv);
      if (!r.applicable) {
        EXPECT_EQ(impl, "cudnn") << what << ": " << r.why_not;
        std::printf("[ not applicable ] %s: %s\n", what.c_str(), r.why_not.c_str());
        continue;
      }
      EXPECT_TRUE(passes(r.check, Precision::bf16)) << what << ": rel err " << r.check.rel_l2_error << "; " << r.check.detail;
    }
}

TEST_F(TransformerGpu, GateCatchesBrokenDecodeKernels) {
  for (const std::string& version : kernels::split_kv_versions())
    for (const auto& [batch, kv] : {std::pair{1, 1024}, std::pair{8, 4096}})
      for (AttentionFault fault : {AttentionFault::skip_last_kv_block, AttentionFault::no_rescale}) {
        const GateRun r = gate(make_decode_attention("split_kv_" + version, decode_shape(batch, kv), fault));
        EXPECT_FALSE(passes(r.check, Precision::bf16))
            << version << " B" << batch << " KV" << kv << " fault " << int(fault) << " passed: " << r.check.rel_l2_error;
      }
}

TEST_F(TransformerGpu, LinearLayersPassTheirGate) {
  for (const auto& [in, out] : {std::pair{768, 3072}, std::pair{3072, 768}}) {
    for (int tokens : {1, 7, 256, 2048}) {
      const GateRun r = gate(make_linear(in, out, tokens, "cublaslt"));
      EXPECT_TRUE(passes(r.check, Precision::bf16)) << in << "x" << out << " at " << tokens << ": " << r.check.detail;
    }
    std::vector<std::string> impls = gemv_impls(any_gemv);
    impls.insert(impls.begin(), "gemv");
    for (const std::string& impl : impls)
      for (int tokens : {1, 2, 4, 8}) {
        const GateRun r = gate(make_linear(in, out, tokens, impl), 2);
        if (!r.applicable) {  // v2 to v10 before sm_90
          const std::string version = impl == "gemv" ? best_gemv_version(0) : impl.substr(5);
          EXPECT_FALSE(gemv_sm90_feature(version).empty()) << impl << ": " << r.why_not;
          EXPECT_FALSE(has_bulk_copy(0) && gemv_code_has_sm90(version, 0)) << impl << ": " << r.why_not;
          std::printf("[ not applicable ] %s: %s\n", impl.c_str(), r.why_not.c_str());
          continue;
        }
        EXPECT_TRUE(passes(r.check, Precision::bf16)) << impl << " " << in << "x" << out << " at " << tokens << ": "
                                                      << r.check.detail;
      }
  }
}

// `gemv` runs the sm_90 keeper where its sm_90 code runs, else v1, and names the one it resolved to at setup.
TEST_F(TransformerGpu, GemvNamesTheVersionItResolvesAtSetup) {
  const std::unique_ptr<Case> c = make_linear(768, 3072, 1, "gemv");
  CudaTestContext ctx(Params{});
  c->setup(ctx);
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  const std::string version = best_gemv_version(device);
  EXPECT_EQ(version, has_bulk_copy(device) && gemv_code_has_sm90(kBestSm90GemvVersion, device) ? kBestSm90GemvVersion
                                                                                           : kBestGemvVersion);
  EXPECT_EQ(fact(*c, "kernel").rfind("gemv_" + version + ":", 0), 0u) << fact(*c, "kernel") << " against " << version;
  std::printf("gemv resolves to %s: %s\n", version.c_str(), fact(*c, "kernel").c_str());
  const Check check = gate_after_setup(*c, ctx, {.runs = 2}).check;
  EXPECT_TRUE(passes(check, Precision::bf16)) << "rel err " << check.rel_l2_error << "; " << check.detail;
}

// ---- gemv_v3: v1's outputs, from launches that overlap ----

// Whether this GPU runs gemv_v3 (PDL's griddepcontrol needs sm_90, and this build's code for it); says why not
// where it does not.
bool runs_v3() {
  if (has_bulk_copy(0) && gemv_code_has_sm90("v3", 0)) return true;
  std::printf("[ not applicable ] gemv_v3: %s, which needs sm_90 or later and code compiled for it\n",
              gemv_sm90_feature("v3").c_str());
  return false;
}

// The code check reads the compute_ version the loaded kernel was compiled from: on a GPU of compute capability
// 9.0 or later this build (whose architectures include 90 or 90a, CMAKE_CUDA_ARCHITECTURES) has the instructions
// of v2 to v5, and the case refuses none; v1 needs none.
TEST_F(TransformerGpu, GemvSm90VersionsFindTheirCodeOnSm90) {
  EXPECT_TRUE(gemv_code_has_sm90("v1", 0));
  if (!has_bulk_copy(0)) GTEST_SKIP() << "compute capability below 9.0: no sm_90 code to find";
  EXPECT_TRUE(gemv_code_has_sm90("v2", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v3", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v4", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v5", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v6", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v7", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v8", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v9", 0));
  EXPECT_TRUE(gemv_code_has_sm90("v10", 0));
  CudaTestContext ctx(Params{});
  for (const std::string& impl : gemv_impls(needs_sm90)) {
    const std::unique_ptr<Case> c = make_linear(768, 3072, 1, impl);
    EXPECT_NO_THROW(c->setup(ctx)) << impl;
    c->teardown(ctx);
  }
}

// A chain of `layers` linear layers, fc and proj in turn (768 -> 3072 -> 768 ...), each reading the output of the
// one before, launched back to back on one stream with nothing between them, every output poisoned (0xFF, NaN)
// first: under v3 each layer starts before the one before it has ended, and only its wait keeps it from reading
// that layer's output early. Every layer's output, as bytes; the inputs are the same for every version (the
// test context's fills are seeded).
std::vector<std::vector<unsigned char>> chain_outputs(const std::string& version, int tokens, int layers) {
  CudaTestContext test_ctx(Params{});
  Context& ctx = test_ctx;  // Context's defaults: rank 0, values in [-1, 1]
  const std::int64_t width[2] = {768, 3072};
  void* weights[2];
  for (void*& w : weights) {
    w = ctx.alloc(std::size_t(768 * 3072) * 2, BufferRole::input);
    ctx.fill_random(w, 768 * 3072, ElementType::bf16, -0.05, 0.05);  // keeps the values near 1 down the chain
  }
  std::vector<void*> activations{ctx.alloc(std::size_t(tokens) * 768 * 2, BufferRole::input)};
  ctx.fill_random(activations.front(), std::size_t(tokens) * 768, ElementType::bf16);
  for (int l = 0; l < layers; ++l)
    activations.push_back(ctx.alloc(std::size_t(tokens * width[(l + 1) % 2]) * 2, BufferRole::output));
  void* chain = nullptr;  // v7's counts, one state for the whole chain
  if (gemv_needs_chain(version)) {
    chain = ctx.alloc(kGemvChainBytes, BufferRole::scratch);
    const unsigned char zeros[kGemvChainBytes] = {};
    ctx.copy_to_device(chain, zeros, sizeof zeros);
  }
  test_ctx.fill_outputs(0xFF);
  const int ahead = gemv_prefetch_distance(version);  // the weights prefetched: the layer's that many ahead
  for (int l = 0; l < layers; ++l)  // and x: this layer's output, the next one's x
    gemv_bf16(version, weights[l % 2], activations[l], activations[l + 1], width[l % 2], width[(l + 1) % 2], tokens,
              test_ctx.cuda_stream(), chain,
              {weights[(l + ahead) % 2], std::size_t(768 * 3072) * 2, activations[l + 1],
               std::size_t(tokens * width[(l + 1) % 2]) * 2});
  ctx.synchronize();
  std::vector<std::vector<unsigned char>> outputs;
  for (int l = 0; l < layers; ++l) {
    outputs.emplace_back(std::size_t(tokens * width[(l + 1) % 2]) * 2);
    ctx.copy_to_host(outputs.back().data(), activations[l + 1], outputs.back().size());
  }
  return outputs;
}

// The arithmetic of v3, v4, v5 and v7 to v10 is v1's in the same order, so the outputs are v1's to the bit, at every
// token count, for both layers, and down a chain whose every launch overlaps the one before (v5's, several
// before; v7's waiting on counts, not on the grid before; v8's to v10's prefetching a later layer's weights).
TEST_F(TransformerGpu, GemvChainedVersionsGiveV1sOutputsBitwiseDownAChain) {
  if (!runs_v3()) return;
  constexpr int kLayers = 8;
  for (int tokens : {1, 2, 4, 8}) {
    const auto v1 = chain_outputs("v1", tokens, kLayers);
    for (const std::string& impl : gemv_impls(gives_v1s_bits)) {
      const std::string chained = impl.substr(5);
      const auto got = chain_outputs(chained, tokens, kLayers);
      for (int l = 0; l < kLayers; ++l)
        EXPECT_TRUE(v1[l] == got[l]) << chained << ", layer " << l << " (" << (l % 2 ? "proj" : "fc") << ") at "
                                     << tokens << " tokens";
    }
    for (int l = 0; l < kLayers; ++l) {
      // Two bytes 0xFF are the poison (a NaN): v1's chain wrote every output.
      bool poisoned = false;
      for (std::size_t i = 0; i + 1 < v1[l].size(); i += 2) poisoned |= v1[l][i] == 0xFF && v1[l][i + 1] == 0xFF;
      EXPECT_FALSE(poisoned) << "layer " << l << " at " << tokens << " tokens";
    }
  }
}

// v6 is v2's copies and arithmetic under PDL: down the same chain, every layer's output is v2's to the bit (v2's
// launches do not overlap), at every token count.
TEST_F(TransformerGpu, GemvV6GivesV2sOutputsBitwiseDownAChain) {
  if (!runs_v3()) return;
  constexpr int kLayers = 8;
  for (int tokens : {1, 2, 4, 8}) {
    const auto v2 = chain_outputs("v2", tokens, kLayers), v6 = chain_outputs("v6", tokens, kLayers);
    for (int l = 0; l < kLayers; ++l)
      EXPECT_TRUE(v2[l] == v6[l]) << "layer " << l << " (" << (l % 2 ? "proj" : "fc") << ") at " << tokens << " tokens";
  }
}

// One launch of `version` on seeded inputs (in x out weights, tokens rows of x), y poisoned first: y as bytes.
std::vector<unsigned char> one_layer_output(const std::string& version, std::int64_t in, std::int64_t out, int tokens) {
  CudaTestContext test_ctx(Params{});
  Context& ctx = test_ctx;
  void* w = ctx.alloc(std::size_t(in * out) * 2, BufferRole::input);
  void* x = ctx.alloc(std::size_t(tokens * in) * 2, BufferRole::input);
  void* y = ctx.alloc(std::size_t(tokens * out) * 2, BufferRole::output);
  ctx.fill_random(w, std::size_t(in * out), ElementType::bf16, -0.05, 0.05);
  ctx.fill_random(x, std::size_t(tokens * in), ElementType::bf16);
  test_ctx.fill_outputs(0xFF);
  gemv_bf16(version, w, x, y, in, out, tokens, test_ctx.cuda_stream());
  ctx.synchronize();
  std::vector<unsigned char> bytes(std::size_t(tokens * out) * 2);
  ctx.copy_to_host(bytes.data(), y, bytes.size());
  return bytes;
}

// v4's and v5's rows come 4 to a warp and 4 or more to a block: at every input width (one, two and four segments
// a row) and at output sizes that leave the last block part-filled, their outputs are v1's to the bit.
TEST_F(TransformerGpu, GemvV4AndV5GiveV1sOutputsBitwiseAtEveryWidthAndEdge) {
  if (!runs_v3()) return;
  for (const char* version : {"v4", "v5"})
    for (std::int64_t in : {768, 1536, 3072})
      for (std::int64_t out : {5, 7, 1000, 1003})  // a last warp of 1, 3, 4 and 3 rows
        for (int tokens : {1, 2, 4, 8})
          EXPECT_TRUE(one_layer_output("v1", in, out, tokens) == one_layer_output(version, in, out, tokens))
              << version << " " << in << "x" << out << " at " << tokens << " tokens";
}

// v5 exists to fit more chained launches' blocks on an SM than v4 (shared memory, not registers, binds it): at
// one token at least twice v4's, and the case says how many.
TEST_F(TransformerGpu, GemvV5FitsMoreLaunchesBlocksAnSmThanV4) {
  if (!runs_v3()) return;
  for (std::int64_t in : {768, 3072}) {
    const int v4 = gemv_blocks_per_sm("v4", in, 1, 0), v5 = gemv_blocks_per_sm("v5", in, 1, 0);
    std::printf("in %lld: blocks an SM v4 %d, v5 %d\n", static_cast<long long>(in), v4, v5);
    EXPECT_GE(v5, 2 * v4) << "in " << in;
  }
  CudaTestContext ctx(Params{});
  const std::unique_ptr<Case> c = make_linear(768, 3072, 1, "gemv_v5");
  c->setup(ctx);
  EXPECT_EQ(fact(*c, "blocks_per_sm"), std::to_string(gemv_blocks_per_sm("v5", 768, 1, 0)));
  c->teardown(ctx);
}

#if CUDART_VERSION >= 12030
// What a graph holds between two runs captured one after the other on the case's stream, as the host captures a
// cold-by-rotation sample (each run pointed at the next copy first): one kernel node per run, and the kinds of the
// edges between them. The graph is replayed three times (v7's chain counts carry from one replay to the next),
// and the last copy's outputs pass the gate.
struct CapturedRuns {
  std::size_t nodes = 0;
  std::vector<cudaGraphEdgeData> edges;
  Check last_copy;
};

// A graph's edges with their data: cudaGraphGetEdges gives the data from CUDA 13, cudaGraphGetEdges_v2 in 12.3 to 12.9.
cudaError_t graph_edges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to, cudaGraphEdgeData* data,
                        std::size_t* count) {
#if CUDART_VERSION >= 13000
  return cudaGraphGetEdges(graph, from, to, data, count);
#else
  return cudaGraphGetEdges_v2(graph, from, to, data, count);
#endif
}

CapturedRuns capture_rotated_runs(const std::string& impl, int runs) {
  constexpr int kCopies = 3;
  CudaTestContext ctx(Params{});
  std::unique_ptr<Case> c = make_linear(768, 3072, 1, impl);
  c->setup(ctx);
  c->rotation()->make_copies(ctx, kCopies);
  ctx.fill_outputs(0xFF);
  const cudaStream_t stream = ctx.cuda_stream();
  cudaGraph_t graph = nullptr;
  ROOFBENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < runs; ++i) {
    c->rotation()->use(i % kCopies);
    c->run(ctx);
  }
  ROOFBENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  CapturedRuns captured;
  ROOFBENCH_CUDA(cudaGraphGetNodes(graph, nullptr, &captured.nodes));
  std::size_t count = 0;
  ROOFBENCH_CUDA(graph_edges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  captured.edges.resize(count);
  ROOFBENCH_CUDA(graph_edges(graph, from.data(), to.data(), captured.edges.data(), &count));
  cudaGraphExec_t exec = nullptr;
  ROOFBENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) ROOFBENCH_CUDA(cudaGraphLaunch(exec, stream));  // v7's counts carry over
  ctx.synchronize(0);
  ROOFBENCH_CUDA(cudaGraphExecDestroy(exec));
  ROOFBENCH_CUDA(cudaGraphDestroy(graph));
  captured.last_copy = c->check(ctx);
  c->teardown(ctx);
  return captured;
}

// Stream capture keeps PDL (CUDA 12.3 and later): v3's consecutive runs are joined by programmatic edges, which
// let the next kernel start once every block of this one has triggered, so a replayed graph overlaps them;
// v1's by full dependencies.
TEST_F(TransformerGpu, ChainedGemvsCapturedRunsAreJoinedByProgrammaticEdges) {
  if (!runs_v3()) return;
  constexpr int kRuns = 5;
  for (const std::string& impl : gemv_impls(v1_or_overlapping)) {
    const CapturedRuns captured = capture_rotated_runs(impl, kRuns);
    const bool chained = impl != "gemv_v1";
    EXPECT_EQ(captured.nodes, std::size_t(kRuns)) << impl;
    ASSERT_EQ(captured.edges.size(), std::size_t(kRuns - 1)) << impl;
    for (const cudaGraphEdgeData& edge : captured.edges) {
      EXPECT_EQ(edge.type, chained ? cudaGraphDependencyTypeProgrammatic : cudaGraphDependencyTypeDefault) << impl;
      EXPECT_EQ(edge.from_port, chained ? cudaGraphKernelNodePortProgrammatic : cudaGraphKernelNodePortDefault) << impl;
    }
    EXPECT_TRUE(passes(captured.last_copy, Precision::bf16)) << impl << ": " << captured.last_copy.detail;
  }
}
#else
// Edge data (cudaGraphEdgeData) and programmatic edges in a captured graph come with CUDA 12.3.
TEST_F(TransformerGpu, ChainedGemvsCapturedRunsAreJoinedByProgrammaticEdges) {
  GTEST_SKIP() << "built with a CUDA runtime before 12.3: no graph edge data to read";
}
#endif  // CUDART_VERSION >= 12030

// Cold by rotation: every copy the host makes passes the gate (the run reads and writes the copy selected).
void expect_gate_on_every_copy(std::unique_ptr<Case> c, const std::string& what) {
  CudaTestContext ctx(Params{});
  std::vector<Check> checks;
  try {
    checks = case_support::testing::gate_on_every_copy(*c, ctx, 3);
  } catch (const NotApplicable& e) {
    std::printf("[ not applicable ] %s: %s\n", what.c_str(), e.what());
    return;
  }
  ASSERT_EQ(checks.size(), 3u) << what << ": no copies to rotate";
  for (std::size_t copy = 0; copy < checks.size(); ++copy)
    EXPECT_TRUE(passes(checks[copy], Precision::bf16)) << what << " copy " << copy << ": rel err "
                                                       << checks[copy].rel_l2_error << "; " << checks[copy].detail;
}

// What v8 prefetches under --cold: the set after the one in use, round to the first, and nothing before copies.
TEST_F(TransformerGpu, InputCopiesNameTheSetAfterTheOneInUse) {
  CudaTestContext test_ctx(Params{});
  Context& ctx = test_ctx;
  void* w = ctx.alloc(4096, BufferRole::input);
  case_support::InputCopies copies;
  copies.add(w, 4096, BufferRole::input);
  EXPECT_EQ(copies.after(w), nullptr) << "one set: no next";
  copies.make_copies(ctx, 3);
  std::vector<void*> sets;
  for (int i = 0; i < 3; ++i) {
    copies.use(i);
    sets.push_back(w);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(copies.after(sets[i]), sets[(i + 1) % 3]) << "set " << i;
  EXPECT_EQ(copies.after(&copies), nullptr) << "not a set";
}

TEST_F(TransformerGpu, RotatingCasesPassTheirGateOnEveryCopy) {
  for (const auto& [in, out] : {std::pair{768, 3072}, std::pair{3072, 768}})
    for (const char* impl :
         {"cublaslt", "gemv", "gemv_v3", "gemv_v4", "gemv_v5", "gemv_v6", "gemv_v7", "gemv_v8", "gemv_v9",
          "gemv_v10"})
      expect_gate_on_every_copy(make_linear(in, out, 1, impl), std::string(impl) + " " + std::to_string(in));
  for (const std::string& impl : decode_impls_to_gate())
    expect_gate_on_every_copy(make_decode_attention(impl, decode_shape(3, 1000)), impl + " B3 KV1000");
}

}  // namespace
}  // namespace roofbench::transformer
