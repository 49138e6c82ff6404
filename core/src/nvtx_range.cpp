#include "nvtx_range.hpp"

#if ROOFBENCH_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace roofbench {

#if ROOFBENCH_HAVE_NVTX
NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }
#else
NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() {}
#endif

}  // namespace roofbench
