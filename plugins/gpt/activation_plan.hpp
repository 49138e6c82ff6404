// Where a bf16 trainer (R2, R3, R4) keeps each block's activations, and which blocks the backward must
// recompute: the bookkeeping of activation checkpointing, free of CUDA so the CPU tests can check it.
//
// Without checkpointing (R2, R3) every block has its own set of activation buffers. With it (R4) there is one
// set, shared by all blocks: the forward keeps only each block's input (the residual stream entering it,
// which every trainer keeps anyway) and the set ends up holding the top block's activations; the backward,
// walking the blocks top down, first recomputes each lower block's activations from its input into the set,
// which the block above has finished with by then. The second half of this file places the backward's bf16
// gradient scratch, which R4 keeps in that set.
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

// ---- The bf16 step's gradient scratch and the memory each buffer lives in. ----
//
// A block's backward (the bf16 trainer's order): fc_proj's dgrad writes d_gelu, GELU's backward reads it and
// fc's pre-activation and writes d_fc, fc's dgrad reads d_fc and writes d_ln, LN2's backward reads d_ln and
// writes d_resid16, attn_proj's dgrad writes d_attn_out, the attention's backward reads it and writes d_qkv,
// qkv's dgrad reads d_qkv and writes d_ln, LN1's backward reads d_ln and writes d_resid16. In the forward,
// branch (a projection's output before its residual add) lives from the projection to the add; lnf16 (LNf's
// output) from the last add to the head's weight gradient, which runs before LNf's backward writes d_resid16.
//
// Every plan shares [N, C] among branch, d_ln and d_attn_out, and [N, 4C] between d_gelu and d_qkv. With
// checkpointing the one activation set is the block's in backward, so what that block's backward has read
// for the last time is free until the recompute of the block below:
//   d_gelu in the set's gelu: fc_proj's weight gradient (the last read of gelu) runs before its dgrad;
//   d_fc   in the set's gelu too: GELU's backward runs in place over d_gelu (each element read once, by the
//          thread that then writes it);
//   d_qkv  in the set's fc: GELU's backward was the last read of fc;
//   d_resid16 in lnf16: the head's weight gradient is lnf16's last read, before LNf's backward.
// So R4 keeps no [N, 4C] gradient scratch of its own, and no d_resid16.
enum class Bf16Buffer {
  fc,    // the set's x w^T of fc, [N, 4C]
  gelu,  // the set's GELU output, [N, 4C]
  // The trainer allocates the buffers with a home of their own in this order.
  lnf16,
  d_logits16,
  d_resid16,
  d_fc16,
  branch16,
  d_ln16,
  d_attn_out16,
  d_gelu16,
  d_qkv16,
};
inline constexpr int kBf16Buffers = static_cast<int>(Bf16Buffer::d_qkv16) + 1;

// The buffer whose memory `b` uses: `b` itself where it has memory of its own.
inline Bf16Buffer home_of(Bf16Buffer b, const ActivationPlan& plan) {
  using B = Bf16Buffer;
  switch (b) {
    case B::branch16:
    case B::d_attn_out16:
      return B::d_ln16;
    case B::d_gelu16:
    case B::d_fc16:
      return plan.checkpoint ? B::gelu : b;
    case B::d_qkv16:
      return plan.checkpoint ? B::fc : B::d_gelu16;
    case B::d_resid16:
      return plan.checkpoint ? B::lnf16 : b;
    default:
      return b;
  }
}

// Whether fc_proj's backward runs its weight gradient (which reads gelu) before its dgrad (which writes
// d_gelu): needed where d_gelu lives in gelu.
inline bool fc_proj_weight_gradient_first(const ActivationPlan& plan) {
  return home_of(Bf16Buffer::d_gelu16, plan) == Bf16Buffer::gelu;
}

// Elements of `b` per position (bf16 each; d_logits16's width is the vocabulary).
inline std::size_t bf16_buffer_width(Bf16Buffer b, const Config& cfg) {
  using B = Bf16Buffer;
  const std::size_t C = static_cast<std::size_t>(cfg.channels);
  switch (b) {
    case B::fc:
    case B::gelu:
    case B::d_gelu16:
    case B::d_fc16:
      return 4 * C;
    case B::d_qkv16:
      return 3 * C;
    case B::d_logits16:
      return static_cast<std::size_t>(cfg.vocab);
    default:
      return C;
  }
}

// Bytes of the bf16 buffers a plan allocates outside its activation sets (those with a home of their own,
// the set's fc and gelu aside), plus the attention's fp32 delta scratch [batch, heads, T].
inline std::size_t bf16_scratch_bytes(const Config& cfg, const ActivationPlan& plan) {
  const std::size_t N = static_cast<std::size_t>(cfg.batch) * cfg.context;
  std::size_t bytes = static_cast<std::size_t>(cfg.batch) * cfg.heads * cfg.context * 4;
  for (int i = 0; i < kBf16Buffers; ++i) {
    const auto b = static_cast<Bf16Buffer>(i);
    if (b != Bf16Buffer::fc && b != Bf16Buffer::gelu && home_of(b, plan) == b)
      bytes += 2 * N * bf16_buffer_width(b, cfg);
  }
  return bytes;
}

}  // namespace roofbench::gpt
