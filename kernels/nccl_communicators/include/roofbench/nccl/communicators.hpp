// NCCL communicators for one process that drives several GPUs, or for one rank of a process per GPU
// (torchrun, srun, mpirun), and the error check for NCCL calls.
// Header-only so that any plugin linking roofbench::nccl (the all-reduce cases, the GPT data-parallel
// rung) creates communicators the same way, with the same environment.
#pragma once

#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "roofbench/cuda.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::nccl {
// ncclGetLastError often says which rank, device or transport failed; the code alone rarely does.
inline std::string nccl_error_message(ncclResult_t status) {
  std::string message = ncclGetErrorString(status);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') message += std::string(": ") + last;
  return message;
}
}  // namespace roofbench::nccl

#define ROOFBENCH_NCCL(call)                                                                              \
  do {                                                                                                    \
    const ncclResult_t rb_nccl_status_ = (call);                                                          \
    if (rb_nccl_status_ != ncclSuccess)                                                                   \
      ::roofbench::detail::throw_call_error("NCCL", rb_nccl_status_,                                      \
                                            ::roofbench::nccl::nccl_error_message(rb_nccl_status_).c_str(), \
                                            #call, __FILE__, __LINE__);                                   \
  } while (0)

namespace roofbench::nccl {

// An NCCL group (ncclGroupStart ... ncclGroupEnd) that is closed even when a call inside it throws:
// a group left open on this thread would swallow every later NCCL call of the process.
class GroupScope {
 public:
  GroupScope() { ROOFBENCH_NCCL(ncclGroupStart()); }
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;
  ~GroupScope() {
    if (open_) (void)ncclGroupEnd();  // already unwinding from the first error: that one is reported
  }
  // Launches what the group collected; its errors are the ones worth reporting, so it is checked.
  void end() {
    open_ = false;
    ROOFBENCH_NCCL(ncclGroupEnd());
  }

 private:
  bool open_ = true;
};

// One communicator per rank of one clique, rank r on CUDA device devices[r]. Move-only.
class Communicators {
 public:
  Communicators() = default;
  Communicators(std::vector<ncclComm_t> comms, std::vector<int> devices)
      : comms_(std::move(comms)), devices_(std::move(devices)) {}
  Communicators(Communicators&& other) noexcept
      : comms_(std::exchange(other.comms_, {})), devices_(std::exchange(other.devices_, {})) {}
  Communicators& operator=(Communicators&& other) noexcept {
    if (this != &other) {
      abort_quietly();
      comms_ = std::exchange(other.comms_, {});
      devices_ = std::exchange(other.devices_, {});
    }
    return *this;
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  // The fallback when destroy() was never reached (a throw during setup or a run). Abort, not destroy:
  // destroy may wait for the other ranks, whose state after an error is unknown, and would hang.
  ~Communicators() { abort_quietly(); }

  bool empty() const { return comms_.empty(); }
  int size() const { return static_cast<int>(comms_.size()); }
  ncclComm_t operator[](int rank) const { return comms_.at(static_cast<std::size_t>(rank)); }
  int device(int rank) const { return devices_.at(static_cast<std::size_t>(rank)); }

  // The orderly end: finalize every rank together, then free each one. ncclCommFinalize waits for the
  // other ranks of the clique, so from one thread the ranks must be finalized inside one group; after
  // that, ncclCommDestroy only frees local resources.
  void destroy() {
    std::vector<ncclComm_t> comms = std::exchange(comms_, {});
    devices_.clear();
    if (comms.empty()) return;
    try {
      GroupScope group;
      for (ncclComm_t comm : comms) ROOFBENCH_NCCL(ncclCommFinalize(comm));
      group.end();
    } catch (...) {
      for (ncclComm_t comm : comms) (void)ncclCommAbort(comm);
      throw;
    }
    // Free every rank even when one fails, then report the first failure.
    ncclResult_t first_failure = ncclSuccess;
    for (ncclComm_t comm : comms) {
      const ncclResult_t status = ncclCommDestroy(comm);
      if (first_failure == ncclSuccess) first_failure = status;
    }
    ROOFBENCH_NCCL(first_failure);
  }

 private:
  void abort_quietly() noexcept {
    for (ncclComm_t comm : comms_) (void)ncclCommAbort(comm);
    comms_.clear();
    devices_.clear();
  }

  std::vector<ncclComm_t> comms_;
  std::vector<int> devices_;
};

// NVLink SHARP (NVLS) makes NCCL create CUDA multicast objects. On the shared multi-GPU hosts this
// project runs on, multicast objects can take the host's GPUs down for every user, so NVLS stays off.
// Forced (overwrite = 1) rather than defaulted: a value inherited from a job script must not turn it
// back on. NCCL reads its environment once per process, when it first initialises, so this has to run
// before any communicator of the process exists; every plugin creates its communicators through
// make_communicators, which guarantees that.
inline void disable_nccl_multicast() {
  if (setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1) != 0)
    throw Error("roofbench nccl: setenv(NCCL_NVLS_ENABLE=0) failed; refusing to create communicators");
}

// The only place communicators are created. One process drives every GPU here (ncclCommInitAll): rank
// r runs on CUDA device devices[r].
inline Communicators make_communicators(const std::vector<int>& devices) {
  if (devices.empty()) throw Error("roofbench nccl: make_communicators needs at least one device");
  disable_nccl_multicast();
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  ROOFBENCH_NCCL(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  return Communicators(std::move(comms), devices);
}

// The communicators of a case's ranks, devices[r] being ctx.device(r)'s. In one process (no launcher:
// ctx.world_size() == ctx.ranks()), every GPU of it as above. Under torchrun, srun or mpirun (one roofbench
// per GPU, the ranks in several processes), as nccl-tests does with MPI: global rank 0 makes NCCL's unique
// id, ctx.broadcast hands it to every process (through the host's rendezvous), and each local rank joins
// with ncclCommInitRank(world size, id, its global rank), the local ranks inside one group (one thread
// joins them all). disable_nccl_multicast() runs first in every process.
inline Communicators make_communicators(Context& ctx, const std::vector<int>& devices) {
  if (ctx.world_size() == ctx.ranks()) return make_communicators(devices);
  if (devices.empty()) throw Error("roofbench nccl: make_communicators needs at least one device");
  disable_nccl_multicast();
  ncclUniqueId id{};
  if (ctx.first_rank() == 0) ROOFBENCH_NCCL(ncclGetUniqueId(&id));
  const std::string from_rank_0 = ctx.broadcast(std::string(reinterpret_cast<const char*>(&id), sizeof id));
  if (from_rank_0.size() != sizeof id)
    throw Error("roofbench nccl: rank 0's unique id has " + std::to_string(from_rank_0.size()) + " bytes, not " +
                std::to_string(sizeof id));
  std::memcpy(&id, from_rank_0.data(), sizeof id);
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  try {
    GroupScope group;
    for (std::size_t r = 0; r < devices.size(); ++r) {
      cuda::DeviceGuard on(devices[r]);
      ROOFBENCH_NCCL(ncclCommInitRank(&comms[r], ctx.world_size(), id, ctx.first_rank() + static_cast<int>(r)));
    }
    group.end();
  } catch (...) {
    for (ncclComm_t comm : comms)
      if (comm) (void)ncclCommAbort(comm);
    throw;
  }
  return Communicators(std::move(comms), devices);
}

}  // namespace roofbench::nccl
