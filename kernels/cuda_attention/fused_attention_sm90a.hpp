// The fused prefill versions on Hopper's own instructions, v4 to v16 (sm_90a: TMA, wgmma, setmaxnreg), kept apart
// from fused_attention.cu because their translation unit is compiled for sm_90a alone. In a build without sm_90a
// code (ROOFBENCH_HOPPER_90A off) fused_attention_sm90a_absent.cpp stands in: never available.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "roofbench/kernels/cuda_attention.hpp"

namespace roofbench::kernels::sm90a {

// What a version does beyond its tiles and stages (fused_attention_sm90a.cu's Config reads it, and
// fused_version_form describes it). The fields are explained where Config uses them.
struct Form {
  bool wide_consumers = false;        // the consumers get setmaxnreg's registers (the time-out trap out of line)
  int blocks_per_sm = 1;              // blocks an SM holds at once
  int consumer_groups = 2;            // consumer warp groups of 64 query rows
  bool persistent = false;            // one block an SM walking work items
  bool ping_pong = false;             // the consumer groups taking turns to issue their products
  bool head_major = false;            // a persistent block's items head by head
  bool rescale_under_scores = false;  // O rescaled while the next tile's scores are in flight
  bool raw_maxima = false;            // a row's maximum taken over the raw scores, then scaled once
  bool skip_unit_rescale = false;     // a warp whose factors are all exactly 1 leaves O as it is
  bool store_under_scores = false;    // an item's O stored while the next item's first scores are in flight
};

// Every sm_90a version and its form (at head dim 128; v7's and v8's own d 64 shapes are with_config's).
struct NamedForm {
  std::string_view version;
  Form form;
};
inline constexpr Form kWideForm{.wide_consumers = true}, kPersistentForm{.wide_consumers = true, .persistent = true},
    kHeadMajorForm{.wide_consumers = true, .persistent = true, .head_major = true},
    kRawMaximaForm{.wide_consumers = true, .persistent = true, .head_major = true, .rescale_under_scores = true,
                   .raw_maxima = true};
inline constexpr NamedForm kForms[] = {
    {"v4", {}},
    {"v5", {}},
    {"v6", kWideForm},
    {"v7", kWideForm},
    {"v8", kWideForm},
    {"v9", kPersistentForm},
    {"v10", {.wide_consumers = true, .persistent = true, .ping_pong = true}},
    {"v11", kHeadMajorForm},
    {"v12", {.wide_consumers = true, .persistent = true, .ping_pong = true, .head_major = true}},
    {"v13", {.wide_consumers = true, .persistent = true, .head_major = true, .rescale_under_scores = true}},
    {"v14", kRawMaximaForm},
    {"v15", {.wide_consumers = true, .persistent = true, .head_major = true, .rescale_under_scores = true,
             .raw_maxima = true, .skip_unit_rescale = true}},
    {"v16", {.wide_consumers = true, .persistent = true, .head_major = true, .rescale_under_scores = true,
             .raw_maxima = true, .store_under_scores = true}},
};

// The form of `version`, which must be one of kForms (a compile-time error in a constant expression).
constexpr Form form_of(std::string_view version) {
  for (const NamedForm& named : kForms)
    if (named.version == version) return named.form;
  throw "not an sm_90a version";
}

// Whether `version` is one of these.
inline bool is_sm90a_version(const std::string& version) {
  for (const NamedForm& named : kForms)
    if (named.version == version) return true;
  return false;
}

// Empty when the sm_90a version runs on `device`; else why not (no sm_90a code in this build, or not compute
// capability 9.0).
std::string fused_sm90a_unavailable(const std::string& version, int device);

// An sm_90a version on the current device: q_len == kv_len a multiple of 128, head_dim 64 or 128
// (check_fused_supports), and fused_sm90a_unavailable empty; throws roofbench::Error otherwise.
void launch_fused_sm90a(const std::string& version, AttentionType type, const AttentionShape& shape, const void* q,
                        const void* k, const void* v, void* o, cudaStream_t stream, AttentionFault fault);

// The blocks of the version's kernel an SM of the current device holds at once (the occupancy the version's
// register and shared-memory split was made for); throws roofbench::Error where it does not run.
int fused_sm90a_blocks_per_sm(const std::string& version, AttentionType type, int head_dim);

}  // namespace roofbench::kernels::sm90a
