#include "corpus.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>

namespace roofbench::gpt {
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("gpt corpus: cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<fs::path> text_files(const fs::path& path) {
  if (!fs::exists(path)) throw std::runtime_error("gpt corpus: " + path.string() + " does not exist");
  if (!fs::is_directory(path)) return {path};
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::uint8_t> tokenize(std::string_view text) {
  std::vector<std::uint8_t> tokens(text.size());
  std::transform(text.begin(), text.end(), tokens.begin(),
                 [](char c) { return static_cast<std::uint8_t>(token_of(static_cast<unsigned char>(c))); });
  return tokens;
}

std::vector<std::uint8_t> load_corpus(const Config& cfg, const fs::path& path) {
  std::string text;
  for (const auto& file : text_files(path)) text += read_file(file);
  auto tokens = tokenize(text);
  const auto window = static_cast<std::size_t>(cfg.context) + 1;
  if (tokens.size() < window)
    throw std::runtime_error("gpt corpus: " + path.string() + " holds " + std::to_string(tokens.size()) +
                             " tokens, fewer than one window of " + std::to_string(window));
  return tokens;
}

double unigram_entropy_nats(const std::vector<std::uint8_t>& tokens) {
  std::array<double, 256> counts{};
  for (auto t : tokens) counts[t] += 1;
  double entropy = 0;
  for (double count : counts) {
    if (count == 0) continue;
    const double p = count / static_cast<double>(tokens.size());
    entropy -= p * std::log(p);
  }
  return entropy;
}

Batch draw_batch(const std::vector<std::uint8_t>& tokens, const Config& cfg, int batch, std::uint64_t seed) {
  const auto T = static_cast<std::size_t>(cfg.context);
  if (tokens.size() < T + 1) throw std::runtime_error("gpt corpus: shorter than one window");
  // mt19937_64's output is fixed by the standard (distributions are not): reduce it by hand. The modulo
  // bias is below 1e-13 for any corpus that fits in memory.
  std::mt19937_64 rng(seed);
  const std::uint64_t starts = tokens.size() - T;  // a window needs T inputs and one more target
  Batch out;
  out.inputs.reserve(static_cast<std::size_t>(batch) * T);
  out.targets.reserve(static_cast<std::size_t>(batch) * T);
  for (int b = 0; b < batch; ++b) {
    const auto window = tokens.begin() + static_cast<std::ptrdiff_t>(rng() % starts);
    out.inputs.insert(out.inputs.end(), window, window + static_cast<std::ptrdiff_t>(T));
    out.targets.insert(out.targets.end(), window + 1, window + 1 + static_cast<std::ptrdiff_t>(T));
  }
  return out;
}

}  // namespace roofbench::gpt
