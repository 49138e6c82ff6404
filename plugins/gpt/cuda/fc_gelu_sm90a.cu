// The bf16 keepers' fc + bias + GELU forward and fc_proj dgrad + GELU backward on sm_90a: fc_gelu_sm90a.cuh's kernel
// on kKeeperTile (lab_fc_gelu_bf16 v14) and kBackwardKeeperTile (lab_fc_gelu_backward_bf16 v8), one launch each
// where the portable path runs a cuBLASLt GEMM and then a GELU pass (layers.hpp).
#include "fc_gelu_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda {
namespace {

using KeeperShape = fc_gelu::TileShape<fc_gelu::kKeeperTile>;
using BackwardKeeperShape = fc_gelu::TileShape<fc_gelu::kBackwardKeeperTile>;
constexpr const char* kKeeperName = "the fc + GELU keeper (lab_fc_gelu_bf16 v14)";
constexpr const char* kBackwardKeeperName = "the fc_proj dgrad + GELU backward keeper (lab_fc_gelu_backward_bf16 v8)";

}  // namespace

void fc_gelu_forward_sm90a_configure() {
  fc_gelu::configure<KeeperShape>(kKeeperName);
  fc_gelu::configure<BackwardKeeperShape>(kBackwardKeeperName);
}

void fc_gelu_forward_sm90a(bf16* xw, bf16* gelu, const bf16* x, const bf16* w, const bf16* bias, int rows, int in,
                           int out, cudaStream_t stream) {
  fc_gelu::launch<KeeperShape>(kKeeperName, xw, gelu, x, w, bias, rows, in, out, true, stream);
}

void fc_gelu_backward_sm90a(bf16* dz, float* dbias, float* partials, const bf16* dy, const bf16* w, const bf16* xw,
                            const bf16* bias, int rows, int in, int out, cudaStream_t stream) {
  fc_gelu::launch_backward<BackwardKeeperShape>(kBackwardKeeperName, dz, dbias, partials, dy, w, xw, bias, rows, in, out,
                                                stream);
}

}  // namespace roofbench::gpt::cuda
