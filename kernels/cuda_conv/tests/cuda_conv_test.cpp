// The convolution reference and gate sampling on the CPU (they run in CI), then the hand-written
// implicit-GEMM kernel against the reference on the GPU, on shapes that leave partial tiles and padding
// on every edge (skipped with the reason where no GPU is present).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "roofbench/cuda.hpp"
#include "roofbench/kernels/conv_reference.hpp"
#include "roofbench/kernels/cuda_conv.hpp"

namespace {

using namespace roofbench::kernels;

auto reader(const std::vector<double>& v) {
  return [&v](std::int64_t i) { return v.at(static_cast<std::size_t>(i)); };
}

std::vector<double> random_values(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<double> v(static_cast<std::size_t>(count));
  for (double& x : v) x = uniform(rng);
  return v;
}

template <typename F>
void for_each_index(Extent4 e, F f) {
  for (std::int64_t o = 0; o < e.outer; ++o)
    for (std::int64_t c = 0; c < e.channels; ++c)
      for (std::int64_t y = 0; y < e.rows; ++y)
        for (std::int64_t x = 0; x < e.cols; ++x) f(Index4{o, c, y, x});
}

// ---- the reference (CPU) ----

// The input elements some window covers, counted position by position.
std::int64_t covered_input_elements(const ConvShape& g) {
  std::set<std::pair<std::int64_t, std::int64_t>> covered;
  for (std::int64_t p = 0; p < g.out_h(); ++p)
    for (std::int64_t q = 0; q < g.out_w(); ++q)
      for (std::int64_t r = 0; r < g.r; ++r)
        for (std::int64_t s = 0; s < g.s; ++s) {
          const std::int64_t y = p * g.stride - g.pad + r, x = q * g.stride - g.pad + s;
          if (y >= 0 && y < g.h && x >= 0 && x < g.w) covered.emplace(y, x);
        }
  return g.n * g.c * std::int64_t(covered.size());
}

TEST(ConvShape, InputElementsReadAreTheOnesAWindowCovers) {
  const ConvShape unpadded[] = {
      {.n = 2, .c = 3, .h = 56, .w = 56, .k = 4, .r = 1, .s = 1, .stride = 2, .pad = 0},  // a quarter
      {.n = 1, .c = 2, .h = 57, .w = 55, .k = 4, .r = 1, .s = 1, .stride = 2, .pad = 0},  // odd sizes
      {.n = 1, .c = 1, .h = 9, .w = 9, .k = 1, .r = 1, .s = 1, .stride = 3, .pad = 0},
      {.n = 1, .c = 1, .h = 14, .w = 14, .k = 1, .r = 1, .s = 1, .stride = 1, .pad = 0},  // all of it
      {.n = 1, .c = 1, .h = 14, .w = 14, .k = 1, .r = 3, .s = 3, .stride = 2, .pad = 0}};
  for (const ConvShape& g : unpadded)
    EXPECT_EQ(g.input_elements_read(), covered_input_elements(g)) << g.h << "x" << g.w << " stride " << g.stride;
  // With padding some windows hang over the edge: the count stays an upper bound of what is read.
  const ConvShape padded{.n = 1, .c = 1, .h = 56, .w = 56, .k = 1, .r = 3, .s = 3, .stride = 2, .pad = 1};
  EXPECT_GE(padded.input_elements_read(), covered_input_elements(padded));
  EXPECT_LE(padded.input_elements_read(), padded.input_elements());
}

TEST(ConvReference, ForwardMatchesAHandComputedExample) {
  // x = 1..9 in a 3x3 image, w = the 2x2 identity; with padding 1 and stride 2 the window of output
  // (p, q) starts at (2p - 1, 2q - 1).
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 0, 0, 1};
  const ConvShape valid{.n = 1, .c = 1, .h = 3, .w = 3, .k = 1, .r = 2, .s = 2, .stride = 1, .pad = 0};
  const ConvShape padded{.n = 1, .c = 1, .h = 3, .w = 3, .k = 1, .r = 2, .s = 2, .stride = 2, .pad = 1};
  const std::vector<double> expected_valid{6, 8, 12, 14}, expected_padded{1, 3, 7, 14};
  for (const auto& [shape, expected] : {std::pair{valid, expected_valid}, std::pair{padded, expected_padded}}) {
    ASSERT_EQ(shape.out_h(), 2);
    const ConvTensors t = conv_tensors(shape, ConvLayout::nchw);
    for (std::int64_t p = 0; p < 2; ++p)
      for (std::int64_t q = 0; q < 2; ++q)
        EXPECT_EQ(forward_at(shape, t, reader(x), reader(w), {0, 0, p, q}), expected[std::size_t(p * 2 + q)]);
  }
}

