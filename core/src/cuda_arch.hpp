// Refusing a CUDA plugin that has no code for the device, with one line that says which architectures
// it has. Every CUDA plugin built by roofbench_add_plugin(... CUDA) exports a probe
// (cmake/RoofbenchCudaProbe.cu) that runs cudaFuncGetAttributes on a kernel of its own; without an image
// the device can run (SASS for its architecture, or PTX it can compile) that fails with
// cudaErrorNoKernelImageForDevice, before any case has run. Plain C++: the probe does the CUDA part.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace roofbench {

// int roofbench_cuda_probe(char* architectures, int capacity): writes the plugin's __CUDA_ARCH_LIST__
// ("800,900") and returns the cudaError_t of the attribute query on the current device.
using CudaProbe = int (*)(char* architectures, int capacity);
inline constexpr const char* kCudaProbeSymbol = "roofbench_cuda_probe";

// "sm_80, sm_90" from "800,900"; "unknown architectures" when the list is empty.
std::string cuda_architecture_names(std::string_view arch_list);

// Calls the probe (the plugin's device must be current) and returns nullopt when the plugin's kernels
// can run there, else one line: "plugin micro has no code for cuda:0 (NVIDIA A100-SXM4-80GB, sm_80):
// built for sm_90; rebuild with -DCMAKE_CUDA_ARCHITECTURES=80 (or "80;90" for both)". Errors other than
// a missing image (no driver, no device) are not this function's to report: nullopt, and the host's
// own device checks say what is wrong.
std::optional<std::string> cuda_architecture_refusal(CudaProbe probe, std::string_view plugin_name,
                                                     std::string_view device_label, std::string_view device_name,
                                                     int compute_capability);

}  // namespace roofbench
