// Whether a result's rates could have been reached on its device at all. A case that runs its work on a
// stream other than the one the host times, or whose work() claims more than run() does, is timed at
// next to nothing and would report thousands of percent of the roof; such a result is a failure, not a
// measurement (docs/errors.md).
#pragma once

#include <optional>
#include <string>

#include "ceilings_cache.hpp"
#include "measure.hpp"
#include "roofline.hpp"

namespace roofbench {

// Room above a measured ceiling before a result is impossible, on top of its own noise: a ceiling is
// the best of rounds that agree within kCeilingsSettle (25%), so it may stand that much under the
// device; and it is one library call (cuBLAS, memcpy), which a case may beat by a little (an H200's
// vectorised add streamed 4.36 TB/s against a 4.24 TB/s cudaMemcpy, 103%): 1.25 x 1.1 = 1.375, so 40%.
inline constexpr double kCeilingHeadroom = 0.40;
// A result's own noise widens its limit: its median stands within about 3 stdev of the samples' mean.
// Noise over 100% counts as 100%: a run that does nothing is all timer jitter (300% measured), which must
// not buy it a limit of 10x.
inline constexpr double kNoiseWidth = 3.0;
inline constexpr double kNoiseCounted = 1.0;

// The factor a result may stand above a ceiling: 1 + kCeilingHeadroom + kNoiseWidth x its relative noise
// (at most kNoiseCounted), at most 4.4.
double plausible_factor(const Result& r);

// For a result that ran and passed: the detail of Status::implausible, one line saying which rate exceeds which ceiling by how much, and
// the likely cause; nullopt when every rate is within reach. Compute is judged against the measured roof
// of the case's own precision (bf16 and fp16 share one) or the datasheet's, whichever is higher; a
// precision without either is not judged. Memory traffic (the case's minimum bytes) is judged against
// the cache bandwidth when hot (any of it may sit in cache) and main memory's roof when cold. A result
// over several GPUs may reach the sum of their ceilings.
std::optional<std::string> implausibility(const Result& r, const Ceilings& measured, const std::optional<Datasheet>& sheet);

}  // namespace roofbench
