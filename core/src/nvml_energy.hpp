// A GPU's energy counter through NVML (nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver
// loaded), with libnvidia-ml.so.1 loaded at run time: it comes with the driver, not the toolkit, so a host
// built with CUDA still starts on a machine without one, and without NVML the figure is simply not given.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace roofbench {

// A reader of the counter of the GPU at `pci_bus_id` (cudaDeviceGetPCIBusId's form: a CUDA ordinal is not
// NVML's index) in joules, nullopt on a failed read; empty, with the reason in `why`, where NVML, the device
// or its counter is not available.
std::function<std::optional<double>()> nvml_energy_counter(const std::string& pci_bus_id, std::string& why);

// The NVIDIA driver's version as NVML gives it ("580.159.04"); empty where NVML is not available.
std::string nvml_driver_version();

}  // namespace roofbench
