#include "convolution.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>

#include "roofbench/case_support/formats.hpp"
#include "roofbench/case_support/launch_timing.hpp"
#include "roofbench/kernels/cuda_conv.hpp"

namespace roofbench::conv {

namespace {
// The unique ids of the backend graph's tensors, whatever the pass makes of them (x or dx, w or dw, y or dy).
enum BackendUid : std::int64_t { kBackendX = 1, kBackendW, kBackendY };

// A pass's backend operation and the names of its attributes, its tensors as x (or dx), w (or dw), y (or dy).
struct OperationAttributes {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t alpha, beta, conv, x, w, y;
};

const OperationAttributes& operation_attributes(Pass pass) {
  static const std::array<OperationAttributes, 3> attributes = {{
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
  }};
  return attributes[std::size_t(pass)];
}
}  // namespace

using kernels::ConvLayout;

using kernels::ConvTensors;
using kernels::Extent4;
using kernels::Index4;
using kernels::Strides4;

BackendPlans backend_plans_from_environment() {
  const char* value = std::getenv("ROOFBENCH_CONV_BACKEND");
  const std::string text = value ? value : "";
  if (text.empty() || text == "on") return BackendPlans::precompiled;
  if (text == "off") return BackendPlans::none;
  if (text == "all") return BackendPlans::all;
  throw Error("conv: ROOFBENCH_CONV_BACKEND must be on, off or all, got '" + text + "'");
}

const char* to_string(Pass pass) {
  switch (pass) {
    case Pass::fwd: return "fwd";
    case Pass::bwd_data: return "bwd_data";
    case Pass::bwd_filter: return "bwd_filter";
  }
  return "?";
}

Pass parse_pass(const std::string& text) {
  for (const Pass pass : kPasses)
    if (text == to_string(pass)) return pass;
  throw Error("conv: pass must be fwd, bwd_data or bwd_filter, got '" + text + "'");
}

const char* to_string(ConvLayout layout) { return layout == ConvLayout::nhwc ? "nhwc" : "nchw"; }

ConvLayout parse_layout(const std::string& text) {
  if (text == "nhwc") return ConvLayout::nhwc;
  if (text == "nchw") return ConvLayout::nchw;
  throw Error("conv: layout must be nhwc or nchw, got '" + text + "'");
}

const std::vector<DataFormat>& data_formats() {
  static const std::vector<DataFormat> formats = {
      {"bf16", Precision::bf16, ElementType::bf16, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_OP_MATH, false, {ConvLayout::nhwc},
       "bf16 tensors, fp32 accumulation, tensor cores"},
      {"fp16", Precision::fp16, ElementType::f16, CUDNN_DATA_HALF, CUDNN_TENSOR_OP_MATH, false, {ConvLayout::nhwc},
       "fp16 tensors, fp32 accumulation, tensor cores"},
      {"tf32", Precision::tf32, ElementType::f32, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, false,
       {ConvLayout::nhwc, ConvLayout::nchw}, "fp32 tensors on tf32 tensor cores (tensor-op math)"},
      {"fp32", Precision::fp32, ElementType::f32, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, true,
       {ConvLayout::nhwc, ConvLayout::nchw}, "pedantic fp32: FMA math only, no tf32"},
  };
  return formats;
}

Convolution::Convolution(const Layer& layer, std::int64_t batch, const DataFormat& format, ConvLayout layout,
                         Implementation implementation, std::vector<Pass> passes)
    : layer_(layer),
      shape_(layer.shape(batch)),
      format_(format),
      layout_(layout),
      implementation_(implementation),
      passes_(std::move(passes)) {
  if (implementation_ != Implementation::cudnn &&
      (format_.precision != Precision::bf16 || layout_ != ConvLayout::nhwc || passes_ != std::vector<Pass>{Pass::fwd}))
    throw NotApplicable("conv: the hand-written implicit-GEMM kernels compute the bf16 NHWC forward pass only");
  if (implementation_ == Implementation::implicit_gemm_wgmma) {
    if (const std::string why = kernels::conv2d_implicit_gemm_wgmma_unsupported(shape_); !why.empty())
      throw NotApplicable(why);
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError();  // no device: not available below
    if (!kernels::conv2d_implicit_gemm_wgmma_available(device))
      throw NotApplicable("conv: the wgmma kernel runs on compute capability 9.0 with sm_90a code in the build");
  }
}

bool Convolution::has(Pass pass) const { return std::find(passes_.begin(), passes_.end(), pass) != passes_.end(); }

double Convolution::pass_bytes(Pass pass) const {
  const std::int64_t input = pass == Pass::bwd_data ? shape_.input_elements() : shape_.input_elements_read();
  return double(case_support::element_bytes(format_.element)) *
         double(input + shape_.filter_elements() + shape_.output_elements());
}

double Convolution::pass_bytes_read(Pass pass) const {
  const std::int64_t written = pass == Pass::fwd        ? shape_.output_elements()
                               : pass == Pass::bwd_data ? shape_.input_elements()
                                                        : shape_.filter_elements();
  return pass_bytes(pass) - double(case_support::element_bytes(format_.element)) * double(written);
}

std::size_t Convolution::workspace_bytes() const {
  std::size_t most = 0;
  for (const auto& choice : choices_)
    if (choice) most = std::max(most, choice->chosen.workspace_bytes);
  return most;
}

void Convolution::allocate(Context& ctx) {
  const std::size_t element = case_support::element_bytes(format_.element);
  auto tensor = [&](std::int64_t elements, BufferRole role) {
    void* data = ctx.alloc(std::size_t(elements) * element, role);
    if (role == BufferRole::input) ctx.fill_random(data, std::size_t(elements), format_.element);
    return data;
  };
  const auto& s = shape_;
  if (has(Pass::fwd) || has(Pass::bwd_filter)) x_ = tensor(s.input_elements(), BufferRole::input);
  if (has(Pass::fwd) || has(Pass::bwd_data)) w_ = tensor(s.filter_elements(), BufferRole::input);
  if (has(Pass::bwd_data) || has(Pass::bwd_filter)) dy_ = tensor(s.output_elements(), BufferRole::input);
  if (has(Pass::fwd)) y_ = tensor(s.output_elements(), BufferRole::output);
  if (has(Pass::bwd_data)) dx_ = tensor(s.input_elements(), BufferRole::output);
  if (has(Pass::bwd_filter)) dw_ = tensor(s.filter_elements(), BufferRole::output);
  if (implementation_ != Implementation::cudnn) return;

  for (const std::int64_t extent : {s.n, s.c, s.h, s.w, s.k, s.r, s.s})
    if (extent > INT_MAX) throw NotApplicable("conv: a dimension exceeds the int cuDNN's 4-d descriptors take");
  const cudnnTensorFormat_t tensor_format = layout_ == ConvLayout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const cudnnDataType_t type = format_.cudnn_type;
  ROOFBENCH_CUDNN(cudnnCreateTensorDescriptor(x_desc_.replace()));
  ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(
      cudnnSetTensor4dDescriptor(x_desc_.get(), tensor_format, type, int(s.n), int(s.c), int(s.h), int(s.w)));
  ROOFBENCH_CUDNN(cudnnCreateTensorDescriptor(y_desc_.replace()));
  ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnSetTensor4dDescriptor(y_desc_.get(), tensor_format, type, int(s.n), int(s.k),
                                                               int(s.out_h()), int(s.out_w())));
  ROOFBENCH_CUDNN(cudnnCreateFilterDescriptor(w_desc_.replace()));
  ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(
      cudnnSetFilter4dDescriptor(w_desc_.get(), type, tensor_format, int(s.k), int(s.c), int(s.r), int(s.s)));
  for (const Pass pass : passes_) {
    ConvolutionDescriptor& desc = conv_desc_[std::size_t(pass)];
    ROOFBENCH_CUDNN(cudnnCreateConvolutionDescriptor(desc.replace()));
    ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnSetConvolution2dDescriptor(desc.get(), int(s.pad), int(s.pad), int(s.stride),
                                                                      int(s.stride), 1, 1, CUDNN_CROSS_CORRELATION,
                                                                      CUDNN_DATA_FLOAT));
    ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnSetConvolutionMathType(desc.get(), format_.math));
  }
  int n = 0, k = 0, ho = 0, wo = 0;
  ROOFBENCH_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv_desc_[std::size_t(passes_.front())].get(), x_desc_.get(),
                                                        w_desc_.get(), &n, &k, &ho, &wo));
  if (n != s.n || k != s.k || ho != s.out_h() || wo != s.out_w())
    throw Error("conv: cuDNN's output size for " + layer_.name + " differs from the reference's");
}

