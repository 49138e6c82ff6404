// The bf16 keeper's fc + bias + GELU forward on sm_90a: fc_gelu_sm90a.cuh's kernel on kKeeperTile (lab_fc_gelu_bf16
// v14), one launch where the portable path runs cuBLASLt's GEMM and then the GELU pass (layers.hpp).
#include "fc_gelu_sm90a.cuh"
#include "layers.hpp"

namespace roofbench::gpt::cuda {
namespace {

using KeeperShape = fc_gelu::TileShape<fc_gelu::kKeeperTile>;
constexpr const char* kKeeperName = "the fc + GELU keeper (lab_fc_gelu_bf16 v14)";

}  // namespace

void fc_gelu_forward_sm90a_configure() { fc_gelu::configure<KeeperShape>(kKeeperName); }

void fc_gelu_forward_sm90a(bf16* xw, bf16* gelu, const bf16* x, const bf16* w, const bf16* bias, int rows, int in,
                           int out, cudaStream_t stream) {
  fc_gelu::launch<KeeperShape>(kKeeperName, xw, gelu, x, w, bias, rows, in, out, true, stream);
}

}  // namespace roofbench::gpt::cuda
