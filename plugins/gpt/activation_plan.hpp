// Where a bf16 trainer (R2, R3, R4) keeps each block's activations, and which blocks the backward must
// recompute: the bookkeeping of activation checkpointing, free of CUDA so the CPU tests can check it.
//
// Without checkpointing (R2, R3) every block has its own set of activation buffers. With it (R4) there is one
// set, shared by all blocks: the forward keeps only each block's input (the residual stream entering it,
// which every trainer keeps anyway) and the set ends up holding the top block's activations; the backward,
// walking the blocks top down, first recomputes each lower block's activations from its input into the set,
// which the block above has finished with by then.
#pragma once

#include <cstddef>

#include "model.hpp"

namespace roofbench::gpt {

struct ActivationPlan {
  int layers = 0;
  bool checkpoint = false;

  int sets() const { return checkpoint ? 1 : layers; }
  // The activation set block `layer` writes in the forward and reads in its backward.
  int set_of(int layer) const { return checkpoint ? 0 : layer; }
  // Whether the backward recomputes block `layer`'s forward (from its input) before its own backward: every
  // block but the top one, which the forward left in the shared set.
  bool recomputes(int layer) const { return checkpoint && layer != layers - 1; }
};

// Bytes of one set of a block's activations as the bf16 trainers store them (N = batch * context):
// bf16 ln1, qkv, attn_out, ln2, fc, GELU ([N, C], [N, 3C], [N, C], [N, C], [N, 4C], [N, 4C]), the fp32
// residual stream after the attention half [N, C], four fp32 LayerNorm statistics [N] and the attention's
// fp32 log-sum-exp [batch, heads, T].
inline std::size_t block_activation_bytes(const Config& cfg) {
  const std::size_t N = static_cast<std::size_t>(cfg.batch) * cfg.context, C = static_cast<std::size_t>(cfg.channels);
  const std::size_t bf16_elements = N * (C + 3 * C + C + C + 4 * C + 4 * C);
  const std::size_t fp32_elements = N * C + 4 * N + static_cast<std::size_t>(cfg.batch) * cfg.heads * cfg.context;
  return 2 * bf16_elements + 4 * fp32_elements;
}

// The activation bytes a plan keeps through the step: its sets, plus the fp32 residual stream entering each
// block and leaving the last (kept with and without checkpointing).
inline std::size_t kept_activation_bytes(const Config& cfg, const ActivationPlan& plan) {
  const std::size_t N = static_cast<std::size_t>(cfg.batch) * cfg.context;
  return static_cast<std::size_t>(plan.sets()) * block_activation_bytes(cfg) +
         static_cast<std::size_t>(cfg.layers + 1) * N * cfg.channels * 4;
}

}  // namespace roofbench::gpt