void Convolution::add_tensors_to(case_support::InputCopies& copies) {
  const std::size_t element = case_support::element_bytes(format_.element);
  const std::size_t input = std::size_t(shape_.input_elements()) * element;
  const std::size_t filter = std::size_t(shape_.filter_elements()) * element;
  const std::size_t output = std::size_t(shape_.output_elements()) * element;
  if (x_) copies.add(x_, input, BufferRole::input);
  if (w_) copies.add(w_, filter, BufferRole::input);
  if (dy_) copies.add(dy_, output, BufferRole::input);
  if (y_) copies.add(y_, output, BufferRole::output);
  if (dx_) copies.add(dx_, input, BufferRole::output);
  if (dw_) copies.add(dw_, filter, BufferRole::output);
}

std::size_t Convolution::search_workspace_bytes(cudnnHandle_t handle, std::size_t cap) const {
  std::size_t most = 0;
  auto consider = [&](cudnnStatus_t status, std::size_t bytes) {
    if (status == CUDNN_STATUS_SUCCESS) most = std::max(most, std::min(bytes, cap));
  };
  for (const Pass pass : passes_) {
    const cudnnConvolutionDescriptor_t desc = conv_desc_[std::size_t(pass)].get();
    std::size_t bytes = 0;
    // An algorithm that cannot run this point answers with a status instead of a size: skipped.
    switch (pass) {
      case Pass::fwd:
        for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a)
          consider(cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_.get(), w_desc_.get(), desc, y_desc_.get(),
                                                           cudnnConvolutionFwdAlgo_t(a), &bytes),
                   bytes);
        break;
      case Pass::bwd_data:
        for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a)
          consider(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_desc_.get(), y_desc_.get(), desc,
                                                                x_desc_.get(), cudnnConvolutionBwdDataAlgo_t(a), &bytes),
                   bytes);
        break;
      case Pass::bwd_filter:
        for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a)
          consider(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x_desc_.get(), y_desc_.get(), desc,
                                                                  w_desc_.get(), cudnnConvolutionBwdFilterAlgo_t(a), &bytes),
                   bytes);
        break;
    }
  }
  return most;
}

