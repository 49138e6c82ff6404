#include "cases.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "roofbench/kernels/cuda_conv.hpp"
#include "roofbench/cuda.hpp"

namespace roofbench::conv {
namespace {

Implementation parse_implementation(const std::string& text) {
  if (text == "cudnn") return Implementation::cudnn;
  if (text == "implicit_gemm") return Implementation::implicit_gemm;
  if (text == "implicit_gemm_wgmma") return Implementation::implicit_gemm_wgmma;
  throw Error("conv: impl must be cudnn, implicit_gemm or implicit_gemm_wgmma, got '" + text + "'");
}

std::vector<Pass> passes_of(Pass pass) { return {pass}; }

// The `implementation` fact of a hand-written kernel.
const char* hand_written(Implementation implementation) {
  return implementation == Implementation::implicit_gemm
             ? "hand-written implicit GEMM on WMMA (kernels/cuda_conv)"
             : "hand-written implicit GEMM on wgmma (kernels/cuda_conv, sm_90a)";
}

constexpr const char* kTimedChoice =
    ", and for bf16 and fp16 the backend API's engine plans (heuristics modes A, B and fallback) unless "
    "cudnn_backend_plans says off, then every "
    "qualifying candidate of both timed by roofbench (CUDA-graph groups of back-to-back launches after a warm-up, "
    "median group), the fastest taken";
constexpr const char* kHeuristicChoice = ", first result that fits";

// Which cuDNN ran: the version loaded (cudnnGetVersion), the headers built against, and the folders its
// libraries came from.
// Which backend engine plans were candidates (ROOFBENCH_CONV_BACKEND): it changes what runs, so it is said.
std::string backend_plans_fact() {
  switch (backend_plans_from_environment()) {
    case BackendPlans::none: return "off (ROOFBENCH_CONV_BACKEND=off): Find's algorithms only";
    case BackendPlans::all: return "all (ROOFBENCH_CONV_BACKEND=all): also engines compiled at run time";
    case BackendPlans::precompiled: break;
  }
  return "on: precompiled engines for bf16 and fp16";
}

std::vector<Figure> cudnn_facts() {
  return {{"implementation", "cuDNN " + cudnn_version()},
          {"cudnn_headers", cudnn_header_version()},
          {"cudnn_libraries", cudnn_loaded_from()},
          {"cudnn_backend_plans", backend_plans_fact()}};
}

// The worst of several passes' checks, as one Check: a single bad convolution must not hide in an L2
// norm pooled with 52 good ones.
struct WorstCheck {
  double error = 0;
  std::string detail;
  std::uint64_t nonfinite = 0;
  std::size_t checked = 0;
  void add(const PassCheck& c) {
    ++checked;
    nonfinite += c.nonfinite;
    const double ranked = std::isnan(c.rel_l2_error) ? std::numeric_limits<double>::infinity() : c.rel_l2_error;
    if (checked == 1 || ranked > (std::isnan(error) ? std::numeric_limits<double>::infinity() : error)) {
      error = c.rel_l2_error;
      detail = c.detail;
    }
  }
  Check result(const std::string& prefix, std::vector<Figure>& figures) const {
    Check check;
    check.rel_l2_error = error;
    check.detail = prefix + detail;
    figures = {{"nonfinite_outputs", double(nonfinite)}, {"passes_checked", double(checked)}};
    return check;
  }
};

}  // namespace

// ---- one convolution ----

LayerCase::LayerCase(const Params& p, const DataFormat& format)
    : pass_(parse_pass(p.str("pass"))),
      implementation_(parse_implementation(p.str("impl"))),
      conv_(resnet50_layer(p.str("layer")), p.integer("n"), format, parse_layout(p.str("layout")), implementation_,
            passes_of(pass_)) {}

void LayerCase::setup(Context& ctx) {
  conv_.allocate(ctx);
  conv_.add_tensors_to(copies_);
  scan_.setup(ctx);
  if (implementation_ != Implementation::cudnn) return;
  const cudnnHandle_t handle = cudnn_handle(ctx);
  workspace_bytes_ = std::max(kSearchWorkspaceFloor, conv_.search_workspace_bytes(handle, kSearchWorkspaceCap));
  if (workspace_bytes_ > 0) workspace_ = ctx.alloc(workspace_bytes_, BufferRole::scratch);
  search_ = algorithm_search_from_environment();
  conv_.choose_algorithms(handle, workspace_, workspace_bytes_, search_);
}

void LayerCase::run(Context& ctx) {
  const cudnnHandle_t handle = implementation_ == Implementation::cudnn ? cudnn_handle(ctx) : nullptr;
  conv_.enqueue(pass_, handle, workspace_, workspace_bytes_, cuda::stream(ctx));
}

Work LayerCase::work() const {
  return {.flops = conv_.shape().flops(),
          .bytes = conv_.pass_bytes(pass_),
          .bytes_read = conv_.pass_bytes_read(pass_),
          .items = double(conv_.shape().n),
          .item_name = "images"};
}

Check LayerCase::check(Context& ctx) {
  const PassCheck c = conv_.check(ctx, pass_, kLayerSamples.of(pass_), ctx.seed(), scan_);
  WorstCheck worst;
  worst.add(c);
  return worst.result("", gate_figures_);
}

// The algorithm's figures, the gate's, then the texts that say how the point ran.
std::vector<Figure> LayerCase::figures() const {
  std::vector<Figure> figures;
  if (const auto& choice = conv_.choice(pass_)) {
    figures.push_back({"workspace_bytes", double(choice->chosen.workspace_bytes)});
    figures.push_back({"search_workspace_bytes", double(workspace_bytes_)});
    if (!choice->chosen.plan) figures.push_back({"cudnn_search_ms", double(choice->chosen.search_ms)});  // Find's time
    if (choice->timed_ms > 0) figures.push_back({"algorithm_timed_ms", choice->timed_ms});
  }
  figures.insert(figures.end(), gate_figures_.begin(), gate_figures_.end());
  for (Figure& text : texts()) figures.push_back(std::move(text));
  return figures;
}

std::vector<Figure> LayerCase::texts() const {
  if (implementation_ != Implementation::cudnn)
    return {{"implementation", hand_written(implementation_)},
            {"algorithm", implementation_ == Implementation::implicit_gemm
                              ? kernels::conv2d_implicit_gemm_bf16_variant(conv_.shape())
                              : kernels::conv2d_implicit_gemm_wgmma_bf16_variant(conv_.shape())}};
  std::vector<Figure> facts = cudnn_facts();
  if (const auto& choice = conv_.choice(pass_)) {
    facts.push_back({"cudnn_api", choice->chosen.plan ? "backend (cudnnBackendExecute of an engine plan)"
                                                      : "legacy (cudnnConvolution* with an algorithm enum)"});
    facts.push_back({"algorithm", choice->chosen.plan ? choice->chosen.label() : choice->chosen.name});
    if (!choice->chosen.plan) facts.push_back({"math_type", math_type_name(choice->chosen.math)});
    facts.push_back({"algorithm_search", std::string(search_call(search_, int(pass_))) +
                                             (search_ == AlgorithmSearch::find ? kTimedChoice : kHeuristicChoice)});
    facts.push_back({"search_results", choice->search_results});
  }
  return facts;
}

// ---- the network ----

NetworkCase::NetworkCase(const Params& p, bool training)
    : training_(training),
      implementation_(p.has("impl") ? parse_implementation(p.str("impl")) : Implementation::cudnn),
      batch_(p.integer("n")) {
  const DataFormat& bf16 = data_formats().front();
  const auto& layers = resnet50_layers();
  for (std::size_t i = 0; i < resnet50_network().size(); ++i) {
    const std::size_t layer = resnet50_network()[i];
    std::vector<Pass> passes{Pass::fwd};
    if (training_) {
      // The stem's input is the image: a training step needs no gradient for it.
      if (i > 0) passes.push_back(Pass::bwd_data);
      passes.push_back(Pass::bwd_filter);
    }
    convs_.push_back(std::make_unique<Convolution>(layers[layer], batch_, bf16, kernels::ConvLayout::nhwc,
                                                   implementation_, std::move(passes)));
  }
}

void NetworkCase::setup(Context& ctx) {
  for (auto& conv : convs_) conv->allocate(ctx);
  scan_.setup(ctx);
  if (implementation_ != Implementation::cudnn) return;
  const cudnnHandle_t handle = cudnn_handle(ctx);
  search_ = algorithm_search_from_environment();
  // One search per distinct layer (and set of passes: the stem has no backward-data pass), on its first
  // occurrence's tensors; one workspace for the whole sequence, which runs on one stream.
  std::map<std::pair<std::string, std::size_t>, const Convolution*> searched;
  workspace_bytes_ = kSearchWorkspaceFloor;
  for (const auto& conv : convs_)
    workspace_bytes_ = std::max(workspace_bytes_, conv->search_workspace_bytes(handle, kSearchWorkspaceCap));
  if (workspace_bytes_ > 0) workspace_ = ctx.alloc(workspace_bytes_, BufferRole::scratch);
  for (const auto& conv : convs_) {
    const auto key = std::pair{conv->layer().name, std::size_t(conv->has(Pass::bwd_data))};
    if (auto it = searched.find(key); it != searched.end()) {
      conv->copy_algorithms(*it->second);
    } else {
      conv->choose_algorithms(handle, workspace_, workspace_bytes_, search_);
      searched.emplace(key, conv.get());
    }
  }
}

void NetworkCase::run(Context& ctx) {
  const cudnnHandle_t handle = implementation_ == Implementation::cudnn ? cudnn_handle(ctx) : nullptr;
  const cudaStream_t stream = cuda::stream(ctx);
  for (const auto& conv : convs_) conv->enqueue(Pass::fwd, handle, workspace_, workspace_bytes_, stream);
  if (!training_) return;
  for (auto it = convs_.rbegin(); it != convs_.rend(); ++it)
    for (const Pass pass : {Pass::bwd_data, Pass::bwd_filter})
      if ((*it)->has(pass)) (*it)->enqueue(pass, handle, workspace_, workspace_bytes_, stream);
}

Work NetworkCase::work() const {
  Work work{.flops = 0, .bytes = 0, .items = double(batch_), .item_name = "images"};
  for (const auto& conv : convs_)
    for (const Pass pass : kPasses)
      if (conv->has(pass)) {
        work.flops += conv->shape().flops();
        work.bytes += conv->pass_bytes(pass);
        work.bytes_read += conv->pass_bytes_read(pass);
      }
  return work;
}

Check NetworkCase::check(Context& ctx) {
  WorstCheck worst;
  for (std::size_t i = 0; i < convs_.size(); ++i)
    for (const Pass pass : kPasses)
      if (convs_[i]->has(pass))
        worst.add(convs_[i]->check(ctx, pass, kNetworkSamples.of(pass), ctx.seed() + i, scan_));
  return worst.result("worst of " + std::to_string(worst.checked) + " checked passes of the " +
                          std::to_string(convs_.size()) + " convolutions: ",
                      gate_figures_);
}

// The workspace figures (cuDNN only), the gate's, then the texts that say how the network ran.
std::vector<Figure> NetworkCase::figures() const {
  std::vector<Figure> figures;
  if (implementation_ == Implementation::cudnn) {
    std::size_t chosen = 0;
    for (const auto& conv : convs_) chosen = std::max(chosen, conv->workspace_bytes());
    figures = {{"workspace_bytes", double(chosen)}, {"search_workspace_bytes", double(workspace_bytes_)},
               {"convolutions", double(convs_.size())}};
  }
  figures.insert(figures.end(), gate_figures_.begin(), gate_figures_.end());
  for (Figure& text : texts()) figures.push_back(std::move(text));
  return figures;
}

std::vector<Figure> NetworkCase::texts() const {
  if (implementation_ != Implementation::cudnn) return {{"implementation", hand_written(implementation_)}};
  // layer pass: algorithm/math, once per distinct layer, in network order.
  std::ostringstream algorithms;
  std::map<std::string, bool> seen;
  for (const auto& conv : convs_) {
    if (seen[conv->layer().name]) continue;
    seen[conv->layer().name] = true;
    for (const Pass pass : kPasses)
      if (const auto& choice = conv->choice(pass))
        algorithms << (algorithms.tellp() > 0 ? "; " : "") << conv->layer().name << " " << to_string(pass) << ": "
                   << choice->chosen.label();
  }
  std::vector<Figure> facts = cudnn_facts();
  facts.push_back({"algorithm_search", std::string(search_ == AlgorithmSearch::find ? "cudnnFind*AlgorithmEx"
                                                                                    : "cudnnGetConvolution*Algorithm_v7") +
                                           " once per distinct layer" +
                                           (search_ == AlgorithmSearch::find ? kTimedChoice : kHeuristicChoice)});
  facts.push_back({"algorithms", algorithms.str()});
  return facts;
}

// ---- the plugin ----

void describe(Plugin& plugin) {
  plugin.name = "conv";
  plugin.description =
      "ResNet-50 v1.5's convolutions through cuDNN (all 23 shapes, three passes, four precisions) beside "
      "hand-written implicit-GEMM kernels (WMMA; wgmma on Hopper), and the whole network's convolutions in sequence";
  const Axis batch = Axis::ints("n", {1, 8, 32, 128, 256});
  for (const DataFormat& format : data_formats()) {
    CaseSpec spec;
    spec.name = std::string("conv_") + format.name;
    spec.description = std::string("one ResNet-50 convolution per layer, pass and batch: ") + format.description +
                       "; cuDNN's fastest algorithm by its own search" +
                       (format.precision == Precision::bf16 ? ", or a hand-written kernel (forward)" : "");
    std::vector<std::string> layouts;
    for (const auto layout : format.layouts) layouts.push_back(to_string(layout));
    std::vector<std::string> implementations{"cudnn"};
    if (format.precision == Precision::bf16)
      implementations.insert(implementations.end(), {"implicit_gemm", "implicit_gemm_wgmma"});
    spec.axes = {Axis::strings("layer", resnet50_layer_names()), Axis::strings("pass", {"fwd", "bwd_data", "bwd_filter"}),
                 Axis::strings("layout", layouts), Axis::strings("impl", implementations), batch};
    spec.device = DeviceNeed::gpu();
    spec.precision = format.precision;
    spec.sweep_axis = "n";
    spec.make = [&format](const Params& p) { return std::make_unique<LayerCase>(p, format); };
    plugin.add(std::move(spec));
  }
  CaseSpec network;
  network.name = "resnet50";
  network.description =
      "the 53 convolutions of ResNet-50's forward pass in network order, bf16 NHWC (convolutions only: no batch "
      "norm, ReLU, pooling or classifier)";
  network.axes = {Axis::strings("impl", {"cudnn", "implicit_gemm", "implicit_gemm_wgmma"}), batch};
  network.device = DeviceNeed::gpu();
  network.precision = Precision::bf16;
  network.sweep_axis = "n";
  network.make = [](const Params& p) { return std::make_unique<NetworkCase>(p, false); };
  plugin.add(network);

  CaseSpec training = network;
  training.name = "resnet50_train";
  training.description =
      "the convolutions of a ResNet-50 training step, bf16 NHWC: the 53 forward, then in reverse order each one's "
      "backward data (not the stem's) and backward filter pass";
  training.axes = {batch};
  training.make = [](const Params& p) { return std::make_unique<NetworkCase>(p, true); };
  // Past the host's default: at N=256 the gate alone took 40 s on the H200 (the backward-filter
  // reference reads whole tensors), before the algorithm search and timing of each layer and 5 s of sampling.
  training.timeout_s = 240;
  plugin.add(training);
}

}  // namespace roofbench::conv
