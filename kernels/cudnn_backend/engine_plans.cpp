#include "roofbench/cudnn_backend/engine_plans.hpp"

#include <algorithm>

#include "roofbench/plugin.hpp"

namespace roofbench::cudnn_backend {

std::unique_ptr<Descriptor> variant_pack(std::span<const std::int64_t> uids, std::span<void* const> pointers,
                                         void* workspace) {
  if (uids.size() != pointers.size())
    throw Error("cudnn_backend: " + std::to_string(uids.size()) + " unique ids for " + std::to_string(pointers.size()) +
                " data pointers");
  auto pack = std::make_unique<Descriptor>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack->set_array(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids)
      .set_array(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers)
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace);
  pack->finalize("variant pack");
  return pack;
}

std::string EngineConfig::label() const {
  std::string text = "engine " + std::to_string(global_index);
  if (knobs.empty()) return text;
  text += " (knobs";
  for (const auto& [type, value] : knobs) text += " " + std::to_string(type) + "=" + std::to_string(value);
  return text + ")";
}

std::vector<std::size_t> distinct_configs(std::span<EngineConfig> configs) {
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    auto same = std::find_if(kept.begin(), kept.end(), [&](std::size_t k) { return configs[k].same_choice(configs[i]); });
    if (same == kept.end()) {
      kept.push_back(i);
      continue;
    }
    std::string& modes = configs[*same].modes;
    if (("+" + modes + "+").find("+" + configs[i].modes + "+") == std::string::npos) modes += "+" + configs[i].modes;
  }
  return kept;
}

std::string PlanCounts::text(std::size_t max_plans) const {
  std::string out = "heuristics";
  for (std::size_t i = 0; i < per_mode.size(); ++i)
    out += (i ? ", " : " ") + per_mode[i].first + " " +
           (per_mode[i].second < 0 ? std::string("failed") : std::to_string(per_mode[i].second));
  out += " configurations";
  if (!failed_modes.empty()) out += " (" + failed_modes + ")";
  out += "; " + std::to_string(distinct) + " distinct";
  if (excluded_notes) out += "; " + std::to_string(excluded_notes) + " left out for their numerical notes";
  if (runtime_compilation) out += "; " + std::to_string(runtime_compilation) + " left out for runtime compilation";
  if (refused) out += "; " + std::to_string(refused) + " refused by cuDNN at finalize";
  if (too_much_workspace) out += "; " + std::to_string(too_much_workspace) + " need more workspace than allowed";
  out += "; " + std::to_string(finalized) + " plans finalized (limit " + std::to_string(max_plans);
  if (beyond_limit) out += ", " + std::to_string(beyond_limit) + " more not tried";
  return out + ")";
}

std::int64_t EnginePlans::most_workspace_bytes() const {
  std::int64_t most = 0;
  for (const EnginePlan& p : plans) most = std::max(most, p.workspace_bytes);
  return most;
}