void Convolution::choose_algorithms(cudnnHandle_t handle, void* workspace, std::size_t workspace_bytes,
                                    AlgorithmSearch search) {
  if (implementation_ != Implementation::cudnn) return;
  const bool find = search == AlgorithmSearch::find;
  for (const Pass pass : passes_) {
    const cudnnConvolutionDescriptor_t desc = conv_desc_[std::size_t(pass)].get();
    const std::string what = layer_.name + " " + to_string(pass) + " " + format_.name + " " + to_string(layout_) +
                             " at N=" + std::to_string(shape_.n);
    int returned = 0;
    auto usable = [&](const auto& results) {
      using Perf = typename std::decay_t<decltype(results)>::value_type;
      return usable_results(std::span<const Perf>(results.data(), std::size_t(returned)), format_.fma_only, what,
                            workspace_bytes);
    };
    SearchResults found;
    switch (pass) {
      case Pass::fwd: {
        std::vector<cudnnConvolutionFwdAlgoPerf_t> results(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
        if (find)
          ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnFindConvolutionForwardAlgorithmEx(
              handle, x_desc_.get(), x_, w_desc_.get(), w_, desc, y_desc_.get(), y_, int(results.size()), &returned,
              results.data(), workspace, workspace_bytes));
        else
          ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnGetConvolutionForwardAlgorithm_v7(
              handle, x_desc_.get(), w_desc_.get(), desc, y_desc_.get(), int(results.size()), &returned, results.data()));
        found = usable(results);
        break;
      }
      case Pass::bwd_data: {
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> results(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
        if (find)
          ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnFindConvolutionBackwardDataAlgorithmEx(
              handle, w_desc_.get(), w_, y_desc_.get(), dy_, desc, x_desc_.get(), dx_, int(results.size()), &returned,
              results.data(), workspace, workspace_bytes));
        else
          ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnGetConvolutionBackwardDataAlgorithm_v7(
              handle, w_desc_.get(), y_desc_.get(), desc, x_desc_.get(), int(results.size()), &returned, results.data()));
        found = usable(results);
        break;
      }
      case Pass::bwd_filter: {
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> results(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
        if (find)
          ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              handle, x_desc_.get(), x_, y_desc_.get(), dy_, desc, w_desc_.get(), dw_, int(results.size()), &returned,
              results.data(), workspace, workspace_bytes));
        else
          ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              handle, x_desc_.get(), y_desc_.get(), desc, w_desc_.get(), int(results.size()), &returned, results.data()));
        found = usable(results);
        break;
      }
    }
    if (find) {
      const cudnn_backend::EnginePlans plans = backend_plans(pass, handle, workspace_bytes);
      for (Candidate& candidate : plan_candidates(plans, format_.math)) found.candidates.push_back(std::move(candidate));
      found.text += "; backend API: " + plans.text;
    }
    AlgorithmChoice choice = find ? time_candidates(pass, handle, workspace, workspace_bytes, found) : choose_first(found);
    ROOFBENCH_CUDNN(cudnnSetConvolutionMathType(desc, choice.chosen.math));
    choices_[std::size_t(pass)] = std::move(choice);
  }
}