// The backward passes are the adjoints of the forward one: <conv(x, w), dy> = <x, dX(dy, w)> = <w, dW(x, dy)>
// for all x, w, dy. This checks every index mapping of the two backward references against the forward one.
TEST(ConvReference, BackwardPassesAreAdjointsOfForward) {
  const ConvShape shapes[] = {
      {.n = 2, .c = 3, .h = 7, .w = 6, .k = 4, .r = 3, .s = 3, .stride = 1, .pad = 1},
      {.n = 2, .c = 3, .h = 9, .w = 8, .k = 5, .r = 3, .s = 3, .stride = 2, .pad = 1},
      {.n = 1, .c = 2, .h = 11, .w = 11, .k = 3, .r = 7, .s = 7, .stride = 2, .pad = 3},
      {.n = 3, .c = 4, .h = 6, .w = 6, .k = 2, .r = 1, .s = 1, .stride = 2, .pad = 0},
  };
  for (const ConvLayout layout : {ConvLayout::nhwc, ConvLayout::nchw})
    for (const ConvShape& s : shapes) {
      const ConvTensors t = conv_tensors(s, layout);
      const auto x = random_values(s.input_elements(), 1), w = random_values(s.filter_elements(), 2),
                 dy = random_values(s.output_elements(), 3);
      double y_dy = 0, x_dx = 0, w_dw = 0;
      for_each_index(t.output, [&](Index4 i) {
        y_dy += forward_at(s, t, reader(x), reader(w), i) * dy[std::size_t(t.y.at(i.outer, i.channel, i.row, i.col))];
      });
      for_each_index(t.input, [&](Index4 i) {
        x_dx += x[std::size_t(t.x.at(i.outer, i.channel, i.row, i.col))] * backward_data_at(s, t, reader(dy), reader(w), i);
      });
      for_each_index(t.filter, [&](Index4 i) {
        w_dw += w[std::size_t(t.w.at(i.outer, i.channel, i.row, i.col))] * backward_filter_at(s, t, reader(x), reader(dy), i);
      });
      EXPECT_NEAR(x_dx, y_dy, 1e-9 * std::abs(y_dy) + 1e-12) << "stride " << s.stride << " r " << s.r;
      EXPECT_NEAR(w_dw, y_dy, 1e-9 * std::abs(y_dy) + 1e-12) << "stride " << s.stride << " r " << s.r;
    }
}

TEST(ConvReference, LayoutsStoreTheSameLogicalTensor) {
  const ConvShape s{.n = 2, .c = 3, .h = 5, .w = 4, .k = 2, .r = 3, .s = 3, .stride = 1, .pad = 1};
  const ConvTensors nhwc = conv_tensors(s, ConvLayout::nhwc), nchw = conv_tensors(s, ConvLayout::nchw);
  EXPECT_EQ(nhwc.x.at(1, 2, 4, 3), s.input_elements() - 1);
  EXPECT_EQ(nchw.x.at(1, 2, 4, 3), s.input_elements() - 1);
  EXPECT_EQ(nhwc.x.at(0, 1, 0, 0), 1);      // channels innermost
  EXPECT_EQ(nchw.x.at(0, 0, 0, 1), 1);      // columns innermost
  EXPECT_EQ(nhwc.w.at(0, 0, 0, 1), s.c);    // KRSC
  // The same logical x and w written in both layouts give the same outputs.
  const auto x_logical = random_values(s.input_elements(), 4), w_logical = random_values(s.filter_elements(), 5);
  std::vector<double> x[2], w[2];
  const ConvTensors* layouts[2] = {&nhwc, &nchw};
  for (int l = 0; l < 2; ++l) {
    x[l].resize(x_logical.size());
    w[l].resize(w_logical.size());
    std::size_t i = 0;
    for_each_index(nchw.input, [&](Index4 p) { x[l][std::size_t(layouts[l]->x.at(p.outer, p.channel, p.row, p.col))] = x_logical[i++]; });
    i = 0;
    for_each_index(nchw.filter, [&](Index4 p) { w[l][std::size_t(layouts[l]->w.at(p.outer, p.channel, p.row, p.col))] = w_logical[i++]; });
  }
  for_each_index(nchw.output, [&](Index4 p) {
    EXPECT_EQ(forward_at(s, nhwc, reader(x[0]), reader(w[0]), p), forward_at(s, nchw, reader(x[1]), reader(w[1]), p));
  });
}

