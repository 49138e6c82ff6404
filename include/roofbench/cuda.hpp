// What a CUDA plugin needs beside plugin.hpp: the case's stream as a cudaStream_t, a guard that makes a
// device current for a scope, and error checks for CUDA, cuBLAS and cuBLASLt calls. Every failing call
// throws roofbench::Error naming the call, the file and line, and the library's own message; the host
// reports it against the benchmark that threw and carries on with the next one. cuDNN's checks are in
// cudnn_check.hpp (it includes cudnn.h, so only its users include it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "roofbench/plugin.hpp"

// The entry point's fingerprint records the CUDA runtime this file was compiled against (plugin.hpp).
#undef ROOFBENCH_CUDA_RUNTIME_MAJOR
#define ROOFBENCH_CUDA_RUNTIME_MAJOR (CUDART_VERSION / 1000)

namespace roofbench::detail {
[[noreturn]] inline void throw_call_error(const char* lib, long code, const char* message, const char* call,
                                          const char* file, int line) {
  throw Error(std::string(lib) + " error " + std::to_string(code) + " (" + (message ? message : "?") + ") in " +
              call + " at " + file + ":" + std::to_string(line));
}
}  // namespace roofbench::detail

#define ROOFBENCH_CUDA(call)                                                                             \
  do {                                                                                                   \
    const cudaError_t rb_status_ = (call);                                                               \
    if (rb_status_ != cudaSuccess)                                                                       \
      ::roofbench::detail::throw_call_error("CUDA", rb_status_, cudaGetErrorString(rb_status_), #call,   \
                                            __FILE__, __LINE__);                                         \
  } while (0)

// Checks the launch itself (bad configuration); faults inside the kernel surface at the next sync.
#define ROOFBENCH_CUDA_LAUNCH() ROOFBENCH_CUDA(cudaGetLastError())

#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define ROOFBENCH_CUBLAS(call)                                                                          \
  do {                                                                                                  \
    const cublasStatus_t rb_status_ = (call);                                                           \
    if (rb_status_ != CUBLAS_STATUS_SUCCESS)                                                            \
      ::roofbench::detail::throw_call_error("cuBLAS", rb_status_, cublasGetStatusString(rb_status_),    \
                                            #call, __FILE__, __LINE__);                                 \
  } while (0)
#endif

#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define ROOFBENCH_CUBLASLT(call)                                                                                \
  do {                                                                                                          \
    const cublasStatus_t rb_status_ = (call);                                                                   \
    if (rb_status_ != CUBLAS_STATUS_SUCCESS)                                                                    \
      ::roofbench::detail::throw_call_error("cuBLASLt", rb_status_, cublasLtGetStatusString(rb_status_), #call, \
                                            __FILE__, __LINE__);                                                \
  } while (0)
#endif

namespace roofbench::cuda {

// The stream a case enqueues its work on, for the given rank (Context::stream(), typed).
inline cudaStream_t stream(const Context& ctx, int rank = 0) { return static_cast<cudaStream_t>(ctx.stream(rank)); }

// Makes `device` the current CUDA device for the scope and restores the one current before, so that calls
// without a device argument (copies, allocations, library handles) act on a rank's GPU.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    ROOFBENCH_CUDA(cudaGetDevice(&previous_));
    ROOFBENCH_CUDA(cudaSetDevice(device));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }  // a destructor must not throw

 private:
  int previous_ = 0;
};

// Lets `kernel` launch with `bytes` of dynamic shared memory (above 48 KiB needs this opt-in). The setting
// belongs to the current context, so call it before every launch: one remembered per process is lost after
// a device reset (the host's recovery from a sticky error) and does not hold on a second device.
template <typename Kernel>
void allow_dynamic_shared_memory(Kernel* kernel, std::size_t bytes) {
  ROOFBENCH_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(bytes)));
}

}  // namespace roofbench::cuda