AlgorithmChoice Convolution::time_candidates(Pass pass, cudnnHandle_t handle, void* workspace,
                                             std::size_t workspace_bytes, const SearchResults& found) const {
  cudaStream_t stream = nullptr;
  ROOFBENCH_CUDNN(cudnnGetStream(handle, &stream));
  case_support::TimingPlan plan;
  plan.require_graph = true;  // the cases are graphable: the host may replay run() from a CUDA graph
  const std::vector<case_support::CandidateTiming> timings = case_support::time_each(
      stream, found.candidates.size(),
      [&](std::size_t i) {
        const Candidate& candidate = found.candidates[i];
        ROOFBENCH_CUDNN(cudnnSetConvolutionMathType(conv_desc_[std::size_t(pass)].get(), candidate.math));
        enqueue_candidate(pass, candidate, handle, workspace, workspace_bytes);
      },
      plan);
  return choose_timed(found, timings, plan.groups);
}

void Convolution::copy_algorithms(const Convolution& same_shape) {
  for (const Pass pass : passes_) {
    const auto& choice = same_shape.choices_[std::size_t(pass)];
    if (!choice) throw Error("conv: " + layer_.name + " has no " + to_string(pass) + " algorithm to copy");
    ROOFBENCH_CUDNN(cudnnSetConvolutionMathType(conv_desc_[std::size_t(pass)].get(), choice->chosen.math));
    choices_[std::size_t(pass)] = choice;
  }
}

void Convolution::enqueue(Pass pass, cudnnHandle_t handle, void* workspace, std::size_t workspace_bytes,
                          cudaStream_t stream) const {
  if (implementation_ != Implementation::cudnn) {
    const auto launch = implementation_ == Implementation::implicit_gemm ? kernels::launch_conv2d_implicit_gemm_bf16
                                                                         : kernels::launch_conv2d_implicit_gemm_wgmma_bf16;
    launch(static_cast<const __nv_bfloat16*>(x_), static_cast<const __nv_bfloat16*>(w_), static_cast<__nv_bfloat16*>(y_),
           shape_, stream);
    return;
  }
  const auto& choice = choices_[std::size_t(pass)];
  if (!choice) throw Error("conv: " + layer_.name + " " + to_string(pass) + " run before its algorithm was chosen");
  enqueue_candidate(pass, choice->chosen, handle, workspace, workspace_bytes);
}