// ---- gate sampling (CPU) ----

TEST(ConvSampling, CoversBatchChannelsCornersAndBorders) {
  const Extent4 e{256, 64, 56, 56};
  const std::size_t count = 1024;
  const auto samples = spread_samples(e, count, 7);
  EXPECT_GE(samples.size(), count * 9 / 10);
  EXPECT_LE(samples.size(), count + 16);
  std::set<std::int64_t> outers, channels;
  std::size_t on_border = 0;
  for (const Index4& p : samples) {
    ASSERT_TRUE(p.outer >= 0 && p.outer < e.outer && p.channel >= 0 && p.channel < e.channels && p.row >= 0 &&
                p.row < e.rows && p.col >= 0 && p.col < e.cols);
    outers.insert(p.outer);
    channels.insert(p.channel);
    on_border += (p.row == 0 || p.row == e.rows - 1 || p.col == 0 || p.col == e.cols - 1);
  }
  EXPECT_EQ(outers.size(), std::size_t(e.outer));    // every image of the batch
  EXPECT_EQ(channels.size(), std::size_t(e.channels));  // every channel
  EXPECT_GE(on_border, count / 4);
  EXPECT_LT(on_border, samples.size());  // and the interior
  for (const std::int64_t o : {std::int64_t{0}, e.outer - 1})
    for (const std::int64_t c : {std::int64_t{0}, e.channels - 1})
      for (const std::int64_t y : {std::int64_t{0}, e.rows - 1})
        for (const std::int64_t x : {std::int64_t{0}, e.cols - 1})
          EXPECT_TRUE(std::binary_search(samples.begin(), samples.end(), Index4{o, c, y, x}));
  EXPECT_EQ(samples, spread_samples(e, count, 7));
  EXPECT_NE(samples, spread_samples(e, count, 8));
}

TEST(ConvSampling, SmallAndDegenerateTensors) {
  // A 1x1 filter: every sample sits on the (only) spatial position.
  for (const Index4& p : spread_samples({64, 256, 1, 1}, 128, 1)) EXPECT_TRUE(p.row == 0 && p.col == 0);
  // Fewer elements than samples asked for: distinct samples, at most every element.
  const auto all = spread_samples({1, 2, 2, 2}, 1000, 1);
  EXPECT_LE(all.size(), 8u);
  EXPECT_EQ(std::set<Index4>(all.begin(), all.end()).size(), all.size());
  EXPECT_TRUE(spread_samples({0, 3, 3, 3}, 10, 1).empty());
}

// ---- the kernel (GPU) ----

bool gpu_present() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

struct DeviceBf16 {
  explicit DeviceBf16(std::int64_t count) {
    ROOFBENCH_CUDA(cudaMalloc(reinterpret_cast<void**>(&data), std::size_t(std::max<std::int64_t>(count, 1)) * 2));
  }
  ~DeviceBf16() { (void)cudaFree(data); }
  __nv_bfloat16* data = nullptr;
};

// Random bf16 values, uploaded; returns them as doubles (exactly as stored).
std::vector<double> upload_random(DeviceBf16& device, std::int64_t count, std::uint64_t seed) {
  std::vector<double> values = random_values(count, seed);
  std::vector<__nv_bfloat16> stored(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    stored[i] = __float2bfloat16_rn(float(values[i]));
    values[i] = __bfloat162float(stored[i]);
  }
  ROOFBENCH_CUDA(cudaMemcpy(device.data, stored.data(), stored.size() * 2, cudaMemcpyHostToDevice));
  return values;
}

struct KernelCase {
  const char* what;
  ConvShape shape;
};

void PrintTo(const KernelCase& c, std::ostream* out) { *out << c.what; }

using Launch = void (*)(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, const ConvShape&, cudaStream_t);

