// The double-precision CPU reference of model.hpp's GPT: the truth every GPU rung is gated against.
// Written for reading, like llm.c's reference: each layer's forward with its backward next to it in
// reference.cpp. Every function takes the flat parameter array of model.hpp's layout.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model.hpp"

namespace roofbench::gpt::reference {

// The parameters at initialisation (InitKind of each slot); the same seed gives the same values on every
// platform. The GPU rungs start from these (rounded to fp32) so both sides train the same model.
std::vector<double> init_parameters(const Config& cfg, std::uint64_t seed);

// A LayerNorm's output and the per-position statistics its backward needs.
struct Normalized {
  std::vector<double> out;   // [N, C]
  std::vector<double> mean;  // [N]
  std::vector<double> rstd;  // [N] 1 / sqrt(biased variance + eps)
};

// What one block's forward computed and its backward reads again. N = batch * context.
struct BlockActivations {
  std::vector<double> input;  // [N, C] residual stream entering the block
  Normalized ln1;
  std::vector<double> qkv;        // [N, 3C], q and k already rotated by RoPE
  std::vector<double> attention;  // [batch, heads, T, T] softmax probabilities, zero above the diagonal
  std::vector<double> attn_out;   // [N, C] heads concatenated, before attn_proj
  std::vector<double> mid;        // [N, C] residual stream after the attention half
  Normalized ln2;
  std::vector<double> fc;    // [N, 4C] before GELU
  std::vector<double> gelu;  // [N, 4C]
};

struct Activations {
  int batch = 0;
  std::vector<std::uint8_t> inputs;  // [N] token ids
  std::vector<BlockActivations> blocks;
  std::vector<double> final_residual;  // [N, C] the stream after the last block
  Normalized lnf;
  std::vector<double> logits;  // [N, vocab]
};

// inputs: batch * context token ids, sequence after sequence.
Activations forward(const Config& cfg, std::span<const double> params, std::span<const std::uint8_t> inputs, int batch);

// Mean cross-entropy of forward's logits against targets (batch * context ids).
double loss(const Config& cfg, const Activations& acts, std::span<const std::uint8_t> targets);

// Gradient of loss() with respect to every parameter, in the flat layout.
std::vector<double> backward(const Config& cfg, std::span<const double> params, const Activations& acts,
                             std::span<const std::uint8_t> targets);

// One torch.optim.AdamW step over the flat arrays; step starts at 1; m and v start at zero.
void adamw_step(std::span<double> params, std::span<const double> grads, std::span<double> m, std::span<double> v,
                int step, const AdamW& opt);

}  // namespace roofbench::gpt::reference