namespace {

constexpr std::int64_t kMaxConfigsPerMode = 64;

const char* mode_name(cudnnBackendHeurMode_t mode) {
  switch (mode) {
    case CUDNN_HEUR_MODE_A: return "A";
    case CUDNN_HEUR_MODE_B: return "B";
    case CUDNN_HEUR_MODE_FALLBACK: return "fallback";
    default: return "instant";
  }
}

struct RawConfig {
  std::shared_ptr<Descriptor> config;
  EngineConfig engine;
  std::vector<cudnnBackendNumericalNote_t> numerical_notes;
  std::vector<cudnnBackendBehaviorNote_t> behavior_notes;
};

template <typename Note>
std::vector<Note> read_notes(cudnnBackendDescriptor_t engine, cudnnBackendAttributeName_t name,
                             cudnnBackendAttributeType_t type, std::int64_t most) {
  std::vector<Note> notes(static_cast<std::size_t>(most));
  std::int64_t count = 0;
  if (cudnnBackendGetAttribute(engine, name, type, most, &count, notes.data()) != CUDNN_STATUS_SUCCESS) count = 0;
  notes.resize(std::size_t(std::clamp<std::int64_t>(count, 0, most)));
  return notes;
}

// What a configuration chooses: the engine's global index, notes and knob choices.
RawConfig describe(std::shared_ptr<Descriptor> config, const char* mode) {
  RawConfig raw{std::move(config), {}, {}, {}};
  raw.engine.modes = mode;
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_handle = engine.get();
  std::int64_t count = 0;
  ROOFBENCH_CUDNN(cudnnBackendGetAttribute(raw.config->get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine_handle));
  ROOFBENCH_CUDNN(cudnnBackendGetAttribute(engine_handle, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                                           &raw.engine.global_index));
  // The notes and knobs only describe and filter: a cuDNN that will not say leaves them empty.
  raw.numerical_notes = read_notes<cudnnBackendNumericalNote_t>(engine_handle, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                                                CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  raw.behavior_notes = read_notes<cudnnBackendBehaviorNote_t>(engine_handle, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                                              CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT);

  std::vector<std::unique_ptr<Descriptor>> choices;
  std::vector<cudnnBackendDescriptor_t> choice_handles;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    choices.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    choice_handles.push_back(choices.back()->get());
  }
  if (cudnnBackendGetAttribute(raw.config->get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               std::int64_t(choice_handles.size()), &count, choice_handles.data()) != CUDNN_STATUS_SUCCESS)
    count = 0;
  for (std::int64_t i = 0; i < std::min<std::int64_t>(count, std::int64_t(choice_handles.size())); ++i) {
    cudnnBackendKnobType_t type{};
    std::int64_t value = 0, n = 0;
    const cudnnBackendDescriptor_t choice = choice_handles[std::size_t(i)];
    if (cudnnBackendGetAttribute(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type) ==
            CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &value) ==
            CUDNN_STATUS_SUCCESS)
      raw.engine.knobs.emplace_back(std::int64_t(type), value);
  }
  std::sort(raw.engine.knobs.begin(), raw.engine.knobs.end());
  return raw;
}

// The configurations one heuristics mode returns, in its order; -1 in `count` and the reason in
// `failed` when the mode refuses the graph.
std::vector<RawConfig> heuristics(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, PlanCounts& counts) {
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode);
  std::int64_t available = 0;
  cudnnStatus_t status = heur.try_finalize();
  if (status == CUDNN_STATUS_SUCCESS)
    status = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                      &available, nullptr);
  if (status != CUDNN_STATUS_SUCCESS) {
    counts.per_mode.emplace_back(mode_name(mode), -1);
    counts.failed_modes += (counts.failed_modes.empty() ? "" : "; ") + std::string(mode_name(mode)) + ": " +
                           cudnn_status_message(status);
    return {};
  }
  const std::int64_t wanted = std::min(available, kMaxConfigsPerMode);
  std::vector<std::shared_ptr<Descriptor>> configs;
  std::vector<cudnnBackendDescriptor_t> handles;
  for (std::int64_t i = 0; i < wanted; ++i) {
    configs.push_back(std::make_shared<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    handles.push_back(configs.back()->get());
  }
  std::int64_t returned = 0;
  if (wanted > 0)
    ROOFBENCH_CUDNN(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                             wanted, &returned, handles.data()));
  counts.per_mode.emplace_back(mode_name(mode), available);
  std::vector<RawConfig> out;
  for (std::int64_t i = 0; i < std::min(returned, wanted); ++i) out.push_back(describe(configs[std::size_t(i)], mode_name(mode)));
  return out;
}

}  // namespace

