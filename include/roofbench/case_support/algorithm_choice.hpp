// ROOFBENCH_ALGORITHM_CHOICE: how cases that choose among a library's algorithms at setup choose ("timed",
// the default, or "first": launch_timing.hpp, first_candidate_only). One reading of it for the cases and
// for the host, which refuses a bad value when it starts.
#pragma once

#include <optional>
#include <string_view>

namespace roofbench::case_support {

inline constexpr const char* kAlgorithmChoiceVariable = "ROOFBENCH_ALGORITHM_CHOICE";

// Whether `value` (the variable's; null when it is unset) asks for each choice's first candidate: false for
// unset, empty or "timed", true for "first", std::nullopt for any other value.
inline std::optional<bool> algorithm_choice_is_first(const char* value) {
  if (!value || !*value || std::string_view(value) == "timed") return false;
  if (std::string_view(value) == "first") return true;
  return std::nullopt;
}

}  // namespace roofbench::case_support
