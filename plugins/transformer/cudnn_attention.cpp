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

namespace {

// The attention's operation graph on a State's descriptors (which own them): its tensors, then its
// operations in order, each finalized as it is made.
class AttentionGraph {
 public:
  AttentionGraph(CudnnAttention::State& s, const kernels::AttentionShape& shape, cudnnDataType_t io)
      : s_(s), shape_(shape), io_(io),
        scores_dims_{shape.batch, shape.heads, shape.q_len, shape.kv_len},
        scores_strides_{shape.heads * shape.q_len * shape.kv_len, shape.q_len * shape.kv_len, shape.kv_len, 1},
        row_dims_{shape.batch, shape.heads, shape.q_len, 1},
        row_strides_{shape.heads * shape.q_len, shape.q_len, 1, 1} {}

  // S = Q K^T scaled, the causal mask where asked, the softmax's max and sum (their log-sum-exp the stats),
  // P, and O = P V. Throws Error where cuDNN refuses an operation.
  void add_forward();
  // The finalized operation graph; NotApplicable where cuDNN refuses it.
  Descriptor& operation_graph();

 private:
  Descriptor& tensor(std::int64_t uid, cudnnDataType_t data_type, std::vector<std::int64_t> dims,
                     std::vector<std::int64_t> strides, bool is_virtual, bool by_value = false) {
    Descriptor& t = s_.graph->make_tensor({uid, data_type, std::move(dims), std::move(strides), is_virtual, by_value});
    t.finalize("tensor");
    return t;
  }
  Descriptor& scores(cudnnDataType_t data_type = CUDNN_DATA_FLOAT) {
    return tensor(next_virtual_++, data_type, scores_dims_, scores_strides_, true);
  }
  Descriptor& per_row() { return tensor(next_virtual_++, CUDNN_DATA_FLOAT, row_dims_, row_strides_, true); }
  void matmul(Descriptor& a, Descriptor& b, Descriptor& c);
  void pointwise(cudnnPointwiseMode_t mode, Descriptor& x, Descriptor* b, Descriptor& y, Descriptor* t = nullptr,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT, std::int64_t axis = -1);
  void reduction(cudnnReduceTensorOp_t mode, Descriptor& x, Descriptor& y);
  // The scores with the positions past each row's diagonal replaced by minus infinity.
  Descriptor& causal_mask(Descriptor& scaled);

  CudnnAttention::State& s_;
  const kernels::AttentionShape& shape_;
  cudnnDataType_t io_;
  std::vector<std::int64_t> scores_dims_, scores_strides_, row_dims_, row_strides_;
  std::int64_t next_virtual_ = kFirstVirtual;
  std::vector<cudnnBackendDescriptor_t> ops_;
};

void AttentionGraph::matmul(Descriptor& a, Descriptor& b, Descriptor& c) {
  Descriptor& desc = s_.make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT).finalize("matmul descriptor");
  Descriptor& op = s_.make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, a.get())
      .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b.get())
      .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, c.get())
      .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get())
      .finalize("matmul");
  ops_.push_back(op.get());
}

void AttentionGraph::pointwise(cudnnPointwiseMode_t mode, Descriptor& x, Descriptor* b, Descriptor& y, Descriptor* t,
                               cudnnDataType_t precision, std::int64_t axis) {
  Descriptor& desc = s_.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, precision);
  if (axis >= 0) desc.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
  desc.finalize("pointwise descriptor");
  Descriptor& op = s_.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get())
      .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x.get());
  if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b->get());
  if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, t->get());
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y.get()).finalize("pointwise");
  ops_.push_back(op.get());
}

void AttentionGraph::reduction(cudnnReduceTensorOp_t mode, Descriptor& x, Descriptor& y) {
  Descriptor& desc = s_.make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT)
      .finalize("reduction descriptor");
  Descriptor& op = s_.make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, x.get())
      .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y.get())
      .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get())
      .finalize("reduction");
  ops_.push_back(op.get());
}

