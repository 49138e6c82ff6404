// The rungs' constructors, for make_trainer (trainer.cu); each lives in its own file.
#pragma once

#include <memory>

#include "trainer.hpp"

namespace roofbench::gpt::cuda {

std::unique_ptr<Trainer> make_eager_trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream,
                                            DeviceCorpus corpus, std::uint64_t data_seed);
std::unique_ptr<Trainer> make_fused_trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream,
                                            DeviceCorpus corpus, std::uint64_t data_seed, std::uint64_t init_seed,
                                            StepReplay replay);
std::unique_ptr<Trainer> make_bf16_trainer(const Config& cfg, const DeviceAllocator& alloc, cudaStream_t stream,
                                           DeviceCorpus corpus, std::uint64_t data_seed, std::uint64_t init_seed,
                                           bool checkpoint, StepReplay replay);

}  // namespace roofbench::gpt::cuda
