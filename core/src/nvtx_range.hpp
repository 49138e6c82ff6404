// A named NVTX push/pop range on the calling thread for the life of the object, so that a profiler can select
// what ran inside it (`ncu --nvtx --nvtx-include "samples/"`, Nsight Systems' timeline). Without NVTX in the
// build, it does nothing; with no profiler attached, NVTX's calls return at once.
#pragma once

namespace roofbench {

// The range around a benchmark's timed samples (not its setup, gate, warm-up or profiling passes).
inline constexpr const char* kSamplesRangeName = "samples";

class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace roofbench