// Runs `launch` on random bf16 x and w with y poisoned, and compares every output with the fp64 reference.
void expect_matches_reference(const KernelCase& c, Launch launch) {
  const ConvShape s = c.shape;
  DeviceBf16 x(s.input_elements()), w(s.filter_elements()), y(s.output_elements());
  const auto xv = upload_random(x, s.input_elements(), 11), wv = upload_random(w, s.filter_elements(), 12);
  ROOFBENCH_CUDA(cudaMemset(y.data, 0xFF, std::size_t(s.output_elements()) * 2));  // NaN where never written
  launch(x.data, w.data, y.data, s, nullptr);
  ROOFBENCH_CUDA(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> out(std::size_t(s.output_elements()));
  ROOFBENCH_CUDA(cudaMemcpy(out.data(), y.data, out.size() * 2, cudaMemcpyDeviceToHost));

  const ConvTensors t = conv_tensors(s, ConvLayout::nhwc);
  double err2 = 0, ref2 = 0, worst = 0;
  std::int64_t bad = 0;
  for_each_index(t.output, [&](Index4 p) {
    const double ref = forward_at(s, t, reader(xv), reader(wv), p);
    const double got = __bfloat162float(out[std::size_t(t.y.at(p.outer, p.channel, p.row, p.col))]);
    // bf16 output: one rounding (2^-8 relative) plus fp32 accumulation, with an absolute floor for
    // outputs that cancel to near zero.
    if (!(std::abs(got - ref) <= std::ldexp(1.0, -8) * std::abs(ref) + 1e-3 * std::sqrt(double(s.c * s.r * s.s))))
      ++bad;
    err2 += (got - ref) * (got - ref);
    ref2 += ref * ref;
    worst = std::max(worst, std::abs(got - ref));
  });
  EXPECT_EQ(bad, 0) << c.what << ": worst absolute error " << worst;
  EXPECT_LT(std::sqrt(err2 / ref2), 5e-3) << c.what;
}

class ImplicitGemmKernel : public ::testing::TestWithParam<KernelCase> {};

TEST_P(ImplicitGemmKernel, MatchesTheReferenceEverywhere) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  expect_matches_reference(GetParam(), launch_conv2d_implicit_gemm_bf16);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ImplicitGemmKernel,
    ::testing::Values(
        KernelCase{"stem 7x7/2, 3 channels (element-wise gather)",
                   {.n = 2, .c = 3, .h = 37, .w = 35, .k = 64, .r = 7, .s = 7, .stride = 2, .pad = 3}},
        KernelCase{"3x3 64->64 (128x64 tiles)", {.n = 3, .c = 64, .h = 14, .w = 13, .k = 64, .r = 3, .s = 3, .stride = 1, .pad = 1}},
        KernelCase{"3x3/2 128->192 (128x128 tiles, partial n tile)",
                   {.n = 2, .c = 128, .h = 15, .w = 15, .k = 192, .r = 3, .s = 3, .stride = 2, .pad = 1}},
        KernelCase{"1x1/2 256->512", {.n = 2, .c = 256, .h = 14, .w = 14, .k = 512, .r = 1, .s = 1, .stride = 2, .pad = 0}},
        KernelCase{"1x1 40->36: channels not a multiple of the chunk",
                   {.n = 1, .c = 40, .h = 9, .w = 7, .k = 36, .r = 1, .s = 1, .stride = 1, .pad = 0}},
        KernelCase{"1x1 13->20: odd channels", {.n = 2, .c = 13, .h = 5, .w = 5, .k = 20, .r = 1, .s = 1, .stride = 1, .pad = 0}}));

class WgmmaImplicitGemmKernel : public ::testing::TestWithParam<KernelCase> {};

TEST_P(WgmmaImplicitGemmKernel, MatchesTheReferenceEverywhere) {
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device";
  if (!conv2d_implicit_gemm_wgmma_available(0)) GTEST_SKIP() << "device 0 does not run sm_90a code";
  ASSERT_EQ(conv2d_implicit_gemm_wgmma_unsupported(GetParam().shape), "");
  expect_matches_reference(GetParam(), launch_conv2d_implicit_gemm_wgmma_bf16);
}

