#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "kernel_profile.hpp"
#include "text.hpp"

namespace roofbench {
namespace {

struct Collected {
  std::mutex mutex;
  std::map<std::string, std::pair<double, long>> by_name;  // name -> (ns, launches)
};
Collected* collected = nullptr;

constexpr std::size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::lock_guard lock(collected->mutex);
    auto& entry = collected->by_name[kernel->name ? kernel->name : "?"];  // demangled once, at the end
    entry.first += static_cast<double>(kernel->end - kernel->start);
    entry.second += 1;
  }
  std::free(buffer);
}

std::string cupti_error(CUptiResult status, const char* call) {
  const char* text = nullptr;
  cuptiGetResultString(status, &text);
  return std::string(call) + ": " + (text ? text : "CUPTI error " + std::to_string(status));
}

}  // namespace

KernelProfile profile_kernels(const std::function<void()>& run_and_wait, int runs) {
  KernelProfile profile;
  Collected data;
  collected = &data;
#define ROOFBENCH_CUPTI_OR_RETURN(call)                       \
  if (const CUptiResult status = (call); status != CUPTI_SUCCESS) { \
    profile.error = cupti_error(status, #call);               \
    cuptiFinalize();                                          \
    collected = nullptr;                                      \
    return profile;                                           \
  }
  ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  std::string failure;
  try {
    for (int i = 0; i < runs; ++i) run_and_wait();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  // Teardown in full, so the timing of the next case pays nothing for this pass.
  ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  ROOFBENCH_CUPTI_OR_RETURN(cuptiFinalize());
#undef ROOFBENCH_CUPTI_OR_RETURN
  collected = nullptr;
  if (!failure.empty()) {
    profile.error = "the profiled runs failed: " + failure;
    return profile;
  }
  for (const auto& [name, entry] : data.by_name) {
    profile.kernels.push_back({demangled(name.c_str()), entry.first * 1e-9 / runs, static_cast<double>(entry.second) / runs});
    profile.kernel_seconds_per_run += entry.first * 1e-9 / runs;
  }
  std::sort(profile.kernels.begin(), profile.kernels.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.seconds_per_run > b.seconds_per_run; });
  return profile;
}

}  // namespace roofbench
