// The fp64 reference for 2-d convolutions (cross-correlation, as cuDNN and PyTorch compute it) in all
// three passes of training, evaluated one output element at a time, and the choice of which elements a
// gate compares. Plain C++ with no CUDA: it runs, and is tested, on any machine.
//
// Notation: input x is N x C x H x W, filter w is K x C x R x S, output y is N x K x Ho x Wo, with one
// stride and one zero padding for both spatial dimensions. The passes:
//   forward      y[n,k,p,q]  = sum_{c,r,s}   x[n, c, p*stride - pad + r, q*stride - pad + s] w[k,c,r,s]
//   backward data  dx[n,c,h,v] = sum_{k,r,s} dy[n, k, p, q] w[k,c,r,s]   over p*stride - pad + r = h, ...
//   backward filter dw[k,c,r,s] = sum_{n,p,q} dy[n,k,p,q] x[n, c, p*stride - pad + r, q*stride - pad + s]
// Tensors are read through accessors (offset in elements -> value), so the reference sees the values as
// stored (bf16 or fp16 rounded) in whatever layout they live.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace roofbench::kernels {

struct ConvShape {
  std::int64_t n = 1, c = 0, h = 0, w = 0;  // input
  std::int64_t k = 0, r = 1, s = 1;         // filter: K output channels, R x S window
  std::int64_t stride = 1, pad = 0;

  std::int64_t out_h() const { return (h + 2 * pad - r) / stride + 1; }
  std::int64_t out_w() const { return (w + 2 * pad - s) / stride + 1; }
  std::int64_t input_elements() const { return n * c * h * w; }
  // The input elements some window reads (an upper bound where padding shifts the windows): the rows and
  // columns the windows span, less those a stride wider than the window steps over (a 1x1 filter at
  // stride 2 reads a quarter of its input).
  std::int64_t input_elements_read() const {
    return n * c * covered(h, out_h(), r) * covered(w, out_w(), s);
  }
  std::int64_t covered(std::int64_t size, std::int64_t windows, std::int64_t window) const {
    const std::int64_t spanned = stride > window ? windows * window : (windows - 1) * stride + window;
    return std::min(size, spanned);
  }
  std::int64_t filter_elements() const { return k * c * r * s; }
  std::int64_t output_elements() const { return n * k * out_h() * out_w(); }
  // 2 N Ho Wo K C R S: the same count for each of the three passes.
  double flops() const {
    return 2.0 * double(n) * double(out_h()) * double(out_w()) * double(k) * double(c) * double(r * s);
  }
};

// NHWC stores activations N x H x W x C and filters K x R x S x C (cuDNN's NHWC filter format); NCHW
// stores them N x C x H x W and K x C x R x S.
enum class ConvLayout { nhwc, nchw };

// A position in a 4-d tensor in logical order: (n, c, h, w) for activations, (k, c, r, s) for filters.
struct Index4 {
  std::int64_t outer = 0, channel = 0, row = 0, col = 0;
  friend bool operator==(const Index4&, const Index4&) = default;
  friend auto operator<=>(const Index4&, const Index4&) = default;
};

// Sizes of a 4-d tensor in the same logical order.
struct Extent4 {
  std::int64_t outer = 1, channels = 1, rows = 1, cols = 1;
  std::int64_t elements() const { return outer * channels * rows * cols; }
};

// Element offsets of a packed tensor of `extent` in `layout`.
struct Strides4 {
  std::int64_t outer = 0, channel = 0, row = 0, col = 0;
  std::int64_t at(std::int64_t o, std::int64_t c, std::int64_t y, std::int64_t x) const {
    return o * outer + c * channel + y * row + x * col;
  }
  static Strides4 packed(ConvLayout layout, Extent4 extent);
};

struct ConvTensors {
  Extent4 input, filter, output;
  Strides4 x, w, y;  // the strides of input (x, dx), filter (w, dw) and output (y, dy)
};
ConvTensors conv_tensors(const ConvShape& shape, ConvLayout layout);

template <typename X, typename W>
double forward_at(const ConvShape& s, const ConvTensors& t, X x, W w, Index4 out) {
  const std::int64_t h0 = out.row * s.stride - s.pad, w0 = out.col * s.stride - s.pad;
  double sum = 0;
  for (std::int64_t r = 0; r < s.r; ++r) {
    const std::int64_t h = h0 + r;
    if (h < 0 || h >= s.h) continue;
    for (std::int64_t q = 0; q < s.s; ++q) {
      const std::int64_t v = w0 + q;
      if (v < 0 || v >= s.w) continue;
      for (std::int64_t c = 0; c < s.c; ++c)
        sum += double(x(t.x.at(out.outer, c, h, v))) * double(w(t.w.at(out.channel, c, r, q)));
    }
  }
  return sum;
}

template <typename DY, typename W>
double backward_data_at(const ConvShape& s, const ConvTensors& t, DY dy, W w, Index4 in) {
  double sum = 0;
  for (std::int64_t r = 0; r < s.r; ++r) {
    const std::int64_t ph = in.row + s.pad - r;  // = p * stride
    if (ph < 0 || ph % s.stride != 0 || ph / s.stride >= s.out_h()) continue;
    for (std::int64_t q = 0; q < s.s; ++q) {
      const std::int64_t qw = in.col + s.pad - q;
      if (qw < 0 || qw % s.stride != 0 || qw / s.stride >= s.out_w()) continue;
      for (std::int64_t k = 0; k < s.k; ++k)
        sum += double(dy(t.y.at(in.outer, k, ph / s.stride, qw / s.stride))) * double(w(t.w.at(k, in.channel, r, q)));
    }
  }
  return sum;
}

template <typename X, typename DY>
double backward_filter_at(const ConvShape& s, const ConvTensors& t, X x, DY dy, Index4 f) {
  double sum = 0;
  const std::int64_t ho = s.out_h(), wo = s.out_w();
  for (std::int64_t n = 0; n < s.n; ++n)
    for (std::int64_t p = 0; p < ho; ++p) {
      const std::int64_t h = p * s.stride - s.pad + f.row;
      if (h < 0 || h >= s.h) continue;
      for (std::int64_t q = 0; q < wo; ++q) {
        const std::int64_t v = q * s.stride - s.pad + f.col;
        if (v < 0 || v >= s.w) continue;
        sum += double(dy(t.y.at(n, f.outer, p, q))) * double(x(t.x.at(n, f.channel, h, v)));
      }
    }
  return sum;
}

// About `count` distinct positions of a tensor of `extent` for a gate to compare, chosen so that a
// kernel that mishandles one region fails: first every combination of the first and last index of each
// dimension (the corners, which see the most padding, in the first and last image and channel), then a
// quarter of `count` on the four spatial borders (the padded rows and columns), then the rest with the
// outer index (the batch, or the output channel of a filter) evenly spaced over its whole range and the
// channel evenly spaced in a shuffled order, rows and columns at random. Deterministic in `seed`.
std::vector<Index4> spread_samples(Extent4 extent, std::size_t count, std::uint64_t seed);

}  // namespace roofbench::kernels
