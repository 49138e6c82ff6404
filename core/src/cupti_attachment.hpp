// CUPTI attached to the process for each pass that uses it (--kernel-time's and --profile's activity traces,
// --counters' Range Profiler) and detached after it, so that any pass may follow any other and the timing
// of the next case pays nothing for them. Seen with CUPTI 13.0 on an H100: after a trace whose activity
// kinds were only disabled, or a profiler pass only deinitialised, each launch of an empty kernel cost the
// host about 0.5 us more (some 15%); once cuptiFinalize had detached CUPTI, nothing measurable. Detached,
// CUPTI attaches again at the next call of its activity or callback API or of cuptiGetDeviceId, but not at
// cuptiProfilerInitialize (nor cuptiGetVersion or cuptiGetTimestamp): that answers
// CUPTI_ERROR_NOT_INITIALIZED, so a pass that starts with the profiler attaches CUPTI first. Only the
// CUPTI builds include this (cupti_profile.cpp, cupti_counters.cpp).
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstdint>

namespace roofbench {

// CUPTI attached to this process, whether no pass has run yet or the last one detached it: cuptiGetDeviceId
// on `ctx` (null: the current context) attaches it and changes nothing else.
inline CUptiResult attach_cupti(CUcontext ctx) {
  std::uint32_t device = 0;
  return cuptiGetDeviceId(ctx, &device);
}

// CUPTI detached from this process, once the pass has disabled what it enabled, delivered its records and
// waited for its launches (cuptiFinalize asks for that much): no instrumentation is left on later launches.
inline CUptiResult detach_cupti() { return cuptiFinalize(); }

}  // namespace roofbench
