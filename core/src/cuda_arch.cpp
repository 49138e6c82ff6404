#include "cuda_arch.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>
#include <vector>

namespace roofbench {
namespace {

// The values of cudaError_t that mean "no image for this device" (driver_types.h); spelled here so this
// file needs no CUDA headers and builds in the CPU-only host too.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorInvalidDeviceFunction = 98;
constexpr int kCudaErrorNoKernelImageForDevice = 209;

std::vector<int> parse_arch_list(std::string_view list) {
  std::vector<int> architectures;
  int value = -1;
  for (char c : list) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      value = (value < 0 ? 0 : value * 10) + (c - '0');
    } else if (value >= 0) {
      architectures.push_back(value);
      value = -1;
    }
  }
  if (value >= 0) architectures.push_back(value);
  return architectures;
}

}  // namespace

std::string cuda_architecture_names(std::string_view arch_list) {
  const std::vector<int> architectures = parse_arch_list(arch_list);
  if (architectures.empty()) return "unknown architectures";
  std::ostringstream names;
  for (std::size_t i = 0; i < architectures.size(); ++i)
    names << (i ? ", " : "") << "sm_" << architectures[i] / 10;  // __CUDA_ARCH_LIST__ says 900 for sm_90
  return names.str();
}

std::optional<std::string> cuda_architecture_refusal(CudaProbe probe, std::string_view plugin_name,
                                                     std::string_view device_label, std::string_view device_name,
                                                     int compute_capability) {
  if (!probe) return std::nullopt;  // not a CUDA plugin, or one built without roofbench_add_plugin
  std::array<char, 256> architectures{};
  const int status = probe(architectures.data(), static_cast<int>(architectures.size()));
  if (status == kCudaSuccess) return std::nullopt;
  if (status != kCudaErrorNoKernelImageForDevice && status != kCudaErrorInvalidDeviceFunction) return std::nullopt;
  const std::string built_for = cuda_architecture_names(architectures.data());
  std::vector<int> wanted = parse_arch_list(architectures.data());
  for (int& a : wanted) a /= 10;
  wanted.push_back(compute_capability);
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::ostringstream line;
  line << "plugin " << plugin_name << " has no code for " << device_label << " (" << device_name << ", sm_"
       << compute_capability << "): built for " << built_for << "; rebuild with -DCMAKE_CUDA_ARCHITECTURES="
       << compute_capability;
  if (wanted.size() > 1) {
    line << " (or \"";
    for (std::size_t i = 0; i < wanted.size(); ++i) line << (i ? ";" : "") << wanted[i];
    line << "\" for all of them)";
  }
  return line.str();
}

}  // namespace roofbench
