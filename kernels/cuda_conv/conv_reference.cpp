#include "roofbench/kernels/conv_reference.hpp"

#include <algorithm>
#include <numeric>
#include <random>

namespace roofbench::kernels {

Strides4 Strides4::packed(ConvLayout layout, Extent4 e) {
  if (layout == ConvLayout::nchw) return {e.channels * e.rows * e.cols, e.rows * e.cols, e.cols, 1};
  return {e.rows * e.cols * e.channels, 1, e.cols * e.channels, e.channels};
}

ConvTensors conv_tensors(const ConvShape& s, ConvLayout layout) {
  ConvTensors t;
  t.input = {s.n, s.c, s.h, s.w};
  t.filter = {s.k, s.c, s.r, s.s};
  t.output = {s.n, s.k, s.out_h(), s.out_w()};
  t.x = Strides4::packed(layout, t.input);
  t.w = Strides4::packed(layout, t.filter);
  t.y = Strides4::packed(layout, t.output);
  return t;
}

namespace {

// `count` indices from 0 to size - 1, evenly spaced and including both ends (all of them when count >= size).
std::vector<std::int64_t> evenly_spaced(std::int64_t size, std::size_t count) {
  const auto wanted = std::min<std::int64_t>(static_cast<std::int64_t>(count), size);
  std::vector<std::int64_t> indices;
  for (std::int64_t t = 0; t < wanted; ++t) indices.push_back(wanted == 1 ? 0 : t * (size - 1) / (wanted - 1));
  return indices;
}

}  // namespace

std::vector<Index4> spread_samples(Extent4 e, std::size_t count, std::uint64_t seed) {
  std::vector<Index4> samples;
  if (e.elements() <= 0) return samples;
  std::mt19937_64 rng(seed ^ 0x636f6e76ULL);
  auto uniform = [&](std::int64_t size) { return std::uniform_int_distribution<std::int64_t>(0, size - 1)(rng); };

  for (const std::int64_t o : {std::int64_t{0}, e.outer - 1})
    for (const std::int64_t c : {std::int64_t{0}, e.channels - 1})
      for (const std::int64_t y : {std::int64_t{0}, e.rows - 1})
        for (const std::int64_t x : {std::int64_t{0}, e.cols - 1}) samples.push_back({o, c, y, x});

  const std::size_t border = count / 4;
  for (std::size_t t = 0; t < border; ++t) {
    Index4 p{uniform(e.outer), uniform(e.channels), uniform(e.rows), uniform(e.cols)};
    switch (t % 4) {
      case 0: p.row = 0; break;
      case 1: p.row = e.rows - 1; break;
      case 2: p.col = 0; break;
      default: p.col = e.cols - 1; break;
    }
    samples.push_back(p);
  }

  const std::size_t rest = count > border ? count - border : 0;
  const std::vector<std::int64_t> outers = evenly_spaced(e.outer, rest);
  std::vector<std::int64_t> channels = evenly_spaced(e.channels, rest);
  std::shuffle(channels.begin(), channels.end(), rng);
  for (std::size_t t = 0; t < rest; ++t)
    samples.push_back({outers[t % outers.size()], channels[t % channels.size()], uniform(e.rows), uniform(e.cols)});

  std::sort(samples.begin(), samples.end());
  samples.erase(std::unique(samples.begin(), samples.end()), samples.end());
  return samples;
}

}  // namespace roofbench::kernels
