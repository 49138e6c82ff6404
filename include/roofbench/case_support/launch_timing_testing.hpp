// Timings as launch_timing would report them, for the CPU tests of the choices made from them.
#pragma once

#include "roofbench/case_support/launch_timing.hpp"

namespace roofbench::case_support::testing {

inline CandidateTiming timed(double per_launch_ms, int launches = 50) {
  CandidateTiming t;
  t.one_launch_ms = per_launch_ms * 2;
  t.per_launch_ms = per_launch_ms;
  t.launches_per_group = launches;
  t.groups = 5;
  t.graph = true;
  return t;
}

inline CandidateTiming skipped(double one_launch_ms) {
  CandidateTiming t;
  t.one_launch_ms = one_launch_ms;
  t.skipped = true;
  return t;
}

}  // namespace roofbench::case_support::testing
