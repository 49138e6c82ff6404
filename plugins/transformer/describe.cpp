#include "cases.hpp"

namespace roofbench::transformer {

void describe(Plugin& plugin) {
  plugin.name = "transformer";
  plugin.description =
      "GPT-2 small's layers from decode to prefill: attention prefill (naive, fused flash-attention, cuDNN) and "
      "decode (naive, split-KV flash-decoding), and the MLP's linear layers over a token sweep";
  add_attention_cases(plugin);
  add_linear_cases(plugin);
}

}  // namespace roofbench::transformer
