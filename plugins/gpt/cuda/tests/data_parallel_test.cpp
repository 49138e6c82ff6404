// R5 data parallel on a tiny config, on both rungs it replicates (R0 eager, R3's bf16 step): replicas that
// stay identical on every visible GPU, and one rank that is its rung exactly (with one rank NCCL launches
// nothing for an in-place all-reduce and the bucket events only order the streams, so the parameters must
// match bit for bit, not merely within TF32 or bf16 noise; for bf16 that also says the enqueued step is the
// graph-replayed one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "corpus.hpp"
#include "data_parallel.hpp"
#include "gpu_test_util.hpp"
#include "roofbench/cuda.hpp"
#include "trainer.hpp"

namespace roofbench::gpt::cuda {
namespace {

using testing::tiny_config;
using testing::tiny_corpus;

constexpr int kSteps = 10;
constexpr std::uint64_t kDataSeed = 42, kInitSeed = 7;

// One rank's memory, stream and corpus on its GPU, freed when the test ends.
struct RankResources {
  explicit RankResources(int device_index) : device(device_index) {
    roofbench::cuda::DeviceGuard on(device);
    ROOFBENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const auto tokens = tiny_corpus();
    corpus = DeviceCorpus{memory.upload(tokens), tokens.size()};
  }
  ~RankResources() {
    roofbench::cuda::DeviceGuard on(device);
    (void)cudaStreamSynchronize(stream);
    (void)cudaStreamDestroy(stream);
  }
  RankResources(const RankResources&) = delete;
  RankResources& operator=(const RankResources&) = delete;

  DataParallelRank rank() const { return {device, stream, memory.allocator(), corpus}; }

  int device;
  testing::Device memory;  // freed after the destructor's body has drained and destroyed the stream
  cudaStream_t stream = nullptr;
  DeviceCorpus corpus;
};

std::vector<float> parameters_of(const Trainer& trainer, int device) {
  roofbench::cuda::DeviceGuard on(device);
  ROOFBENCH_CUDA(cudaDeviceSynchronize());
  std::vector<float> host(trainer.parameter_count());
  ROOFBENCH_CUDA(cudaMemcpy(host.data(), trainer.params(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class GptDataParallel : public ::testing::TestWithParam<Rung> {};

TEST_P(GptDataParallel, ReplicasStayIdenticalOnEveryVisibleGpu) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  int gpus = 0;
  ROOFBENCH_CUDA(cudaGetDeviceCount(&gpus));
  std::vector<std::unique_ptr<RankResources>> resources;
  std::vector<DataParallelRank> ranks;
  for (int device = 0; device < gpus; ++device) {
    resources.push_back(std::make_unique<RankResources>(device));
    ranks.push_back(resources.back()->rank());
  }
  DataParallelTrainer trainer(tiny_config(), GetParam(), ranks, kDataSeed, kInitSeed);
  ASSERT_EQ(trainer.ranks(), gpus);
  EXPECT_EQ(trainer.buckets(), tiny_config().layers + 1);
  for (int step = 0; step < kSteps; ++step) trainer.train_step();
  trainer.synchronize();

  const std::vector<float> rank0 = parameters_of(trainer.trainer(0), trainer.device(0));
  for (int rank = 1; rank < trainer.ranks(); ++rank)
    EXPECT_TRUE(bit_identical(parameters_of(trainer.trainer(rank), trainer.device(rank)), rank0))
        << "rank " << rank << " holds different parameters from rank 0 after " << kSteps << " steps";
  {
    roofbench::cuda::DeviceGuard on(trainer.device(0));
    const auto losses = testing::Device::download(trainer.trainer(0).loss_history(), kSteps);
    for (float loss : losses) EXPECT_TRUE(std::isfinite(loss));
  }
  trainer.destroy();
}

TEST_P(GptDataParallel, OneRankIsItsRungBitForBit) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  RankResources data_parallel_rank(0), plain_rank(0);
  DataParallelTrainer data_parallel(tiny_config(), GetParam(), {data_parallel_rank.rank()}, kDataSeed, kInitSeed);
  roofbench::cuda::DeviceGuard on(0);
  auto plain = make_trainer(GetParam(), tiny_config(), plain_rank.memory.allocator(), plain_rank.stream,
                            plain_rank.corpus, kDataSeed, kInitSeed);
  for (int step = 0; step < kSteps; ++step) {
    data_parallel.train_step();
    plain->train_step();
  }
  data_parallel.synchronize();
  EXPECT_TRUE(bit_identical(parameters_of(data_parallel.trainer(0), 0), parameters_of(*plain, 0)))
      << "one data-parallel rank must be " << to_string(GetParam()) << " on the same batches";
  data_parallel.destroy();
}

TEST_P(GptDataParallel, CostModelInputsAreMeasured) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  RankResources resources(0);
  DataParallelTrainer trainer(tiny_config(), GetParam(), {resources.rank()}, kDataSeed, kInitSeed);
  EXPECT_GT(trainer.time_single_rank_step(1, 2), 0.0);
  EXPECT_EQ(trainer.time_gradient_allreduce(1, 2), 0.0);  // one rank: no communication
  trainer.destroy();
}

INSTANTIATE_TEST_SUITE_P(Rungs, GptDataParallel, ::testing::Values(Rung::eager, Rung::bf16),
                         [](const ::testing::TestParamInfo<Rung>& info) { return std::string(to_string(info.param)); });

TEST(GptDataParallelRungs, OnlyTheRungsWithBlockHooksAreReplicated) {
  ROOFBENCH_GPT_REQUIRE_GPU();
  RankResources resources(0);
  EXPECT_THROW(DataParallelTrainer(tiny_config(), Rung::fused, {resources.rank()}, kDataSeed, kInitSeed), Error);
}

}  // namespace
}  // namespace roofbench::gpt::cuda