EnginePlans engine_plans(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                         std::shared_ptr<const DescriptorSet> graph_descriptors, const PlanSearchOptions& options) {
  EnginePlans result;
  PlanCounts& counts = result.counts;
  std::vector<RawConfig> raw;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<RawConfig> found = heuristics(graph, mode, counts);
    for (RawConfig& r : found) raw.push_back(std::move(r));
  }
  std::vector<EngineConfig> engines;
  for (const RawConfig& r : raw) engines.push_back(r.engine);
  const std::vector<std::size_t> kept = distinct_configs(engines);
  counts.distinct = kept.size();
  for (const std::size_t k : kept) {
    RawConfig& r = raw[k];
    r.engine.modes = engines[k].modes;
    if (result.plans.size() >= options.max_plans) {
      ++counts.beyond_limit;
      continue;
    }
    const bool excluded = std::any_of(r.numerical_notes.begin(), r.numerical_notes.end(), [&](cudnnBackendNumericalNote_t n) {
      return std::find(options.excluded_notes.begin(), options.excluded_notes.end(), n) != options.excluded_notes.end();
    });
    if (excluded) {
      ++counts.excluded_notes;
      continue;
    }
    if (!options.runtime_compilation &&
        std::find(r.behavior_notes.begin(), r.behavior_notes.end(), CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) !=
            r.behavior_notes.end()) {
      ++counts.runtime_compilation;
      continue;
    }
    auto plan = std::make_shared<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle)
        .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, r.config->get());
    if (plan->try_finalize() != CUDNN_STATUS_SUCCESS) {
      ++counts.refused;
      continue;
    }
    std::int64_t workspace = 0, n = 0;
    ROOFBENCH_CUDNN(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                             &n, &workspace));
    if (workspace > options.max_workspace_bytes) {
      ++counts.too_much_workspace;
      continue;
    }
    result.plans.push_back({std::move(plan), r.config, graph_descriptors, r.engine, workspace});
  }
  counts.finalized = result.plans.size();
  result.text = counts.text(options.max_plans);
  return result;
}

void execute(cudnnHandle_t handle, const Descriptor& plan, const Descriptor& pack) {
  ROOFBENCH_CUDNN(cudnnBackendExecute(handle, plan.get(), pack.get()));
}

std::string plan_choice_text(std::span<const EnginePlan> plans, std::span<const case_support::CandidateTiming> timings,
                             std::size_t chosen, int groups, const std::string& counts_text) {
  std::vector<std::string> labels;
  for (const EnginePlan& p : plans) labels.push_back(p.engine.label() + " [" + p.engine.modes + "]");
  return case_support::describe_timings(labels, timings, groups) + "; chose " + plans[chosen].engine.label() +
         " (workspace " + std::to_string(plans[chosen].workspace_bytes) + " B); " + counts_text;
}

PlanChoice fastest_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                        std::shared_ptr<const DescriptorSet> graph_descriptors, const PlanSearchOptions& options,
                        std::span<const std::int64_t> uids, std::span<void* const> pointers,
                        const std::function<void*(std::int64_t bytes)>& workspace, const std::string& what) {
  EnginePlans found = engine_plans(handle, graph, std::move(graph_descriptors), options);
  if (found.plans.empty())
    throw NotApplicable("cuDNN " + std::to_string(cudnnGetVersion()) + " has no engine plan for " + what + " (" +
                        found.text + ")");
  const std::unique_ptr<Descriptor> pack = variant_pack(uids, pointers, workspace(found.most_workspace_bytes()));
  cudaStream_t stream = nullptr;
  ROOFBENCH_CUDNN(cudnnGetStream(handle, &stream));
  case_support::TimingPlan timing;
  timing.require_graph = true;  // the plan serves a graphable case
  const std::vector<case_support::CandidateTiming> timings = case_support::time_each(
      stream, found.plans.size(), [&](std::size_t i) { execute(handle, *found.plans[i].plan, *pack); }, timing);
  std::vector<std::string> labels;
  for (const EnginePlan& p : found.plans) labels.push_back(p.engine.label());
  const std::size_t chosen = case_support::fastest(timings, labels);
  PlanChoice choice;
  choice.chosen = found.plans[chosen];
  choice.timed_ms = timings[chosen].per_launch_ms;
  choice.text = plan_choice_text(found.plans, timings, chosen, timing.groups, found.text);
  return choice;
}

}  // namespace roofbench::cudnn_backend
