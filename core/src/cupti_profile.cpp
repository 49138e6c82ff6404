#include <cupti.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cupti_attachment.hpp"
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

// "" where CUPTI answered `call` with success, else what failed.
std::string failure_of(CUptiResult status, const char* call) {
  return status == CUPTI_SUCCESS ? std::string() : cupti_error(status, call);
}
#define ROOFBENCH_CUPTI_FAILURE(call) failure_of((call), #call)

// CUPTI's activity records switched on: "" or what failed.
std::string start_tracing() {
  std::string trouble = ROOFBENCH_CUPTI_FAILURE(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  for (CUpti_ActivityKind kind : kTraced)
    if (trouble.empty()) trouble = ROOFBENCH_CUPTI_FAILURE(cuptiActivityEnable(kind));
  return trouble;
}

// Switched off in full, so the timing of the next case pays nothing for the passes and any pass may follow:
// the kinds disabled, what CUPTI still holds delivered (a pass that failed before its own flush leaves
// records), CUPTI detached (cupti_attachment.hpp). "" or what failed first.
std::string stop_tracing() {
  std::string trouble;
  for (CUpti_ActivityKind kind : kTraced)
    if (std::string disabled = ROOFBENCH_CUPTI_FAILURE(cuptiActivityDisable(kind)); trouble.empty()) trouble = disabled;
  const std::string flushed = ROOFBENCH_CUPTI_FAILURE(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (trouble.empty()) trouble = flushed;
  if (std::string detached = ROOFBENCH_CUPTI_FAILURE(detach_cupti()); trouble.empty()) trouble = detached;
  return trouble;
}

// The trouble that ends the passes, agreed with the ranks that run them too (none: this rank's own). An
// agreement that fails (another rank ended the benchmark) ends them too.
std::string agreed(const PassAgreement& agree, const std::string& own) {
  if (!agree) return own;
  try {
    return agree(own);
  } catch (const std::exception& e) {
    return own.empty() ? std::string("the ranks could not agree on the traced passes: ") + e.what() : own;
  }
}

}  // namespace

KernelTrace trace_kernels(const std::function<void()>& run_and_wait, int passes, const PassAgreement& agree) {
  KernelTrace trace;
  Collected data;
  data.trace = &trace;
  collected = &data;
  // Where CUPTI fails on one rank, no rank runs a pass: the others would wait in its collective.
  std::string trouble = agreed(agree, start_tracing());
  for (int i = 0; i < passes && trouble.empty(); ++i) {
    try {
      run_and_wait();
    } catch (const std::exception& e) {
      trouble = std::string("the traced runs failed: ") + e.what();
    }
    // The pass's records, delivered before the next pass starts (run_and_wait waited for its kernels).
    if (trouble.empty()) trouble = ROOFBENCH_CUPTI_FAILURE(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    trouble = agreed(agree, trouble);
    std::lock_guard lock(data.mutex);
    data.pass = i + 1;
  }
  const std::string stopped = stop_tracing();
  collected = nullptr;
  if (trouble.empty()) trouble = stopped;
  if (!trouble.empty()) {
    trace.error = trouble;
    trace.records.clear();
    return trace;
  }
  // Records that reached only the final flush belong to no pass (each pass's own were flushed after its runs
  // were waited for): dropped, so that the profile and kernel_time count the same records.
  std::erase_if(trace.records, [passes](const KernelRecord& r) { return r.pass >= passes; });
  trace.passes = passes;
  return trace;
}

#undef ROOFBENCH_CUPTI_FAILURE

}  // namespace roofbench
