// The training text: read from disk, tokenised with model.hpp's vocabulary, cut into windows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "model.hpp"

namespace roofbench::gpt {

// Present on every Debian/Ubuntu machine (about 240 KB of English prose), so the benchmark needs no
// download.
inline const std::filesystem::path kDefaultCorpus = "/usr/share/common-licenses";

std::vector<std::uint8_t> tokenize(std::string_view text);

// A file, or every regular file under a directory (sorted by path, concatenated; symbolic links are
// skipped so a licence aliased under two names counts once). Throws std::runtime_error if the path is
// missing or the text is shorter than one window (context + 1 tokens).
std::vector<std::uint8_t> load_corpus(const Config& cfg, const std::filesystem::path& path = kDefaultCorpus);

// Entropy of the token frequencies, in nats: what a model that ignores context can reach at best.
double unigram_entropy_nats(const std::vector<std::uint8_t>& tokens);

struct Batch {
  std::vector<std::uint8_t> inputs;   // [batch * context]
  std::vector<std::uint8_t> targets;  // inputs shifted by one token
};

// `batch` windows at uniform random starts; the same seed gives the same batch on every platform.
Batch draw_batch(const std::vector<std::uint8_t>& tokens, const Config& cfg, int batch, std::uint64_t seed);

}  // namespace roofbench::gpt
