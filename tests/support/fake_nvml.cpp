// A stand-in libnvidia-ml.so.1 for the tests of the energy counter's loading (core/src/nvml_energy.cpp) and of
// scripts/torch_timing.py's poller, on machines without a GPU: one GPU, at PCI 0000:00:00.0 and UUID GPU-fake,
// drawing 250 W, its counter stepping every 20 ms, driver 580.159.04; FAKE_NVML_MIG=1 puts it in MIG mode.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {
void* const kDevice = reinterpret_cast<void*>(0x600d);

double now_seconds() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
}  // namespace

extern "C" {

int nvmlInit_v2() { return 0; }
const char* nvmlErrorString(int r) { return r == 6 ? "Not Found" : "fake error"; }
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** device) {
  if (std::strcmp(bus, "0000:00:00.0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
  *device = kDevice;
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (std::strcmp(uuid, "GPU-fake") != 0) return 6;
  *device = kDevice;
  return 0;
}
int nvmlDeviceGetMigMode(void* device, unsigned* current, unsigned* pending) {
  if (device != kDevice) return 2;
  const char* mig = std::getenv("FAKE_NVML_MIG");
  *current = *pending = mig && std::strcmp(mig, "1") == 0 ? 1u : 0u;
  return 0;
}
int nvmlSystemGetDriverVersion(char* text, unsigned length) {
  if (length < 10) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  std::strcpy(text, "580.159.04");
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void* device, unsigned long long* millijoules) {
  if (device != kDevice) return 2;
  const double interval = 0.02, watts = 250;
  *millijoules = 1000000ull + static_cast<unsigned long long>(1000 * watts * interval * std::floor(now_seconds() / interval));
  return 0;
}
}  // extern "C"
