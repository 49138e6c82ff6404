#include <cupti.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "kernel_profile.hpp"
#include "text.hpp"

namespace roofbench {
namespace {

// What the buffer callbacks fill: records of the pass under way (each pass ends in a forced flush, so a
// buffer delivered during a pass holds that pass's kernels only).
struct Collected {
  std::mutex mutex;
  KernelTrace* trace = nullptr;
  std::map<std::string, int> name_index;
  int pass = 0;
};
Collected* collected = nullptr;

constexpr std::size_t kBufferBytes = 8u << 20;
constexpr CUpti_ActivityKind kTraced[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                          CUPTI_ACTIVITY_KIND_MEMSET};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void add_record(const char* name, std::uint64_t start, std::uint64_t end, bool kernel) {
  if (start == 0 && end == 0) return;  // CUPTI could not time it
  std::lock_guard lock(collected->mutex);
  KernelTrace& trace = *collected->trace;
  auto [it, added] = collected->name_index.try_emplace(name, static_cast<int>(trace.names.size()));
  if (added) trace.names.push_back(name);  // demangled once, at the end
  trace.records.push_back({it->second, collected->pass, start, end, kernel});
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      add_record(k->name ? k->name : "?", k->start, k->end, true);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      add_record("[memcpy]", m->start, m->end, false);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      add_record("[memset]", m->start, m->end, false);
    }
  }
  std::free(buffer);
}

std::string cupti_error(CUptiResult status, const char* call) {
  const char* text = nullptr;
  cuptiGetResultString(status, &text);
  return std::string(call) + ": " + (text ? text : "CUPTI error " + std::to_string(status));
}

}  // namespace

KernelTrace trace_kernels(const std::function<void()>& run_and_wait, int passes) {
  KernelTrace trace;
  Collected data;
  data.trace = &trace;
  collected = &data;
#define ROOFBENCH_CUPTI_OR_RETURN(call)                             \
  if (const CUptiResult status = (call); status != CUPTI_SUCCESS) { \
    trace.error = cupti_error(status, #call);                       \
    trace.records.clear();                                          \
    cuptiFinalize();                                                \
    collected = nullptr;                                            \
    return trace;                                                   \
  }
  ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  for (CUpti_ActivityKind kind : kTraced) ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityEnable(kind));
  std::string failure;
  for (int i = 0; i < passes && failure.empty(); ++i) {
    try {
      run_and_wait();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    // The pass's records, delivered before the next pass starts (run_and_wait waited for its kernels).
    ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    std::lock_guard lock(data.mutex);
    data.pass = i + 1;
  }
  // Teardown in full, so the timing of the next case pays nothing for this pass.
  for (CUpti_ActivityKind kind : kTraced) ROOFBENCH_CUPTI_OR_RETURN(cuptiActivityDisable(kind));
  ROOFBENCH_CUPTI_OR_RETURN(cuptiFinalize());
#undef ROOFBENCH_CUPTI_OR_RETURN
  collected = nullptr;
  if (!failure.empty()) {
    trace.error = "the traced runs failed: " + failure;
    trace.records.clear();
    return trace;
  }
  trace.passes = passes;
  return trace;
}

}  // namespace roofbench