void Convolution::enqueue_candidate(Pass pass, const Candidate& candidate, cudnnHandle_t handle, void* workspace,
                                    std::size_t workspace_bytes) const {
  if (!candidate.plan) {
    enqueue_algorithm(pass, candidate.algorithm, handle, workspace, workspace_bytes);
    return;
  }
  if (std::size_t(candidate.plan->workspace_bytes) > workspace_bytes)
    throw Error("conv: " + layer_.name + " " + to_string(pass) + "'s backend plan needs more workspace than it was given");
  void* x = x_;
  void* w = w_;
  void* y = y_;
  if (pass == Pass::bwd_data) x = dx_, y = dy_;
  if (pass == Pass::bwd_filter) w = dw_, y = dy_;
  auto& pack = packs_[std::size_t(pass)];
  const std::array<void*, 4> built_for = {x, w, y, workspace};
  if (!pack || pack_pointers_[std::size_t(pass)] != built_for) {
    const std::array<std::int64_t, 3> uids = {kBackendX, kBackendW, kBackendY};
    const std::array<void*, 3> pointers = {x, w, y};
    pack = cudnn_backend::variant_pack(uids, pointers, workspace);
    pack_pointers_[std::size_t(pass)] = built_for;
  }
  cudnn_backend::execute(handle, *candidate.plan->plan, *pack);
}

cudnn_backend::EnginePlans Convolution::backend_plans(Pass pass, cudnnHandle_t handle, std::size_t workspace_bytes) const {
  cudnn_backend::EnginePlans none;
  if (format_.element == ElementType::f32) {
    none.text = "not asked (tf32 and fp32 keep to the legacy API)";
    return none;
  }
  const BackendPlans wanted = backend_plans_from_environment();
  if (wanted == BackendPlans::none) {
    none.text = "not asked (ROOFBENCH_CONV_BACKEND=off)";
    return none;
  }
  const kernels::ConvShape& s = shape_;
  const ConvTensors t = kernels::conv_tensors(s, layout_);
  auto graph = std::make_shared<cudnn_backend::DescriptorSet>();
  cudnn_backend::Descriptor* op_graph = nullptr;
  try {
    auto tensor = [&](std::int64_t uid, const Extent4& e, const Strides4& st) -> cudnn_backend::Descriptor& {
      cudnn_backend::Descriptor& d = graph->make_tensor({uid, format_.cudnn_type, {e.outer, e.channels, e.rows, e.cols},
                                                         {st.outer, st.channel, st.row, st.col}});
      d.finalize("tensor");
      return d;
    };
    cudnn_backend::Descriptor& x = tensor(kBackendX, t.input, t.x);
    cudnn_backend::Descriptor& w = tensor(kBackendW, t.filter, t.w);
    cudnn_backend::Descriptor& y = tensor(kBackendY, t.output, t.y);
    cudnn_backend::Descriptor& conv = graph->make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const std::vector<std::int64_t> pads = {s.pad, s.pad}, strides = {s.stride, s.stride}, dilations = {1, 1};
    const std::int64_t spatial_dims = 2;
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, compute)
        .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, mode)
        .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, spatial_dims)
        .set_array(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilations)
        .set_array(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, strides)
        .set_array(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pads)
        .set_array(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pads)
        .finalize("convolution");
    const float alpha = 1.0f, beta = 0.0f;
    const OperationAttributes& names = operation_attributes(pass);
    cudnn_backend::Descriptor& op = graph->make(names.type);
    op.set(names.alpha, CUDNN_TYPE_FLOAT, alpha)
        .set(names.beta, CUDNN_TYPE_FLOAT, beta)
        .set(names.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, conv.get())
        .set(names.x, CUDNN_TYPE_BACKEND_DESCRIPTOR, x.get())
        .set(names.w, CUDNN_TYPE_BACKEND_DESCRIPTOR, w.get())
        .set(names.y, CUDNN_TYPE_BACKEND_DESCRIPTOR, y.get())
        .finalize("convolution operation");
    op_graph = &graph->make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    const std::vector<cudnnBackendDescriptor_t> ops = {op.get()};
    op_graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle)
        .set_array(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops)
        .finalize("operation graph");
  } catch (const Error& e) {
    none.text = std::string("graph refused: ") + e.what();
    return none;
  }
  cudnn_backend::PlanSearchOptions options;
  options.max_workspace_bytes = std::int64_t(workspace_bytes);
  options.max_plans = kMaxBackendPlans;
  options.excluded_notes = {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION};  // the case promises fp32 accumulation
  options.runtime_compilation = wanted == BackendPlans::all;  // seconds per plan: setup must stay short
  try {
    return cudnn_backend::engine_plans(handle, op_graph->get(), graph, options);
  } catch (const Error& e) {
    none.text = std::string("engine search failed: ") + e.what();
    return none;
  }
}

