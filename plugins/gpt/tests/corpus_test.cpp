#include "corpus.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace roofbench::gpt {
namespace {

TEST(GptCorpus, DefaultLicensesLoadWithEnglishLikeEntropy) {
  if (!std::filesystem::is_directory(kDefaultCorpus)) GTEST_SKIP() << kDefaultCorpus << " is missing";
  const auto tokens = load_corpus(Config{});
  EXPECT_GT(tokens.size(), 100'000u);
  const double entropy = unigram_entropy_nats(tokens);
  EXPECT_GT(entropy, 2.0);
  EXPECT_LT(entropy, 3.3);  // below ln 28: letters are far from uniform
}

TEST(GptCorpus, MissingPathAndShortTextThrow) {
  EXPECT_THROW(load_corpus(Config{}, "/nonexistent/roofbench-corpus"), std::runtime_error);
  const auto short_file = std::filesystem::temp_directory_path() / "roofbench-gpt-short-corpus.txt";
  std::ofstream(short_file) << "too short for a window";
  EXPECT_THROW(load_corpus(Config{}, short_file), std::runtime_error);
  EXPECT_EQ(load_corpus(Config{.context = 8}, short_file).size(), 22u);
  std::filesystem::remove(short_file);
}

TEST(GptCorpus, TokenizeMapsEveryCharacter) {
  EXPECT_EQ(tokenize("Ab c\n!"), (std::vector<std::uint8_t>{0, 1, kSpaceToken, 2, kSpaceToken, kUnknownToken}));
}

TEST(GptCorpus, EntropyOfUniformTokens) {
  EXPECT_NEAR(unigram_entropy_nats({0, 1, 2, 3}), std::log(4.0), 1e-15);
  EXPECT_EQ(unigram_entropy_nats({5, 5, 5}), 0.0);
}

TEST(GptCorpus, BatchesAreShiftedWindowsAndDeterministic) {
  std::vector<std::uint8_t> tokens(1000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint8_t>(i % 28);
  const Config cfg{.context = 16};
  const auto batch = draw_batch(tokens, cfg, 4, 42);
  ASSERT_EQ(batch.inputs.size(), 4u * 16u);
  ASSERT_EQ(batch.targets.size(), 4u * 16u);
  for (std::size_t i = 0; i < batch.inputs.size(); ++i)
    EXPECT_EQ(batch.targets[i], (batch.inputs[i] + 1) % 28);  // the next token of this corpus
  EXPECT_EQ(draw_batch(tokens, cfg, 4, 42).inputs, batch.inputs);
  EXPECT_NE(draw_batch(tokens, cfg, 4, 43).inputs, batch.inputs);
}

TEST(GptCorpus, ACorpusOfExactlyOneWindowGivesThatWindow) {
  const std::vector<std::uint8_t> tokens{1, 2, 3, 4, 5};
  const auto batch = draw_batch(tokens, Config{.context = 4}, 2, 7);
  EXPECT_EQ(batch.inputs, (std::vector<std::uint8_t>{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(batch.targets, (std::vector<std::uint8_t>{2, 3, 4, 5, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace roofbench::gpt
