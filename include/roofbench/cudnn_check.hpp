// Error checks for plugins that call cuDNN (it includes cudnn.h, so only they include it). As in
// cuda.hpp, a failing call throws roofbench::Error naming the call, the file and line, and cuDNN's
// own message: its status string and, when it keeps one, its last error message on this thread.
//
// Two meanings of a CUDNN_STATUS_NOT_SUPPORTED status, chosen at the call:
//   ROOFBENCH_CUDNN(call)                    every failure is an Error;
//   ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(call)  NOT_SUPPORTED (and its sub-codes) throws NotApplicable with the
//                                            same text: cuDNN saying it cannot run this point (setup's
//                                            descriptors and algorithm searches), which the host reports as
//                                            not applicable instead of failing the benchmark.
#pragma once

#include <cudnn.h>

#include <string>

#include "roofbench/plugin.hpp"

namespace roofbench {

enum class CudnnUnsupported { is_error, is_not_applicable };

// "CUDNN_STATUS_BAD_PARAM", then ": " and cuDNN's last error message on this thread when it has one.
inline std::string cudnn_status_message(cudnnStatus_t status) {
  char message[1024] = {};
  cudnnGetLastErrorString(message, sizeof message);
  std::string text = cudnnGetErrorString(status);
  if (message[0]) text += std::string(": ") + message;
  return text;
}

// Throws "cuDNN error <code> (<cudnn_status_message>) in <call> at <file>:<line>" as Error, or as
// NotApplicable for a NOT_SUPPORTED status when `unsupported` says so.
[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const std::string& call, const char* file, int line,
                                           CudnnUnsupported unsupported) {
  const std::string text = "cuDNN error " + std::to_string(int(status)) + " (" + cudnn_status_message(status) +
                           ") in " + call + " at " + file + ":" + std::to_string(line);
  // Sub-codes of a category share its thousands (CUDNN_STATUS_NOT_SUPPORTED = 3000, 3001...).
  if (unsupported == CudnnUnsupported::is_not_applicable &&
      int(status) / 1000 * 1000 == int(CUDNN_STATUS_NOT_SUPPORTED))
    throw NotApplicable(text);
  throw Error(text);
}

}  // namespace roofbench

#define ROOFBENCH_CUDNN_CHECK_(call, call_text, unsupported)                                            \
  do {                                                                                                  \
    const cudnnStatus_t rb_status_ = (call);                                                            \
    if (rb_status_ != CUDNN_STATUS_SUCCESS)                                                             \
      ::roofbench::throw_cudnn_error(rb_status_, call_text, __FILE__, __LINE__,                         \
                                     ::roofbench::CudnnUnsupported::unsupported);                       \
  } while (0)

// The call's text is taken before its macros expand, as cuda.hpp's messages show it.
#define ROOFBENCH_CUDNN(call) ROOFBENCH_CUDNN_CHECK_(call, #call, is_error)
#define ROOFBENCH_CUDNN_OR_NOT_APPLICABLE(call) ROOFBENCH_CUDNN_CHECK_(call, #call, is_not_applicable)
