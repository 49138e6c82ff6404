#include "model.hpp"

#include <gtest/gtest.h>

namespace roofbench::gpt {
namespace {

TEST(GptModel, DefaultConfigHasTheCaseStudysParameterCount) { EXPECT_EQ(parameter_count(Config{}), 18'929'664u); }

TEST(GptModel, LayoutIsContiguousAndInTheDocumentedOrder) {
  const Config cfg;
  const auto slots = layout(cfg);
  ASSERT_EQ(slots.size(), 1u + 12u * static_cast<std::size_t>(cfg.layers) + 2u);
  std::size_t next = 0;
  for (const auto& slot : slots) {
    EXPECT_EQ(slot.offset, next) << slot.name;  // no gap, no overlap
    std::size_t count = 1;
    for (int extent : slot.shape) count *= static_cast<std::size_t>(extent);
    EXPECT_EQ(slot.count, count) << slot.name;
    next += slot.count;
  }
  EXPECT_EQ(next, parameter_count(cfg));
  EXPECT_EQ(slots.front().name, "wte");
  EXPECT_EQ(slots[3].name, "h0.qkv_w");
  EXPECT_EQ(slots[3].shape, (std::vector<int>{3 * cfg.channels, cfg.channels}));
  EXPECT_EQ(slots.back().name, "lnf_b");
}

TEST(GptModel, OffsetsAgreeWithTheLayout) {
  const Config cfg{.channels = 16, .layers = 2, .heads = 2};
  const auto slots = layout(cfg);
  const auto off = parameter_offsets(cfg);
  auto offset_of = [&](const std::string& name) {
    for (const auto& slot : slots)
      if (slot.name == name) return slot.offset;
    ADD_FAILURE() << "no slot " << name;
    return std::size_t{0};
  };
  EXPECT_EQ(off.wte, offset_of("wte"));
  EXPECT_EQ(off.layers[1].ln1_w, offset_of("h1.ln1_w"));
  EXPECT_EQ(off.layers[1].attn_proj_b, offset_of("h1.attn_proj_b"));
  EXPECT_EQ(off.layers[0].fc_proj_w, offset_of("h0.fc_proj_w"));
  EXPECT_EQ(off.lnf_w, offset_of("lnf_w"));
  EXPECT_EQ(off.total, parameter_count(cfg));
}

TEST(GptModel, InitKindsFollowGpt2) {
  for (const auto& slot : layout(Config{.channels = 16, .layers = 1, .heads = 2})) {
    const bool layernorm = slot.name.find("ln") != std::string::npos;
    const bool bias = slot.name.ends_with("_b");
    const auto expected = bias ? InitKind::zero : layernorm ? InitKind::one : InitKind::normal;
    EXPECT_EQ(slot.init, expected) << slot.name;
  }
}

TEST(GptModel, TokenizerFoldsCaseAndWhitespace) {
  EXPECT_EQ(token_of('a'), 0);
  EXPECT_EQ(token_of('z'), 25);
  EXPECT_EQ(token_of('A'), 0);
  EXPECT_EQ(token_of('Q'), 16);
  for (unsigned char space : {' ', '\n', '\t', '\r'}) EXPECT_EQ(token_of(space), kSpaceToken);
  for (unsigned char other : {'0', '9', '.', '-', '\0', '\x7f', '\xe9'}) EXPECT_EQ(token_of(other), kUnknownToken);
  EXPECT_EQ(kVocabSize, Config{}.vocab);
  for (int t = 0; t < 26; ++t) EXPECT_EQ(token_of(static_cast<unsigned char>(char_of(t))), t);
}

TEST(GptModel, ConfigRejectsShapesTheMathCannotRun) {
  EXPECT_THROW(parameter_count(Config{.channels = 10, .heads = 4}), std::invalid_argument);  // 10 / 4
  EXPECT_THROW(parameter_count(Config{.channels = 12, .heads = 4}), std::invalid_argument);  // odd head_dim
}

}  // namespace
}  // namespace roofbench::gpt
