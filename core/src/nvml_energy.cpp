#include "nvml_energy.hpp"

#include <boost/dll/shared_library.hpp>

namespace roofbench {
namespace {

// The few declarations used, as nvml.h has them (NVML API 13; all date from R450 or earlier). nvmlDevice_t
// is an opaque handle passed and stored as a pointer; nvmlReturn_t is an int enum, NVML_SUCCESS = 0.
using NvmlReturn = int;
using NvmlDevice = void*;

class Nvml {
 public:
  // Loaded and initialised once per process; never shut down (NVML's state ends with the process).
  static const Nvml& get() {
    static const Nvml* nvml = new Nvml();
    return *nvml;
  }
  const std::string& why_not() const { return why_not_; }
  std::string error(NvmlReturn r) const {
    const char* text = error_string_ ? error_string_(r) : nullptr;
    return std::string(text ? text : "unknown NVML error") + " (" + std::to_string(r) + ")";
  }
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;   // nvmlDeviceGetHandleByPciBusId_v2
  NvmlReturn (*total_energy)(NvmlDevice, unsigned long long*) = nullptr;  // nvmlDeviceGetTotalEnergyConsumption
  // nvmlDeviceGetMigMode (current, pending; NVML_DEVICE_MIG_ENABLE = 1); optional: older NVMLs lack it.
  NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;  // nvmlSystemGetDriverVersion; optional

 private:
  Nvml() {
    namespace dll = boost::dll;
    boost::dll::fs::error_code ec;
    library_.load("libnvidia-ml.so.1", dll::load_mode::search_system_folders | dll::load_mode::rtld_now, ec);
    if (ec) {
      why_not_ = "cannot load libnvidia-ml.so.1 (it comes with the NVIDIA driver): " + ec.message();
      return;
    }
    for (const char* symbol : {"nvmlInit_v2", "nvmlErrorString", "nvmlDeviceGetHandleByPciBusId_v2",
                               "nvmlDeviceGetTotalEnergyConsumption"})
      if (!library_.has(symbol)) {
        why_not_ = std::string("libnvidia-ml.so.1 has no ") + symbol;
        return;
      }
    error_string_ = &library_.get<const char*(NvmlReturn)>("nvmlErrorString");
    handle_by_pci_bus_id = &library_.get<NvmlReturn(const char*, NvmlDevice*)>("nvmlDeviceGetHandleByPciBusId_v2");
    total_energy = &library_.get<NvmlReturn(NvmlDevice, unsigned long long*)>("nvmlDeviceGetTotalEnergyConsumption");
    if (library_.has("nvmlDeviceGetMigMode"))
      mig_mode = &library_.get<NvmlReturn(NvmlDevice, unsigned*, unsigned*)>("nvmlDeviceGetMigMode");
    if (library_.has("nvmlSystemGetDriverVersion"))
      driver_version = &library_.get<NvmlReturn(char*, unsigned)>("nvmlSystemGetDriverVersion");
    if (const NvmlReturn r = library_.get<NvmlReturn()>("nvmlInit_v2")(); r != 0) why_not_ = "nvmlInit: " + error(r);
  }

  boost::dll::shared_library library_;
  const char* (*error_string_)(NvmlReturn) = nullptr;
  std::string why_not_;
};

}  // namespace

std::function<std::optional<double>()> nvml_energy_counter(const std::string& pci_bus_id, std::string& why) {
  const Nvml& nvml = Nvml::get();
  if (!nvml.why_not().empty()) {
    why = nvml.why_not();
    return {};
  }
  NvmlDevice device = nullptr;
  if (const NvmlReturn r = nvml.handle_by_pci_bus_id(pci_bus_id.c_str(), &device); r != 0) {
    why = "NVML has no device at PCI " + pci_bus_id + ": " + nvml.error(r);
    return {};
  }
  // A MIG slice reports its parent's bus id: the counter would be the whole board's, shared with other slices.
  unsigned mig = 0, mig_pending = 0;
  if (nvml.mig_mode && nvml.mig_mode(device, &mig, &mig_pending) == 0 && mig == 1) {
    why = "MIG is on for the GPU at PCI " + pci_bus_id + ": NVML's energy counter is the whole board's";
    return {};
  }
  unsigned long long millijoules = 0;
  if (const NvmlReturn r = nvml.total_energy(device, &millijoules); r != 0) {
    why = "NVML's energy counter of the GPU at PCI " + pci_bus_id + ": " + nvml.error(r);
    return {};
  }
  return [&nvml, device]() -> std::optional<double> {
    unsigned long long mj = 0;
    if (nvml.total_energy(device, &mj) != 0) return std::nullopt;
    return static_cast<double>(mj) * 1e-3;
  };
}

std::string nvml_driver_version() {
  const Nvml& nvml = Nvml::get();
  char text[96] = {};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
  if (!nvml.why_not().empty() || !nvml.driver_version || nvml.driver_version(text, sizeof text) != 0) return "";
  return text;
}

}  // namespace roofbench