void Convolution::enqueue_algorithm(Pass pass, int algorithm, cudnnHandle_t handle, void* workspace,
                                    std::size_t workspace_bytes) const {
  const cudnnConvolutionDescriptor_t desc = conv_desc_[std::size_t(pass)].get();
  const float one = 1.0f, zero = 0.0f;  // float scalars for float, half and bf16 data alike
  switch (pass) {
    case Pass::fwd:
      ROOFBENCH_CUDNN(cudnnConvolutionForward(handle, &one, x_desc_.get(), x_, w_desc_.get(), w_, desc,
                                              cudnnConvolutionFwdAlgo_t(algorithm), workspace, workspace_bytes, &zero,
                                              y_desc_.get(), y_));
      break;
    case Pass::bwd_data:
      ROOFBENCH_CUDNN(cudnnConvolutionBackwardData(handle, &one, w_desc_.get(), w_, y_desc_.get(), dy_, desc,
                                                   cudnnConvolutionBwdDataAlgo_t(algorithm), workspace,
                                                   workspace_bytes, &zero, x_desc_.get(), dx_));
      break;
    case Pass::bwd_filter:
      ROOFBENCH_CUDNN(cudnnConvolutionBackwardFilter(handle, &one, x_desc_.get(), x_, y_desc_.get(), dy_, desc,
                                                     cudnnConvolutionBwdFilterAlgo_t(algorithm), workspace,
                                                     workspace_bytes, &zero, w_desc_.get(), dw_));
      break;
  }
}

namespace {

// A device tensor read from the host page by page, each page copied and decoded the first time an
// element of it is read: a forward or backward-data sample touches a few pages of a multi-GiB tensor, a
// backward-filter sample all of them (once, then from the host copy).
class PagedTensor {
 public:
  PagedTensor(Context& ctx, const void* data, ElementType type, std::int64_t count)
      : ctx_(ctx), data_(static_cast<const unsigned char*>(data)), type_(type), count_(count),
        pages_(std::size_t((count + kPage - 1) / kPage)) {
    ctx_.synchronize();
  }
  double operator()(std::int64_t i) {
    std::vector<float>& page = pages_[std::size_t(i / kPage)];
    if (page.empty()) load(i / kPage, page);
    return page[std::size_t(i % kPage)];
  }

