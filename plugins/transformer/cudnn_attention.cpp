#include "cudnn_attention.hpp"

#include <cudnn.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "roofbench/cudnn_backend/engine_plans.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/cudnn_check.hpp"

namespace roofbench::transformer {

using cudnn_backend::Descriptor;

namespace {

// Engine plans finalized and timed at most: the attention graph's engines compile at finalize, which
// costs setup time per plan.
constexpr std::size_t kMaxTimedPlans = 4;

}  // namespace

struct CudnnAttention::State {
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<cudnn_backend::DescriptorSet> graph = std::make_shared<cudnn_backend::DescriptorSet>();
  std::optional<cudnn_backend::EnginePlan> plan;  // keeps the graph's descriptors alive too
  void* workspace = nullptr;
  void* stats = nullptr;
  float scale = 1, negative_infinity = -std::numeric_limits<float>::infinity();
  bool masked = false;
  // The variant pack of the last run's pointers: built once, not on every run.
  std::unique_ptr<Descriptor> pack;
  std::vector<void*> pack_pointers;

  Descriptor& make(cudnnBackendDescriptorType_t type) { return graph->make(type); }
  // The unique ids and data pointers of a run on these tensors.
  std::pair<std::vector<std::int64_t>, std::vector<void*>> variant(const void* q, const void* k, const void* v, void* o);
};

namespace {

enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kNegativeInfinity, kFirstVirtual = 100 };

}  // namespace

