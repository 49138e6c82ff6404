// The kernel lab's double-precision references (lab_reference.hpp).
#include "lab_reference.hpp"

#include <algorithm>
#include <cmath>

namespace roofbench::gpt::reference {

AttentionReference attention_reference(std::span<const float> qkv, std::span<const float> bias,
                                       std::span<const float> dout, int B, int H, int T, int hd, double base) {
  const int C = H * hd, N = B * T;
  std::vector<double> x(N * 3 * C);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < 3 * C; ++c) x[n * 3 * C + c] = double{qkv[n * 3 * C + c]} + bias[c];
  auto rotate = [&](std::vector<double>& v, double direction) {
    for (int n = 0; n < N; ++n)
      for (int i = 0; i < hd / 2; ++i) {
        const double angle = (n % T) * std::pow(base, -2.0 * i / hd);
        const double cs = std::cos(angle), sn = direction * std::sin(angle);
        for (int part = 0; part < 2; ++part)
          for (int h = 0; h < H; ++h) {
            double* p = &v[n * 3 * C + part * C + h * hd + 2 * i];
            const double x0 = p[0], x1 = p[1];
            p[0] = x0 * cs - x1 * sn;
            p[1] = x0 * sn + x1 * cs;
          }
      }
  };
  rotate(x, 1);
  AttentionReference r{std::vector<double>(N * C, 0), std::vector<double>(N * 3 * C, 0)};
  const double scale = 1 / std::sqrt(double(hd));
  auto at = [&](int b, int t, int part, int h) { return (b * T + t) * 3 * C + part * C + h * hd; };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> p(t + 1), dp(t + 1);
        double max = -1e300, sum = 0;
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += x[at(b, t, 0, h) + d] * x[at(b, j, 1, h) + d];
          p[j] = scale * dot;
          max = std::max(max, p[j]);
        }
        for (int j = 0; j <= t; ++j) sum += p[j] = std::exp(p[j] - max);
        double expected = 0;
        for (int j = 0; j <= t; ++j) {
          p[j] /= sum;
          dp[j] = 0;
          for (int d = 0; d < hd; ++d) {
            r.out[(b * T + t) * C + h * hd + d] += p[j] * x[at(b, j, 2, h) + d];
            dp[j] += dout[(b * T + t) * C + h * hd + d] * x[at(b, j, 2, h) + d];
            r.dqkv[at(b, j, 2, h) + d] += p[j] * dout[(b * T + t) * C + h * hd + d];
          }
          expected += p[j] * dp[j];
        }
        for (int j = 0; j <= t; ++j) {
          const double ds = scale * p[j] * (dp[j] - expected);
          for (int d = 0; d < hd; ++d) {
            r.dqkv[at(b, t, 0, h) + d] += ds * x[at(b, j, 1, h) + d];
            r.dqkv[at(b, j, 1, h) + d] += ds * x[at(b, t, 0, h) + d];
          }
        }
      }
  rotate(r.dqkv, -1);
  return r;
}

BiasGeluReference bias_gelu_reference(std::span<const float> z, std::span<const float> bias,
                                      std::span<const float> dout, int rows, int cols) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  BiasGeluReference r{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n),
                      std::vector<double>(cols, 0.0)};
  constexpr double kInvSqrt2Pi = 0.39894228040143268;
  for (std::size_t e = 0; e < n; ++e) {
    const double x = double{z[e]} + bias[e % cols];
    const double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
    r.pre[e] = x;
    r.out[e] = x * cdf;
    r.dz[e] = double{dout[e]} * (cdf + x * std::exp(-0.5 * x * x) * kInvSqrt2Pi);
    r.dbias[e % cols] += r.dz[e];
  }
  return r;
}

FcGeluReference fc_gelu_reference(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
                                  int rows, int in, int out) {
  const std::size_t n = static_cast<std::size_t>(rows) * out;
  FcGeluReference r{std::vector<double>(n), std::vector<double>(n)};
  for (int row = 0; row < rows; ++row)
    for (int o = 0; o < out; ++o) {
      double sum = bias[o];
      const float* xr = &x[static_cast<std::size_t>(row) * in];
      const float* wo = &w[static_cast<std::size_t>(o) * in];
      for (int i = 0; i < in; ++i) sum += double{xr[i]} * wo[i];
      const std::size_t e = static_cast<std::size_t>(row) * out + o;
      r.z[e] = sum;
      r.gelu[e] = 0.5 * sum * (1 + std::erf(sum / std::sqrt(2.0)));
    }
  return r;
}

double weight_gradient_entry(std::span<const float> dy, std::span<const float> x, int N, int in, int out, int o,
                             int i) {
  double sum = 0;
  for (int n = 0; n < N; ++n)
    sum += double{dy[static_cast<std::size_t>(n) * out + o]} * x[static_cast<std::size_t>(n) * in + i];
  return sum;
}

}  // namespace roofbench::gpt::reference