 private:
  static constexpr std::int64_t kPage = std::int64_t{1} << 15;
  void load(std::int64_t index, std::vector<float>& page) {
    const std::int64_t first = index * kPage, count = std::min(kPage, count_ - first);
    const std::size_t bytes = case_support::element_bytes(type_);
    raw_.resize(std::size_t(count) * bytes);
    decoded_.resize(std::size_t(count));
    ctx_.copy_to_host(raw_.data(), data_ + std::size_t(first) * bytes, raw_.size());
    case_support::decode(type_, raw_.data(), std::size_t(count), decoded_.data());
    page.assign(decoded_.begin(), decoded_.end());  // exact: bf16, fp16 and fp32 values are floats
  }
  Context& ctx_;
  const unsigned char* data_;
  ElementType type_;
  std::int64_t count_;
  std::vector<std::vector<float>> pages_;
  std::vector<unsigned char> raw_;
  std::vector<double> decoded_;
};

std::string describe(const Index4& p, Pass pass) {
  std::ostringstream out;
  if (pass == Pass::bwd_filter)
    out << "(k " << p.outer << ", c " << p.channel << ", r " << p.row << ", s " << p.col << ")";
  else
    out << "(n " << p.outer << ", c " << p.channel << ", h " << p.row << ", w " << p.col << ")";
  return out.str();
}

}  // namespace

PassCheck Convolution::check(Context& ctx, Pass pass, std::size_t samples, std::uint64_t seed,
                             const case_support::NonfiniteScan& scan) const {
  const ConvTensors t = kernels::conv_tensors(shape_, layout_);
  const ElementType type = format_.element;
  // The pass's two operands as stored, and its output.
  const void* first_data = nullptr;
  const void* second_data = nullptr;
  std::int64_t first_count = 0, second_count = 0;
  const void* out = nullptr;
  Extent4 extent;
  Strides4 strides;
  switch (pass) {
    case Pass::fwd:
      first_data = x_, first_count = shape_.input_elements(), second_data = w_, second_count = shape_.filter_elements();
      out = y_, extent = t.output, strides = t.y;
      break;
    case Pass::bwd_data:
      first_data = dy_, first_count = shape_.output_elements(), second_data = w_, second_count = shape_.filter_elements();
      out = dx_, extent = t.input, strides = t.x;
      break;
    case Pass::bwd_filter:
      first_data = x_, first_count = shape_.input_elements(), second_data = dy_, second_count = shape_.output_elements();
      out = dw_, extent = t.filter, strides = t.w;
      break;
  }
  PagedTensor first(ctx, first_data, type, first_count), second(ctx, second_data, type, second_count);
  auto a = [&first](std::int64_t i) { return first(i); };
  auto b = [&second](std::int64_t i) { return second(i); };
  auto reference = [&](const Index4& p) {
    switch (pass) {
      case Pass::fwd: return kernels::forward_at(shape_, t, a, b, p);
      case Pass::bwd_data: return kernels::backward_data_at(shape_, t, a, b, p);
      case Pass::bwd_filter: return kernels::backward_filter_at(shape_, t, a, b, p);
    }
    return 0.0;
  };

  const std::vector<Index4> points = kernels::spread_samples(extent, samples, seed);
  std::vector<double> got, expected;
  std::size_t worst = 0;
  double worst_error = -1;
  for (const Index4& p : points) {
    got.push_back(
        case_support::fetch(ctx, {out, type}, std::size_t(strides.at(p.outer, p.channel, p.row, p.col)), 1)[0]);
    expected.push_back(reference(p));
    const double error = std::abs(got.back() - expected.back());
    const double ranked = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
    if (ranked > worst_error) worst_error = ranked, worst = got.size() - 1;
  }
  PassCheck result;
  result.rel_l2_error = relative_l2_error(got.data(), expected.data(), got.size());
  result.nonfinite = scan.count(ctx, {out, type}, std::size_t(extent.elements()));
  std::ostringstream detail;
  detail << layer_.name << " " << to_string(pass) << ": compared " << points.size() << " of " << extent.elements()
         << " outputs (corners, borders, spread over batch and channels) with fp64 sums of the stored inputs";
  if (!points.empty())
    detail << "; worst at " << describe(points[worst], pass) << ": out " << got[worst] << ", ref " << expected[worst];
  if (result.nonfinite > 0) {
    result.rel_l2_error = std::numeric_limits<double>::quiet_NaN();
    detail << "; " << result.nonfinite << " outputs are NaN or infinite (left unwritten from the poison, or computed)";
  }
  result.detail = detail.str();
  return result;
}

}  // namespace roofbench::conv