Descriptor& AttentionGraph::causal_mask(Descriptor& scaled) {
  Descriptor& negative_infinity = tensor(kNegativeInfinity, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  Descriptor& row = scores(CUDNN_DATA_INT32);
  Descriptor& col = scores(CUDNN_DATA_INT32);
  Descriptor& keep = scores(CUDNN_DATA_BOOLEAN);
  Descriptor& masked = scores();
  pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, row, nullptr, CUDNN_DATA_FLOAT, 2);
  pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, col, nullptr, CUDNN_DATA_FLOAT, 3);
  pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, keep, nullptr, CUDNN_DATA_BOOLEAN);
  pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, &negative_infinity, masked, &keep);
  s_.masked = true;
  return masked;
}

void AttentionGraph::add_forward() {
  const std::int64_t b = shape_.batch, h = shape_.heads, sq = shape_.q_len, skv = shape_.kv_len, d = shape_.head_dim;
  Descriptor& q = tensor(kQ, io_, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, false);
  Descriptor& k_t = tensor(kK, io_, {b, h, d, skv}, {h * skv * d, skv * d, 1, d}, false);  // K read as K^T
  Descriptor& v = tensor(kV, io_, {b, h, skv, d}, {h * skv * d, skv * d, d, 1}, false);
  Descriptor& o = tensor(kO, io_, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, false);
  Descriptor& stats = tensor(kStats, CUDNN_DATA_FLOAT, row_dims_, row_strides_, false);
  Descriptor& scale = tensor(kScale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);

  Descriptor& raw = scores();
  matmul(q, k_t, raw);
  Descriptor* last = &scores();
  pointwise(CUDNN_POINTWISE_MUL, raw, &scale, *last);
  if (shape_.causal && sq > 1) last = &causal_mask(*last);
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
  Descriptor& probabilities = scores(io_);  // the second matmul takes P in the inputs' type
  pointwise(CUDNN_POINTWISE_DIV, exponentials, &sum, probabilities);
  matmul(probabilities, v, o);
}

Descriptor& AttentionGraph::operation_graph() {
  Descriptor& graph = s_.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, s_.handle)
      .set_array(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_);
  if (cudnnBackendFinalize(graph.get()) != CUDNN_STATUS_SUCCESS)
    throw NotApplicable("cuDNN " + std::to_string(cudnnGetVersion()) +
                        " refused the attention graph: " + cudnn_status_message(CUDNN_STATUS_NOT_SUPPORTED));
  return graph;
}

// The case's tensors, on which the plans are timed.
struct AttentionTensors {
  const void *q, *k, *v;
  void* o;
};

// The fastest of the graph's engine plans, timed on the case's own random tensors (all-zero ones would time a
// uniform softmax at low power) with the stats and scalars the runs use, kept in `s`, and named in `facts`.
void choose_plan(CudnnAttention::State& s, Descriptor& graph, Context& ctx, const kernels::AttentionShape& shape,
                 const AttentionTensors& tensors, std::vector<Figure>& facts) {
  s.stats = ctx.alloc(std::size_t(shape.batch * shape.heads * shape.q_len) * sizeof(float), BufferRole::scratch);
  const auto [uids, pointers] = s.variant(tensors.q, tensors.k, tensors.v, tensors.o);
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
  facts.push_back({"cudnn_version", std::to_string(cudnnGetVersion())});
  facts.push_back({"cudnn_engine", choice.chosen.engine.label() + " (heuristics " + choice.chosen.engine.modes + ")"});
  facts.push_back({"engine_search", choice.text});
  facts.push_back({"cudnn_workspace_bytes", std::to_string(choice.chosen.workspace_bytes)});
  s.plan = std::move(choice.chosen);
}

}  // namespace

void CudnnAttention::build(kernels::AttentionType type, const kernels::AttentionShape& shape, Context& ctx,
                           const void* q_data, const void* k_data, const void* v_data, void* o_data) {
  state_ = new State;
  State& s = *state_;
  ROOFBENCH_CUDNN(cudnnCreate(&s.handle));
  s.scale = float(1.0 / std::sqrt(double(shape.head_dim)));
  if (cudnnGetVersion() < 91000) s.negative_infinity = std::numeric_limits<float>::lowest();
  AttentionGraph graph(s, shape, type == kernels::AttentionType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF);
  try {
    graph.add_forward();
  } catch (const Error& e) {
    throw NotApplicable(std::string("cuDNN refused the attention graph's operations: ") + e.what());
  }
  choose_plan(s, graph.operation_graph(), ctx, shape, {q_data, k_data, v_data, o_data}, facts_);
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
