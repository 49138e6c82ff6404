// An experiment of the kernel lab (lab_fc_gelu_bf16 v2): the MLP's fc layer, its bias and its exact
// (erf) GELU as ONE cuDNN backend-API operation graph, matmul -> ADD bias -> z -> GELU_FWD -> gelu, with both z
// and gelu non-virtual outputs (the backward reads both: GELU' of z, and gelu as fc_proj's input).
//
// Why: the gpt plugin's R3 step (bf16, batch 512: 65536 rows, C 512, H 2048) runs at the H200's 700 W power
// limit, so every byte not moved is energy and time saved. R2-R4 run fc as a cuBLASLt GEMM with its bias in
// the epilogue writing z, then a GELU pass that reads z (268 MB at R3) and writes gelu (268 MB), six layers a
// step; R3's GELU passes (this forward and the backward's) cost 2.3 ms of a 20.6 ms step. cuBLASLt's GELU
// epilogue is the tanh approximation, not PyTorch's F.gelu, so it is ruled out; CUDNN_POINTWISE_GELU_FWD is
// the erf form (CUDNN_POINTWISE_GELU_APPROX_TANH_FWD is the other one, cudnn_graph.h). Fused, the GEMM's
// epilogue writes gelu beside z and the pass, with its read of z (1.6 GB a step over six layers) and its
// launch, is gone: at most about 0.5 ms of R3's step, the backward's GELU untouched.
//
// The trainers would run it if lab_fc_gelu_bf16 v2 beat R2-R4's pair (v4) at batch 512 by more than the
// noise with the gate passing. cuDNN takes the chain (engine 7, the runtime-fusion matmul) and its GELU is
// that of the rounded z, as v1's (the GPU test: 3 in 614400 a bf16 step apart, z bit-equal to v1's), but
// its GEMM is about 100 us slower than cuBLASLt's at this shape, more than the whole GELU pass costs (on an
// H200 at batch 512, 495-502 us against v4's 373-382; plugins/gpt/README.md has the lab's table).
//
// The backward counterpart, not built here: fc_proj's input-gradient GEMM d_gelu = dy w_proj with a dGELU
// epilogue reading z (CUDNN_POINTWISE_GELU_BWD: dz = d_gelu GELU'(z)), which would remove the backward's
// GELU pass as well (it would still need fc's bias gradient, the column sums of dz, from somewhere); its
// GEMM would be cuDNN's too, so it would likely lose the same way.
//
// When cuDNN refuses the graph (no engine plan: NotApplicable with the heuristics' counts), run with
// CUDNN_LOGLEVEL_DBG=3 (and CUDNN_LOGDEST_DBG=stderr) to see which engine refused it and why.
#include "fc_gelu_cudnn.hpp"

#include <cudnn.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "roofbench/case_support/owned_handle.hpp"
#include "roofbench/cudnn_backend/engine_plans.hpp"
#include "roofbench/cudnn_check.hpp"

namespace roofbench::gpt::cuda {

using cudnn_backend::Descriptor;

namespace {

// Plans finalized and timed at most: the matmul fusion engines compile their kernels at finalize (a second
// or more each), which is setup time per plan.
constexpr std::size_t kMaxTimedPlans = 6;
constexpr std::int64_t kMaxWorkspaceBytes = 64ll << 20;
constexpr const char* kLogHint = " (CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=stderr logs why)";

enum Uid : std::int64_t { kX = 1, kW, kBias, kZ, kGelu, kFirstVirtual = 100 };

// A finalize whose NOT_SUPPORTED status (cuDNN refusing this shape or graph on this GPU) is NotApplicable;
// any other failure is an Error (a descriptor this code built wrong).
void finalize(Descriptor& d, const char* what) {
  const cudnnStatus_t status = d.try_finalize();
  if (status != CUDNN_STATUS_SUCCESS)
    throw_cudnn_error(status, std::string("cudnnBackendFinalize (") + what + ")", __FILE__, __LINE__,
                      CudnnUnsupported::is_not_applicable);
}

}  // namespace

const char* const kFcGeluGraphName = "matmul -> ADD bias -> z (bf16) -> GELU_FWD(z) -> gelu (bf16)";

struct CudnnFcGelu::State {
  // Declared first, destroyed last: the plan and descriptors go before the handle they were made with.
  case_support::OwnedHandle<cudnnHandle_t, cudnnDestroy> handle;
  std::shared_ptr<cudnn_backend::DescriptorSet> graph = std::make_shared<cudnn_backend::DescriptorSet>();
  std::optional<cudnn_backend::EnginePlan> plan;  // keeps the graph's descriptors alive too
  std::unique_ptr<Descriptor> pack;               // the construction's pointers: built once
  void* workspace = nullptr;
  std::vector<Figure> facts;

  Descriptor& make(cudnnBackendDescriptorType_t type) { return graph->make(type); }
};

CudnnFcGelu::CudnnFcGelu(const FcGeluShape& shape, cudaStream_t stream, const bf16* x, const bf16* w,
                         const bf16* bias, bf16* z, bf16* gelu,
                         const std::function<void*(std::size_t bytes)>& workspace)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (shape.N < 1 || shape.C < 1 || shape.H < 1) throw Error("gpt: CudnnFcGelu needs a non-empty shape");
  ROOFBENCH_CUDNN(cudnnCreate(s.handle.replace()));
  const std::int64_t N = shape.N, C = shape.C, H = shape.H;
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const std::string version = std::to_string(cudnnGetVersion());
  std::int64_t next_virtual = kFirstVirtual;