// Partial row tiles (M not a multiple of 128), partial and 64-wide column tiles, padding on every edge, stride 2,
// one to 49 taps, several slabs a tap, x read each of the three ways, and more tiles than an H100 or H200 has SMs.
INSTANTIATE_TEST_SUITE_P(
    Shapes, WgmmaImplicitGemmKernel,
    ::testing::Values(
        KernelCase{"3x3 64->64 (128x64 tiles)", {.n = 3, .c = 64, .h = 14, .w = 13, .k = 64, .r = 3, .s = 3, .stride = 1, .pad = 1}},
        KernelCase{"3x3/2 128->192 (three 64-wide tiles)",
                   {.n = 2, .c = 128, .h = 15, .w = 15, .k = 192, .r = 3, .s = 3, .stride = 2, .pad = 1}},
        KernelCase{"1x1/2 256->512 (128x128 tiles)", {.n = 2, .c = 256, .h = 14, .w = 14, .k = 512, .r = 1, .s = 1, .stride = 2, .pad = 0}},
        KernelCase{"3x3 192->128, 5x6 images", {.n = 5, .c = 192, .h = 5, .w = 6, .k = 128, .r = 3, .s = 3, .stride = 1, .pad = 1}},
        KernelCase{"1x1 256->256, x read by TMA (128x256 tiles, a partial row tile)",
                   {.n = 2, .c = 256, .h = 13, .w = 11, .k = 256, .r = 1, .s = 1, .stride = 1, .pad = 0}},
        KernelCase{"1x1 128->40: a partial column tile, x read by TMA", {.n = 1, .c = 128, .h = 9, .w = 7, .k = 40, .r = 1, .s = 1, .stride = 1, .pad = 0}},
        KernelCase{"stem 7x7/2, 3 channels (element gather, three slabs, the last partial)",
                   {.n = 2, .c = 3, .h = 37, .w = 35, .k = 64, .r = 7, .s = 7, .stride = 2, .pad = 3}},
        KernelCase{"3x3 40->128, element gather", {.n = 3, .c = 40, .h = 10, .w = 9, .k = 128, .r = 3, .s = 3, .stride = 1, .pad = 1}},
        KernelCase{"7x7 40->256, element gather with the longest table (31 slabs) and 128x256 tiles",
                   {.n = 1, .c = 40, .h = 9, .w = 10, .k = 256, .r = 7, .s = 7, .stride = 1, .pad = 3}},
        KernelCase{"1x1 64->64 over 196 row tiles: blocks of the persistent grid walk two tiles",
                   {.n = 2, .c = 64, .h = 112, .w = 112, .k = 64, .r = 1, .s = 1, .stride = 1, .pad = 0}},
        KernelCase{"3x3 64->64 over 144 row tiles: blocks walk two tiles, the ring carried between them",
                   {.n = 2, .c = 64, .h = 96, .w = 96, .k = 64, .r = 3, .s = 3, .stride = 1, .pad = 1}},
        KernelCase{"3x3 64->256 (128x256 tiles)", {.n = 2, .c = 64, .h = 11, .w = 12, .k = 256, .r = 3, .s = 3, .stride = 1, .pad = 1}},
        KernelCase{"1x1/2 192->512, three slabs (128x256 tiles)",
                   {.n = 3, .c = 192, .h = 9, .w = 9, .k = 512, .r = 1, .s = 1, .stride = 2, .pad = 0}}));

TEST(WgmmaImplicitGemmShapes, SaysWhichTheKernelCannotTake) {
  const ConvShape stem{.n = 1, .c = 3, .h = 224, .w = 224, .k = 64, .r = 7, .s = 7, .stride = 2, .pad = 3};
  const ConvShape long_gather{.n = 1, .c = 100, .h = 9, .w = 9, .k = 64, .r = 5, .s = 5, .stride = 1, .pad = 2};
  const ConvShape odd_k{.n = 1, .c = 64, .h = 8, .w = 8, .k = 60, .r = 1, .s = 1, .stride = 1, .pad = 0};
  const ConvShape wide{.n = 1, .c = 256, .h = 14, .w = 14, .k = 256, .r = 3, .s = 3, .stride = 1, .pad = 1};
  EXPECT_EQ(conv2d_implicit_gemm_wgmma_unsupported(stem), "");
  EXPECT_NE(conv2d_implicit_gemm_wgmma_unsupported(long_gather).find("R S C <= 2048"), std::string::npos);
  EXPECT_NE(conv2d_implicit_gemm_wgmma_unsupported(odd_k).find("K % 8"), std::string::npos);
  EXPECT_EQ(conv2d_implicit_gemm_wgmma_unsupported(wide), "");
  EXPECT_FALSE(conv2d_implicit_gemm_wgmma_available(-1));
}

TEST(ImplicitGemmKernelVariant, NamesTheTile) {
  const ConvShape wide{.n = 1, .c = 256, .h = 14, .w = 14, .k = 256, .r = 3, .s = 3, .stride = 1, .pad = 1};
  const ConvShape stem{.n = 1, .c = 3, .h = 224, .w = 224, .k = 64, .r = 7, .s = 7, .stride = 2, .pad = 3};
  EXPECT_NE(conv2d_implicit_gemm_bf16_variant(wide).find("128x128"), std::string::npos);
  EXPECT_NE(conv2d_implicit_gemm_bf16_variant(stem).find("gather"), std::string::npos);
}

}  // namespace