std::pair<std::vector<std::int64_t>, std::vector<void*>> CudnnAttention::State::variant(const void* q, const void* k,
                                                                                      const void* v, void* o) {
  std::vector<std::int64_t> uids = {kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> pointers = {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o, stats, &scale};
  if (masked) {
    uids.push_back(kNegativeInfinity);
    pointers.push_back(&negative_infinity);
  }
  return {std::move(uids), std::move(pointers)};
}

CudnnAttention::~CudnnAttention() {
  if (state_) {
    if (state_->handle) (void)cudnnDestroy(state_->handle);
    delete state_;
  }
}

void CudnnAttention::destroy() {
  if (!state_) return;
  State* s = std::exchange(state_, nullptr);
  s->pack.reset();
  s->plan.reset();
  s->graph.reset();
  const cudnnStatus_t status = s->handle ? cudnnDestroy(s->handle) : CUDNN_STATUS_SUCCESS;
  delete s;
  if (status != CUDNN_STATUS_SUCCESS)
    throw_cudnn_error(status, "cudnnDestroy", __FILE__, __LINE__, CudnnUnsupported::is_error);
}

void CudnnAttention::build(kernels::AttentionType type, const kernels::AttentionShape& shape, Context& ctx,
                           const void* q_data, const void* k_data, const void* v_data, void* o_data) {
  state_ = new State;
  State& s = *state_;
  ROOFBENCH_CUDNN(cudnnCreate(&s.handle));
  const std::int64_t b = shape.batch, h = shape.heads, sq = shape.q_len, skv = shape.kv_len, d = shape.head_dim;
  const cudnnDataType_t io = type == kernels::AttentionType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  s.scale = float(1.0 / std::sqrt(double(d)));
  if (cudnnGetVersion() < 91000) s.negative_infinity = std::numeric_limits<float>::lowest();
  std::int64_t next_virtual = kFirstVirtual;

  auto tensor = [&](std::int64_t uid, cudnnDataType_t data_type, std::vector<std::int64_t> dims,
                    std::vector<std::int64_t> strides, bool is_virtual, bool by_value = false) -> Descriptor& {
    Descriptor& t = s.graph->make_tensor({uid, data_type, std::move(dims), std::move(strides), is_virtual, by_value});
    t.finalize("tensor");
    return t;
  };
  const std::vector<std::int64_t> scores_dims = {b, h, sq, skv}, scores_strides = {h * sq * skv, sq * skv, skv, 1};
  const std::vector<std::int64_t> row_dims = {b, h, sq, 1}, row_strides = {h * sq, sq, 1, 1};
  auto scores = [&](cudnnDataType_t data_type = CUDNN_DATA_FLOAT) -> Descriptor& {
    return tensor(next_virtual++, data_type, scores_dims, scores_strides, true);
  };
  auto per_row = [&]() -> Descriptor& { return tensor(next_virtual++, f32, row_dims, row_strides, true); };

  std::vector<cudnnBackendDescriptor_t> ops;
  auto matmul = [&](Descriptor& a, Descriptor& bm, Descriptor& c) {
    Descriptor& desc = s.make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, f32).finalize("matmul descriptor");
    Descriptor& op = s.make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, a.get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, bm.get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, c.get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get())
        .finalize("matmul");
    ops.push_back(op.get());
  };
  auto pointwise = [&](cudnnPointwiseMode_t mode, Descriptor& x, Descriptor* bd, Descriptor& y, Descriptor* t = nullptr,
                       cudnnDataType_t precision = CUDNN_DATA_FLOAT, std::int64_t axis = -1) {
    Descriptor& desc = s.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, precision);
    if (axis >= 0) desc.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
    desc.finalize("pointwise descriptor");
    Descriptor& op = s.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get())
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x.get());
    if (bd) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, bd->get());
    if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, t->get());
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y.get()).finalize("pointwise");
    ops.push_back(op.get());
  };
  auto reduction = [&](cudnnReduceTensorOp_t mode, Descriptor& x, Descriptor& y) {
    Descriptor& desc = s.make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, f32)
        .finalize("reduction descriptor");
    Descriptor& op = s.make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x.get())
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y.get())
        .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get())
        .finalize("reduction");
    ops.push_back(op.get());
  };

  try {
    Descriptor& q = tensor(kQ, io, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, false);
    Descriptor& k_t = tensor(kK, io, {b, h, d, skv}, {h * skv * d, skv * d, 1, d}, false);  // K read as K^T
    Descriptor& v = tensor(kV, io, {b, h, skv, d}, {h * skv * d, skv * d, d, 1}, false);
    Descriptor& o = tensor(kO, io, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, false);
    Descriptor& stats = tensor(kStats, f32, row_dims, row_strides, false);
    Descriptor& scale = tensor(kScale, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);

    Descriptor& raw = scores();
    matmul(q, k_t, raw);
    Descriptor* last = &scores();
    pointwise(CUDNN_POINTWISE_MUL, raw, &scale, *last);
    if (shape.causal && sq > 1) {
      Descriptor& negative_infinity = tensor(kNegativeInfinity, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
      Descriptor& row = scores(CUDNN_DATA_INT32);
      Descriptor& col = scores(CUDNN_DATA_INT32);
      Descriptor& keep = scores(CUDNN_DATA_BOOLEAN);
      Descriptor& masked = scores();
      pointwise(CUDNN_POINTWISE_GEN_INDEX, *last, nullptr, row, nullptr, f32, 2);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, *last, nullptr, col, nullptr, f32, 3);
      pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, keep, nullptr, CUDNN_DATA_BOOLEAN);
      pointwise(CUDNN_POINTWISE_BINARY_SELECT, *last, &negative_infinity, masked, &keep);
      last = &masked;
      s.masked = true;
    }
    Descriptor& max = per_row();
    reduction(CUDNN_REDUCE_TENSOR_MAX, *last, max);
    Descriptor& shifted = scores();
    pointwise(CUDNN_POINTWISE_SUB, *last, &max, shifted);
    Descriptor& exponentials = scores();
    pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exponentials);
    Descriptor& sum = per_row();
    reduction(CUDNN_REDUCE_TENSOR_ADD, exponentials, sum);
    Descriptor& log_sum = per_row();
    pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, log_sum);
    pointwise(CUDNN_POINTWISE_ADD, max, &log_sum, stats);
    Descriptor& probabilities = scores(io);  // the second matmul takes P in the inputs' type
    pointwise(CUDNN_POINTWISE_DIV, exponentials, &sum, probabilities);
    matmul(probabilities, v, o);
  } catch (const Error& e) {
    throw NotApplicable(std::string("cuDNN refused the attention graph's operations: ") + e.what());
  }

  Descriptor& graph = s.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, s.handle)
      .set_array(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops);
  if (cudnnBackendFinalize(graph.get()) != CUDNN_STATUS_SUCCESS)
    throw NotApplicable("cuDNN " + std::to_string(cudnnGetVersion()) +
                        " refused the attention graph: " + cudnn_status_message(CUDNN_STATUS_NOT_SUPPORTED));

  // The timed search runs every plan on the case's own random tensors (all-zero ones would time a
  // uniform softmax at low power), with the stats and scalars the runs use.
  s.stats = ctx.alloc(std::size_t(b * h * sq) * sizeof(float), BufferRole::scratch);
  const auto [uids, pointers] = s.variant(q_data, k_data, v_data, o_data);
  ROOFBENCH_CUDNN(cudnnSetStream(s.handle, cuda::stream(ctx)));
  cudnn_backend::PlanSearchOptions options;
  options.max_plans = kMaxTimedPlans;
  cudnn_backend::PlanChoice choice = cudnn_backend::fastest_plan(
      s.handle, graph.get(), s.graph, options, uids, pointers,
      [&](std::int64_t bytes) {
        if (bytes > 0) s.workspace = ctx.alloc(std::size_t(bytes), BufferRole::scratch);
        return s.workspace;
      },
      "the attention graph");
  const std::int64_t workspace_bytes = choice.chosen.workspace_bytes;
  facts_.push_back({"cudnn_version", std::to_string(cudnnGetVersion())});
  facts_.push_back({"cudnn_engine", choice.chosen.engine.label() + " (heuristics " + choice.chosen.engine.modes + ")"});
  facts_.push_back({"engine_search", choice.text});
  s.plan = std::move(choice.chosen);
  facts_.push_back({"cudnn_workspace_bytes", std::to_string(workspace_bytes)});
}

void CudnnAttention::run(cudaStream_t stream, const void* q, const void* k, const void* v, void* o) {
  State& s = *state_;
  ROOFBENCH_CUDNN(cudnnSetStream(s.handle, stream));
  auto [uids, pointers] = s.variant(q, k, v, o);
  if (!s.pack || pointers != s.pack_pointers) {
    s.pack = cudnn_backend::variant_pack(uids, pointers, s.workspace);
    s.pack_pointers = std::move(pointers);
  }
  cudnn_backend::execute(s.handle, *s.plan->plan, *s.pack);
}

}  // namespace roofbench::transformer
