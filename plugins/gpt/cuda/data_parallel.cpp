// R5's engine: k trainers of one rung, their comm streams and the bucketed, overlapped gradient all-reduce
// (data_parallel.hpp says how a step runs and how it runs across nodes).
#include "data_parallel.hpp"

#include <nccl.h>

#include <algorithm>
#include <exception>
#include <future>
#include <string>
#include <utility>

#include "roofbench/cuda.hpp"

namespace roofbench::gpt::cuda {

std::uint64_t rank_data_seed(std::uint64_t base_seed, int rank) {
  return base_seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(rank);
}

namespace {

// A start and a stop event on the current device, for the cost model's measurements.
class EventTimer {
 public:
  EventTimer() {
    ROOFBENCH_CUDA(cudaEventCreate(&start_));
    const cudaError_t status = cudaEventCreate(&stop_);
    if (status != cudaSuccess) (void)cudaEventDestroy(start_);
    ROOFBENCH_CUDA(status);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  void start(cudaStream_t stream) { ROOFBENCH_CUDA(cudaEventRecord(start_, stream)); }
  void stop(cudaStream_t stream) { ROOFBENCH_CUDA(cudaEventRecord(stop_, stream)); }
  // Waits for the stop event.
  double seconds() {
    ROOFBENCH_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    ROOFBENCH_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

DataParallelTrainer::DataParallelTrainer(const Config& cfg, Rung rung, std::vector<DataParallelRank> ranks,
                                         std::uint64_t data_seed, std::uint64_t init_seed, Context* world)
    : cfg_(cfg),
      world_size_(world ? world->world_size() : static_cast<int>(ranks.size())),
      first_rank_(world ? world->first_rank() : 0) {
  if (ranks.empty()) throw Error("gpt R5: data parallelism needs at least one rank");
  // Only these two call the per-block hook the buckets need (trainer.hpp's StepHooks).
  if (rung != Rung::eager && rung != Rung::bf16)
    throw Error(std::string("gpt R5: data parallel runs on R0 (eager) or R3 (bf16), not ") + to_string(rung));
  cfg_.validate();

  // Buckets follow the flat layout (model.hpp): wte, block 0 ... block L-1, LNf. Each block starts at its
  // ln1_w, so block l's bucket runs from there to the next block's start, the top block's on to the end
  // (LNf included). Checked to tile the whole gradient: a layout change must not leave a parameter
  // unreduced, which would let the replicas drift apart silently.
  const ParameterOffsets offsets = parameter_offsets(cfg_);
  for (int l = 0; l < cfg_.layers; ++l) {
    const std::size_t first = offsets.layers[static_cast<std::size_t>(l)].ln1_w;
    const std::size_t end =
        l + 1 < cfg_.layers ? offsets.layers[static_cast<std::size_t>(l) + 1].ln1_w : offsets.total;
    buckets_.push_back({first, end - first});
  }
  buckets_.push_back({offsets.wte, offsets.layers.front().ln1_w - offsets.wte});
  std::vector<Bucket> in_order = buckets_;
  std::sort(in_order.begin(), in_order.end(), [](const Bucket& a, const Bucket& b) { return a.offset < b.offset; });
  std::size_t covered = 0;
  for (const Bucket& bucket : in_order) {
    if (bucket.offset != covered || bucket.count == 0)
      throw Error("gpt R5: the gradient buckets do not tile the parameter layout; model.hpp's order changed");
    covered += bucket.count;
  }
  if (covered != offsets.total)
    throw Error("gpt R5: the gradient buckets do not tile the parameter layout; model.hpp's order changed");

  std::vector<int> devices;
  try {
    ranks_.resize(ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const DataParallelRank& rank = ranks[r];
      RankState& state = ranks_[r];
      state.device = rank.device;
      devices.push_back(rank.device);
      roofbench::cuda::DeviceGuard on(rank.device);
      state.trainer = make_trainer(rung, cfg_, rank.alloc, rank.stream, rank.corpus,
                                   rank_data_seed(data_seed, first_rank_ + static_cast<int>(r)), init_seed,
                                   StepReplay::enqueued);
      // Non-blocking: the compute stream may be the legacy default stream, which would otherwise
      // serialise with it and undo the overlap. Highest priority: NCCL's kernels then get SMs as soon as a
      // bucket is ready instead of queueing behind the backward's kernels.
      int lowest_priority = 0, highest_priority = 0;
      ROOFBENCH_CUDA(cudaDeviceGetStreamPriorityRange(&lowest_priority, &highest_priority));
      ROOFBENCH_CUDA(cudaStreamCreateWithPriority(&state.comm_stream, cudaStreamNonBlocking, highest_priority));
      state.bucket_ready.assign(buckets_.size(), nullptr);
      for (cudaEvent_t& event : state.bucket_ready)
        ROOFBENCH_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      ROOFBENCH_CUDA(cudaEventCreateWithFlags(&state.reduced, cudaEventDisableTiming));
      install_hooks(static_cast<int>(r));
    }
    comms_ = world ? nccl::make_communicators(*world, devices) : nccl::make_communicators(devices);
  } catch (...) {
    release_handles();
    throw;
  }
}

DataParallelTrainer::~DataParallelTrainer() { release_handles(); }

void DataParallelTrainer::release_handles() noexcept {
  int previous = 0;
  (void)cudaGetDevice(&previous);
  for (RankState& state : ranks_) {
    (void)cudaSetDevice(state.device);
    if (state.comm_stream) (void)cudaStreamSynchronize(state.comm_stream);
    for (cudaEvent_t& event : state.bucket_ready)
      if (event) (void)cudaEventDestroy(std::exchange(event, nullptr));
    if (state.reduced) (void)cudaEventDestroy(std::exchange(state.reduced, nullptr));
    if (state.comm_stream) (void)cudaStreamDestroy(std::exchange(state.comm_stream, nullptr));
  }
  (void)cudaSetDevice(previous);
}

void DataParallelTrainer::install_hooks(int rank) {
  Trainer::StepHooks hooks;
  hooks.block_backward_done = [this, rank](int layer) { reduce_bucket(rank, layer); };
  hooks.backward_done = [this, rank] {
    reduce_bucket(rank, buckets() - 1);  // wte's, final once the embedding's backward has added its share
    join_reductions(rank);
  };
  ranks_.at(static_cast<std::size_t>(rank)).trainer->set_step_hooks(std::move(hooks));
}

void DataParallelTrainer::reduce_bucket(int rank, int bucket) {
  RankState& state = ranks_.at(static_cast<std::size_t>(rank));
  const Bucket& slice = buckets_.at(static_cast<std::size_t>(bucket));
  cudaEvent_t ready = state.bucket_ready[static_cast<std::size_t>(bucket)];
  ROOFBENCH_CUDA(cudaEventRecord(ready, state.trainer->stream()));
  ROOFBENCH_CUDA(cudaStreamWaitEvent(state.comm_stream, ready, 0));
  // In place into the trainer's own gradient: between its backward and its optimizer is exactly where the
  // hooks are called for, and the buffer is device memory the trainer allocated writable.
  float* gradient = const_cast<float*>(state.trainer->grads()) + slice.offset;
  // ncclAvg: sum, then divide by k, in one pass. With one rank NCCL launches nothing for an in-place
  // all-reduce, so one rank is R0 exactly (the events only order the streams).
  ROOFBENCH_NCCL(ncclAllReduce(gradient, gradient, slice.count, ncclFloat32, ncclAvg, comms_[rank], state.comm_stream));
}

void DataParallelTrainer::join_reductions(int rank) {
  RankState& state = ranks_.at(static_cast<std::size_t>(rank));
  ROOFBENCH_CUDA(cudaEventRecord(state.reduced, state.comm_stream));
  ROOFBENCH_CUDA(cudaStreamWaitEvent(state.trainer->stream(), state.reduced, 0));
}

// A thread per rank and per call: a step takes tens of milliseconds, starting a thread tens of
// microseconds, and fresh threads leave nothing behind between cases. One rank needs no thread at all.
template <typename PerRank>
void DataParallelTrainer::for_each_rank(PerRank&& work) {
  auto on_rank = [this, &work](int rank) {
    roofbench::cuda::DeviceGuard on(ranks_.at(static_cast<std::size_t>(rank)).device);
    work(rank);
  };
  std::vector<std::future<void>> others;
  std::exception_ptr first_failure;
  try {
    for (int rank = 1; rank < ranks(); ++rank) others.push_back(std::async(std::launch::async, on_rank, rank));
    on_rank(0);
  } catch (...) {
    first_failure = std::current_exception();
  }
  for (std::future<void>& other : others) {
    try {
      other.get();
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
}

void DataParallelTrainer::initialize(std::uint64_t seed) {
  for_each_rank([this, seed](int rank) { trainer(rank).initialize(seed); });
}

void DataParallelTrainer::train_step() {
  for_each_rank([this](int rank) { trainer(rank).train_step(); });
}

void DataParallelTrainer::synchronize() {
  for (const RankState& state : ranks_) {
    roofbench::cuda::DeviceGuard on(state.device);
    ROOFBENCH_CUDA(cudaStreamSynchronize(state.comm_stream));
    ROOFBENCH_CUDA(cudaStreamSynchronize(state.trainer->stream()));
  }
}

double DataParallelTrainer::time_single_rank_step(int warmup, int repetitions) {
  if (repetitions < 1) throw Error("gpt R5: time_single_rank_step needs at least one repetition");
  RankState& state = ranks_.front();
  roofbench::cuda::DeviceGuard on(state.device);
  state.trainer->set_step_hooks({});  // the rung as it is: no events, no all-reduce
  double seconds = 0;
  try {
    for (int i = 0; i < warmup; ++i) state.trainer->train_step();
    EventTimer timer;
    timer.start(state.trainer->stream());
    for (int i = 0; i < repetitions; ++i) state.trainer->train_step();
    timer.stop(state.trainer->stream());
    seconds = timer.seconds() / repetitions;
  } catch (...) {
    install_hooks(0);
    throw;
  }
  install_hooks(0);
  return seconds;
}

double DataParallelTrainer::time_gradient_allreduce(int warmup, int repetitions) {
  if (repetitions < 1) throw Error("gpt R5: time_gradient_allreduce needs at least one repetition");
  if (world_size_ == 1) return 0;
  const std::size_t count = trainer(0).parameter_count();
  // One thread drives every rank here, so each all-reduce is one NCCL group across the ranks.
  auto all_reduce_everywhere = [&] {
    nccl::GroupScope group;
    for (int rank = 0; rank < ranks(); ++rank) {
      RankState& state = ranks_[static_cast<std::size_t>(rank)];
      float* gradient = const_cast<float*>(state.trainer->grads());  // garbage is as fast to sum as gradients
      ROOFBENCH_NCCL(ncclAllReduce(gradient, gradient, count, ncclFloat32, ncclAvg, comms_[rank], state.comm_stream));
    }
    group.end();
  };
  synchronize();  // nothing of a step may still be writing the gradients
  for (int i = 0; i < warmup; ++i) all_reduce_everywhere();
  std::vector<std::unique_ptr<EventTimer>> timers;
  for (const RankState& state : ranks_) {
    roofbench::cuda::DeviceGuard on(state.device);
    timers.push_back(std::make_unique<EventTimer>());
    timers.back()->start(state.comm_stream);
  }
  for (int i = 0; i < repetitions; ++i) all_reduce_everywhere();
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    roofbench::cuda::DeviceGuard on(ranks_[r].device);
    timers[r]->stop(ranks_[r].comm_stream);
  }
  double slowest = 0;  // every stop recorded before waiting on any, so none is stamped late
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    roofbench::cuda::DeviceGuard on(ranks_[r].device);
    slowest = std::max(slowest, timers[r]->seconds());
  }
  return slowest / repetitions;
}

void DataParallelTrainer::destroy() {
  synchronize();
  comms_.destroy();
}

}  // namespace roofbench::gpt::cuda
