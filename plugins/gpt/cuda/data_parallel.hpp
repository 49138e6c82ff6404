// R5, data parallel: one rung's trainer (R0 eager, or R3's bf16 step) replicated on k GPUs, each rank
// training on its own fresh batches (weak scaling), gradients averaged across ranks with NCCL in per-block
// buckets that overlap the backward pass, the way PyTorch's DistributedDataParallel runs (the case study's
// Rung 5, and its exercise "stack DDP on the full ladder"). The gradient is reduced in fp32 on both rungs:
// it is the fp32 master gradient AdamW reads (bf16 autocast computes in bf16 but accumulates the parameters'
// gradients in fp32, and DDP reduces them in the parameters' dtype); reducing in bf16 would halve the bytes
// and round every rank's contribution to 8 significant bits.
//
// One step, per rank r (all ranks alike, on their own GPU):
//   compute stream (the trainer's): draw batch, forward, backward block L-1 ... block 0, embedding, AdamW
//   comm stream:                    after block l's backward: wait for it, all-reduce (average) block l's
//                                   gradients; after the embedding: wte's; then the compute stream waits
//                                   for the comm stream before AdamW reads a gradient.
// The flat gradient is layer-major (model.hpp), so every bucket is one contiguous slice: block l's
// parameters (the top block's bucket also holds LNf's, which the head writes before any block), and wte's.
// NCCL reduces block l while the compute stream works on block l-1.
//
// Threads: one host thread per rank enqueues that rank's whole step, exactly what one process per GPU does
// (and what NCCL expects of one rank per thread: every call of a rank may block until its peers arrive, so
// one thread driving all ranks would have to group each bucket across ranks, which the trainer's
// one-rank-at-a-time step cannot do without splitting it up). Rank 0 runs on the calling thread.
//
// Across nodes the same rung runs unchanged as one process per GPU, roofbench launched by torchrun, srun or
// mpirun: each process builds a DataParallelTrainer over its one GPU, with its communicator from
// ncclCommInitRank (global rank 0 calls ncclGetUniqueId, the host's rendezvous hands the id to every process
// through Context::broadcast, each joins with the world size and its global rank: make_communicators(ctx, ...),
// kernels/nccl_communicators). The buckets, the comm stream and the overlap stay as they are; only the
// all-reduces cross the network instead of NVLink.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model.hpp"
#include "roofbench/nccl/communicators.hpp"
#include "roofbench/plugin.hpp"
#include "trainer.hpp"

namespace roofbench::gpt::cuda {

// What one rank runs on: its GPU, the stream its steps go to, where its memory comes from and its copy of
// the corpus on that GPU.
struct DataParallelRank {
  int device = 0;
  cudaStream_t stream = nullptr;
  DeviceAllocator alloc;
  DeviceCorpus corpus;
};

// Rank r draws its batches from this seed: rank 0 from the base seed itself, so that one rank is R0 on
// the same batches; the others from seeds the draw's hash turns into unrelated batches.
std::uint64_t rank_data_seed(std::uint64_t base_seed, int rank);

class DataParallelTrainer {
 public:
  // One trainer of `rung` (eager or bf16, enqueued step by step so that the buckets can hook into the
  // backward) per rank, every one initialised from `init_seed` (identical replicas), and the ranks'
  // communicators (make_communicators). Rank r's device memory comes from ranks[r].alloc only. `world`: the
  // case's context when its ranks may be in several processes (a launcher started one roofbench per GPU):
  // `ranks` are then this process's, global rank world->first_rank() + r, and the clique has every process's.
  DataParallelTrainer(const Config& cfg, Rung rung, std::vector<DataParallelRank> ranks, std::uint64_t data_seed,
                      std::uint64_t init_seed, Context* world = nullptr);
  ~DataParallelTrainer();
  DataParallelTrainer(const DataParallelTrainer&) = delete;
  DataParallelTrainer& operator=(const DataParallelTrainer&) = delete;

  int ranks() const { return static_cast<int>(ranks_.size()); }  // in this process
  int world_size() const { return world_size_; }                  // in the clique, every process's
  int first_rank() const { return first_rank_; }
  Trainer& trainer(int rank) { return *ranks_.at(static_cast<std::size_t>(rank)).trainer; }
  int device(int rank) const { return state(rank).device; }
  int buckets() const { return static_cast<int>(buckets_.size()); }

  // A fresh start on every rank, synchronous: the same parameters everywhere, moments and counters zero.
  void initialize(std::uint64_t seed);
  // One step on every rank: enqueues only (no host sync), each rank on its own thread.
  void train_step();
  // Waits for every rank's stream.
  void synchronize();

  // The cost model's inputs, measured with CUDA events (each leaves the ranks' parameters changed or
  // their gradients garbage: initialize() afterwards). Seconds per call, after `warmup` untimed calls:
  // one plain step of the rung on rank 0 alone, no hooks, no communication;
  double time_single_rank_step(int warmup, int repetitions);
  // one all-reduce of the whole gradient on all ranks together (the slowest of this process's ranks). 0 for
  // one rank in all, where an in-place all-reduce is no work at all.
  double time_gradient_allreduce(int warmup, int repetitions);

  // The orderly end of the communicators (the destructor only aborts them).
  void destroy();

 private:
  struct Bucket {
    std::size_t offset = 0, count = 0;  // in floats of the flat gradient
  };
  struct RankState {
    int device = 0;
    std::unique_ptr<Trainer> trainer;
    cudaStream_t comm_stream = nullptr;
    std::vector<cudaEvent_t> bucket_ready;  // recorded on the compute stream when bucket b is final
    cudaEvent_t reduced = nullptr;           // recorded on the comm stream after the last bucket
  };

  const RankState& state(int rank) const { return ranks_.at(static_cast<std::size_t>(rank)); }
  // Streams and events, for the destructor and a constructor that failed half way.
  void release_handles() noexcept;
  void install_hooks(int rank);
  // Bucket b of `rank`: the compute stream marks it final, the comm stream waits for that and averages it.
  void reduce_bucket(int rank, int bucket);
  // Makes the compute stream wait for every bucket of this step.
  void join_reductions(int rank);
  // Runs work(rank) for every rank at once, rank r on its own thread with its device current; rethrows the
  // first failure after every rank has returned.
  template <typename PerRank>
  void for_each_rank(PerRank&& work);

  Config cfg_;
  int world_size_ = 1, first_rank_ = 0;
  std::vector<Bucket> buckets_;  // bucket of block l at l; wte's last
  std::vector<RankState> ranks_;
  nccl::Communicators comms_;
};

// The benchmark cases, R5 on R0 and on R3 (data_parallel_case.cpp), registered by the plugin where NCCL is
// available.
std::vector<CaseSpec> data_parallel_cases();

}  // namespace roofbench::gpt::cuda
