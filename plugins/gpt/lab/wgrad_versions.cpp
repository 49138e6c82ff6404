// The lab's weight-gradient table (wgrad_versions.hpp). The "layout" facts are the names the lab has always
// given these layouts, so results of one version compare across runs.
#include "wgrad_versions.hpp"

#include <string>

#include "version_table.hpp"

namespace roofbench::gpt::cuda::lab {
namespace {

// A rung's layout, through linear_backward_kmajor as the trainers call it (dx skipped).
template <WgradLayout kLayout>
std::size_t layout_scratch(int N, int in, int out) {
  return wgrad_scratch_floats(kLayout, N, in, out);
}
template <WgradLayout kLayout>
void layout_weight_gradient(cublasHandle_t handle, float* dw, const float* dy, const float* x, int N, int in, int out,
                            float* scratch, float beta_dw) {
  linear_backward_kmajor(handle, nullptr, dw, dy, x, nullptr, N, in, out, kLayout, scratch, 0, beta_dw);
}

std::size_t dy_scratch(int N, int, int out) { return static_cast<std::size_t>(N) * static_cast<std::size_t>(out); }

const WgradVersion kVersions[] = {
    {"v1", "v1 (MN-major operands, cuBLAS nt)", true, layout_scratch<WgradLayout::v1>,
     layout_weight_gradient<WgradLayout::v1>},
    {"v2", "v2 (dy transposed, cuBLAS nn)", false, dy_scratch, weight_gradient_dy_transposed},
    {"v3", "v3 (the narrower operand transposed)", true, layout_scratch<WgradLayout::v3>,
     layout_weight_gradient<WgradLayout::v3>},
};

}  // namespace

std::span<const WgradVersion> wgrad_versions() { return kVersions; }

const WgradVersion& wgrad_version(const std::string& name) { return find_version(wgrad_versions(), name, "lab_wgrad"); }

}  // namespace roofbench::gpt::cuda::lab
