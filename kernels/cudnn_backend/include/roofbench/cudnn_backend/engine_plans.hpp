// The engine plans cuDNN's backend heuristics offer for one finalized operation graph, and the choice
// among them by timing, as cudnn-frontend's users (PyTorch's cudnn.benchmark) choose: the engine
// configurations of heuristics modes A, B and FALLBACK, one per distinct engine and knob choices, each
// finalized into an execution plan (those cuDNN refuses or that need more workspace than allowed are
// counted and left out), then timed with case_support's launch timing, the fastest taken.
#pragma once

#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/cudnn_backend/descriptor.hpp"

namespace roofbench::cudnn_backend {

// One engine configuration of the heuristics: the engine and its knob choices, and the modes that
// returned it.
struct EngineConfig {
  std::int64_t global_index = -1;
  std::vector<std::pair<std::int64_t, std::int64_t>> knobs;  // (cudnnBackendKnobType_t, value), sorted by type
  std::string modes;                                         // "A", "A+B", "fallback"
  // "engine 12" or "engine 12 (knobs 3=1 5=0)".
  std::string label() const;
  bool same_choice(const EngineConfig& other) const {
    return global_index == other.global_index && knobs == other.knobs;
  }
};

// The positions of the first of `configs` making each distinct choice, in order; the modes of a later
// repeat are added to the first's ("A" and "B" give "A+B").
std::vector<std::size_t> distinct_configs(std::span<EngineConfig> configs);

struct PlanSearchOptions {
  std::int64_t max_workspace_bytes = INT64_MAX;
  std::size_t max_plans = 16;  // finalized and timed at most; the heuristics' order decides which
  // Engines with one of these numerical notes are left out (e.g. REDUCED_PRECISION_REDUCTION where the
  // case promises fp32 accumulation).
  std::vector<cudnnBackendNumericalNote_t> excluded_notes;
  // Engines that compile kernels at finalize (seconds each): taken, or left out to keep setup short.
  bool runtime_compilation = true;
};

// One finalized plan. It keeps the configuration and the graph's descriptors alive with it.
struct EnginePlan {
  std::shared_ptr<Descriptor> plan;
  std::shared_ptr<Descriptor> config;
  std::shared_ptr<const DescriptorSet> graph;
  EngineConfig engine;
  std::int64_t workspace_bytes = 0;
};

// What became of the heuristics' configurations, counted by reason.
struct PlanCounts {
  std::vector<std::pair<std::string, std::int64_t>> per_mode;  // ("A", 24) or ("B", -1) when the mode failed
  std::string failed_modes;                                    // "B: CUDNN_STATUS_NOT_SUPPORTED"
  std::size_t distinct = 0, excluded_notes = 0, runtime_compilation = 0, refused = 0, too_much_workspace = 0,
              finalized = 0, beyond_limit = 0;
  // "heuristics A 24, B 20, fallback 4 configurations; 30 distinct; 3 left out for numerical notes, 2 for
  // runtime compilation; 2 refused by cuDNN; 1 needs more workspace; 16 plans finalized (limit 16, 6 more
  // not tried)"
  std::string text(std::size_t max_plans) const;
};

struct EnginePlans {
  std::vector<EnginePlan> plans;  // in the heuristics' order (A, then B, then fallback)
  PlanCounts counts;
  std::string text;
  std::int64_t most_workspace_bytes() const;
};

// The plans for `graph` (finalized), as options allow. Never throws for a refused mode or configuration;
// an empty `plans` means none could be made, and `text` says why.
EnginePlans engine_plans(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                         std::shared_ptr<const DescriptorSet> graph_descriptors, const PlanSearchOptions& options);

// Enqueues one execution of `plan` on the handle's stream.
void execute(cudnnHandle_t handle, const Descriptor& plan, const Descriptor& pack);

struct PlanChoice {
  EnginePlan chosen;
  double timed_ms = 0;
  std::string text;  // what was timed and chosen, then the heuristics' counts
};

// The chosen plan's text from the timings of `plans` (pure; `chosen` indexes both).
std::string plan_choice_text(std::span<const EnginePlan> plans, std::span<const case_support::CandidateTiming> timings,
                             std::size_t chosen, int groups, const std::string& counts_text);

// engine_plans, then every plan timed on the handle's stream with the tensors of `uids`/`pointers` and a
// workspace from `workspace(bytes)` (called once, with the most any plan needs), the fastest taken. A
// plan whose launches cannot be captured into a CUDA graph is not taken (graphable cases are replayed
// from graphs). Throws NotApplicable with the counts when no plan could be made, Error when none ran.
PlanChoice fastest_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                        std::shared_ptr<const DescriptorSet> graph_descriptors, const PlanSearchOptions& options,
                        std::span<const std::int64_t> uids, std::span<void* const> pointers,
                        const std::function<void*(std::int64_t bytes)>& workspace, const std::string& what);

}  // namespace roofbench::cudnn_backend