  // Every tensor carries a batch dimension of 1 ([1, rows, cols]): cuDNN's matmul takes rank-3 operands.
  auto tensor = [&](std::int64_t uid, cudnnDataType_t data_type, std::vector<std::int64_t> dims,
                    std::vector<std::int64_t> strides, bool is_virtual) -> Descriptor& {
    Descriptor& t = s.graph->make_tensor({uid, data_type, std::move(dims), std::move(strides), is_virtual});
    finalize(t, "tensor");
    return t;
  };
  const std::vector<std::int64_t> out_dims = {1, N, H}, out_strides = {N * H, H, 1};
  auto virtual_fp32 = [&]() -> Descriptor& { return tensor(next_virtual++, f32, out_dims, out_strides, true); };

  std::vector<cudnnBackendDescriptor_t> ops;
  auto matmul = [&](Descriptor& a, Descriptor& b, Descriptor& c) {
    Descriptor& desc = s.make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, f32);
    finalize(desc, "matmul descriptor");
    Descriptor& op = s.make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, a.get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b.get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, c.get())
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get());
    finalize(op, "matmul");
    ops.push_back(op.get());
  };
  // y = mode(x) or mode(x, b), computed in fp32.
  auto pointwise = [&](cudnnPointwiseMode_t mode, Descriptor& in, Descriptor* b, Descriptor& y, const char* what) {
    Descriptor& desc = s.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, f32);
    finalize(desc, "pointwise descriptor");
    Descriptor& op = s.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, desc.get())
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, in.get());
    if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b->get());
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, y.get());
    finalize(op, what);
    ops.push_back(op.get());
  };

  Descriptor& graph = s.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  try {
    // x [N, C] row-major. w^T [C, H] read in place from w [H, C] row-major: element (k, h) of w^T is
    // w[h C + k], so the k stride is 1 and the h stride C. The bias [H] broadcast over the rows.
    Descriptor& x_t = tensor(kX, bf, {1, N, C}, {N * C, C, 1}, false);
    Descriptor& w_t = tensor(kW, bf, {1, C, H}, {C * H, 1, C}, false);
    Descriptor& bias_t = tensor(kBias, bf, {1, 1, H}, {H, H, 1}, false);
    Descriptor& z_t = tensor(kZ, bf, out_dims, out_strides, false);
    Descriptor& gelu_t = tensor(kGelu, bf, out_dims, out_strides, false);
    Descriptor& product = virtual_fp32();  // fp32 accumulation, as cuBLASLt's CUBLAS_COMPUTE_32F in v1
    matmul(x_t, w_t, product);
    pointwise(CUDNN_POINTWISE_ADD, product, &bias_t, z_t, "pointwise ADD -> z");
    pointwise(CUDNN_POINTWISE_GELU_FWD, z_t, nullptr, gelu_t, "pointwise GELU_FWD(z)");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, s.handle.get())
        .set_array(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops);
    finalize(graph, "operation graph");
  } catch (const NotApplicable& e) {
    throw NotApplicable("cuDNN " + version + " refused the fc + bias + GELU graph (" + kFcGeluGraphName +
                        "): " + e.what() + kLogHint);
  }

  // The plans are timed on the caller's tensors (random inputs: all-zero ones would time a GEMM at low
  // power), which writes z and gelu.
  std::vector<std::int64_t> uids = {kX, kW, kBias, kZ, kGelu};
  std::vector<void*> pointers = {const_cast<bf16*>(x), const_cast<bf16*>(w), const_cast<bf16*>(bias), z, gelu};
  ROOFBENCH_CUDNN(cudnnSetStream(s.handle.get(), stream));
  cudnn_backend::PlanSearchOptions options;
  options.max_plans = kMaxTimedPlans;
  options.max_workspace_bytes = kMaxWorkspaceBytes;
  options.excluded_notes = {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION};  // v1 accumulates in fp32
  std::optional<cudnn_backend::PlanChoice> choice;
  try {
    choice = cudnn_backend::fastest_plan(
        s.handle.get(), graph.get(), s.graph, options, uids, pointers,
        [&](std::int64_t bytes) {
          if (bytes > 0) s.workspace = workspace(static_cast<std::size_t>(bytes));
          return s.workspace;
        },
        std::string("the fc + bias + GELU graph (") + kFcGeluGraphName + ")");
  } catch (const NotApplicable& e) {
    throw NotApplicable(e.what() + std::string(kLogHint));
  }
  s.pack = cudnn_backend::variant_pack(uids, pointers, s.workspace);
  s.facts = {{"cudnn_version", version},
             {"cudnn_graph", kFcGeluGraphName},
             {"cudnn_engine", choice->chosen.engine.label() + " (heuristics " + choice->chosen.engine.modes + ")"},
             {"engine_search", choice->text},
             {"cudnn_workspace_bytes", std::to_string(choice->chosen.workspace_bytes)}};
  s.plan = std::move(choice->chosen);
}

CudnnFcGelu::~CudnnFcGelu() = default;

void CudnnFcGelu::run(cudaStream_t stream) {
  State& s = *state_;
  if (!s.plan) throw Error("gpt: CudnnFcGelu::run after destroy()");
  ROOFBENCH_CUDNN(cudnnSetStream(s.handle.get(), stream));
  cudnn_backend::execute(s.handle.get(), *s.plan->plan, *s.pack);
}

void CudnnFcGelu::destroy() {
  State& s = *state_;
  s.pack.reset();
  s.plan.reset();
  s.graph.reset();
  ROOFBENCH_CUDNN(s.handle.destroy());
}

const std::vector<Figure>& CudnnFcGelu::facts() const { return state_->facts; }

}  // namespace roofbench::gpt::cuda
