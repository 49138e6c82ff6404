#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>

namespace roofbench::gpt::reference {
namespace {

using Vec = std::vector<double>;
using std::size_t;

Vec zeros(size_t n) { return Vec(n, 0.0); }

double dot(const double* a, const double* b, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += alpha x
void axpy(double* y, double alpha, const double* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void add_into(Vec& y, const Vec& x) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += x[i];
}

// ---- Token embedding: x[n] = wte[token[n]] ----

Vec embedding_forward(const std::uint8_t* tokens, const double* wte, size_t N, size_t C) {
  Vec x(N * C);
  for (size_t n = 0; n < N; ++n) std::copy_n(wte + tokens[n] * C, C, x.data() + n * C);
  return x;
}

void embedding_backward(double* dwte, const double* dx, const std::uint8_t* tokens, size_t N, size_t C) {
  for (size_t n = 0; n < N; ++n) axpy(dwte + tokens[n] * C, 1.0, dx + n * C, C);
}

// ---- The one matmul: c[rows, cols] += a[rows, inner] b[inner, cols], all row-major ----

// A full-width forward is several GFLOP, so this is the only place the reference cares about speed:
// each pass over a slice of c adds four rows of b (fewer loads and stores of c per multiply-add), the
// slices are short enough for those four rows of b to stay in cache while a tile of c's rows reuses
// them, and the innermost loop runs along contiguous rows, which the compiler vectorises without
// reordering any sum. Each element's sum is grouped the same way whatever the thread count, so results
// are reproducible. Threads (OpenMP, where present) take whole row tiles, and only for products big
// enough to repay waking them.
void matmul_accumulate(double* c, const double* a, const double* b, size_t rows, size_t inner, size_t cols) {
  constexpr size_t kRowTile = 4, kDepth = 4, kColTile = 256;
  [[maybe_unused]] const bool worth_threads = rows * inner * cols >= (size_t{1} << 22);
  const size_t row_tiles = (rows + kRowTile - 1) / kRowTile;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (worth_threads)
#endif
  for (size_t tile = 0; tile < row_tiles; ++tile) {
    const size_t r_begin = tile * kRowTile, r_end = std::min(r_begin + kRowTile, rows);
    for (size_t c_begin = 0; c_begin < cols; c_begin += kColTile) {
      const size_t c_end = std::min(c_begin + kColTile, cols);
      size_t k = 0;
      for (; k + kDepth <= inner; k += kDepth) {
        const double* __restrict b0 = b + k * cols;
        const double* __restrict b1 = b0 + cols, * __restrict b2 = b1 + cols, * __restrict b3 = b2 + cols;
        for (size_t r = r_begin; r < r_end; ++r) {
          const double* a_r = a + r * inner + k;
          const double a0 = a_r[0], a1 = a_r[1], a2 = a_r[2], a3 = a_r[3];
          double* __restrict c_r = c + r * cols;
          for (size_t j = c_begin; j < c_end; ++j) c_r[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
        }
      }
      for (; k < inner; ++k)
        for (size_t r = r_begin; r < r_end; ++r)
          axpy(c + r * cols + c_begin, a[r * inner + k], b + k * cols + c_begin, c_end - c_begin);
    }
  }
}

Vec transpose(const double* m, size_t rows, size_t cols) {
  Vec t(rows * cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  return t;
}

// ---- Linear: y = x w^T + b, w is [out, in] ----

Vec linear_forward(const Vec& x, const double* w, const double* b, size_t N, size_t in, size_t out) {
  Vec y(N * out, 0.0);
  if (b)
    for (size_t n = 0; n < N; ++n) std::copy_n(b, out, &y[n * out]);
  matmul_accumulate(y.data(), x.data(), transpose(w, out, in).data(), N, in, out);
  return y;
}

// dx += dy w, dw += dy^T x, db += the column sums of dy (b may be absent: db null).
void linear_backward(double* dx, double* dw, double* db, const Vec& dy, const Vec& x, const double* w, size_t N,
                     size_t in, size_t out) {
  matmul_accumulate(dx, dy.data(), w, N, out, in);
  matmul_accumulate(dw, transpose(dy.data(), N, out).data(), x.data(), out, N, in);
  if (db)
    for (size_t n = 0; n < N; ++n) axpy(db, 1.0, &dy[n * out], out);
}

// ---- LayerNorm over channels, biased variance ----

Normalized layernorm_forward(const Vec& x, const double* w, const double* b, size_t N, size_t C, double eps) {
  Normalized ln{Vec(N * C), Vec(N), Vec(N)};
  for (size_t n = 0; n < N; ++n) {
    const double* row = &x[n * C];
    double mean = 0, var = 0;
    for (size_t c = 0; c < C; ++c) mean += row[c];
    mean /= static_cast<double>(C);
    for (size_t c = 0; c < C; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= static_cast<double>(C);
    const double rstd = 1 / std::sqrt(var + eps);
    for (size_t c = 0; c < C; ++c) ln.out[n * C + c] = (row[c] - mean) * rstd * w[c] + b[c];
    ln.mean[n] = mean;
    ln.rstd[n] = rstd;
  }
  return ln;
}

// With xhat = (x - mean) rstd and g = dy w: dx = rstd (g - mean(g) - xhat mean(g xhat)).
void layernorm_backward(double* dx, double* dw, double* db, const Vec& dy, const Vec& x, const Normalized& ln,
                        const double* w, size_t N, size_t C) {
  for (size_t n = 0; n < N; ++n) {
    const double *dy_row = &dy[n * C], *x_row = &x[n * C];
    auto xhat = [&](size_t c) { return (x_row[c] - ln.mean[n]) * ln.rstd[n]; };
    double mean_g = 0, mean_g_xhat = 0;
    for (size_t c = 0; c < C; ++c) {
      mean_g += dy_row[c] * w[c];
      mean_g_xhat += dy_row[c] * w[c] * xhat(c);
    }
    mean_g /= static_cast<double>(C);
    mean_g_xhat /= static_cast<double>(C);
    for (size_t c = 0; c < C; ++c) {
      dx[n * C + c] += ln.rstd[n] * (dy_row[c] * w[c] - mean_g - xhat(c) * mean_g_xhat);
      dw[c] += dy_row[c] * xhat(c);
      db[c] += dy_row[c];
    }
  }
}

// ---- RoPE on q and k, adjacent channel pairs of each head ----

// Rotates by +angle (forward) or -angle (backward: a rotation's transpose is the rotation back).
void rope_rotate(Vec& qkv, const Config& cfg, size_t N, double direction) {
  const size_t T = static_cast<size_t>(cfg.context), C = static_cast<size_t>(cfg.channels);
  const size_t heads = static_cast<size_t>(cfg.heads), hd = static_cast<size_t>(cfg.head_dim());
  for (size_t n = 0; n < N; ++n) {
    const double pos = static_cast<double>(n % T);
    for (size_t i = 0; i < hd / 2; ++i) {
      const double angle = pos * std::pow(cfg.rope_base, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      const double cos = std::cos(angle), sin = direction * std::sin(angle);
      for (size_t part : {size_t{0}, C})  // q, then k
        for (size_t h = 0; h < heads; ++h) {
          double* pair = &qkv[n * 3 * C + part + h * hd + 2 * i];
          const double x0 = pair[0], x1 = pair[1];
          pair[0] = x0 * cos - x1 * sin;
          pair[1] = x0 * sin + x1 * cos;
        }
    }
  }
}

// ---- Causal self-attention: out_t = sum_{j<=t} p_tj v_j, p_t = softmax_j(q_t . k_j / sqrt(hd)) ----

struct AttentionShape {
  size_t B, T, C, heads, hd;
  // Offsets into qkv [N, 3C] of head h's q, k or v (part 0, 1, 2) at position t of sequence b.
  size_t qkv_at(size_t b, size_t t, size_t part, size_t h) const { return (b * T + t) * 3 * C + part * C + h * hd; }
  size_t out_at(size_t b, size_t t, size_t h) const { return (b * T + t) * C + h * hd; }
  size_t probs_at(size_t b, size_t h, size_t t) const { return ((b * heads + h) * T + t) * T; }
};

AttentionShape attention_shape(const Config& cfg, size_t batch) {
  return {batch, static_cast<size_t>(cfg.context), static_cast<size_t>(cfg.channels), static_cast<size_t>(cfg.heads),
          static_cast<size_t>(cfg.head_dim())};
}

void attention_forward(Vec& out, Vec& probs, const Vec& qkv, const AttentionShape& s) {
  const double scale = 1 / std::sqrt(static_cast<double>(s.hd));
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (s.T * s.T * s.C * s.B >= (size_t{1} << 22))
#endif
  for (size_t bh = 0; bh < s.B * s.heads; ++bh) {
    const size_t b = bh / s.heads, h = bh % s.heads;
    for (size_t t = 0; t < s.T; ++t) {
      const double* q = &qkv[s.qkv_at(b, t, 0, h)];
      double* p = &probs[s.probs_at(b, h, t)];
      double max_score = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j <= t; ++j) {
        p[j] = scale * dot(q, &qkv[s.qkv_at(b, j, 1, h)], s.hd);
        max_score = std::max(max_score, p[j]);
      }
      double sum = 0;
      for (size_t j = 0; j <= t; ++j) sum += p[j] = std::exp(p[j] - max_score);
      double* o = &out[s.out_at(b, t, h)];
      for (size_t j = 0; j <= t; ++j) {
        p[j] /= sum;
        axpy(o, p[j], &qkv[s.qkv_at(b, j, 2, h)], s.hd);
      }
    }
  }
}

// dv_j += p_j dout; dp_j = dout . v_j; the softmax turns dp into ds_j = p_j (dp_j - sum_k p_k dp_k);
// then dq += scale ds_j k_j and dk_j += scale ds_j q.
void attention_backward(Vec& dqkv, const Vec& dout, const Vec& qkv, const Vec& probs, const AttentionShape& s) {
  const double scale = 1 / std::sqrt(static_cast<double>(s.hd));
  // Each (sequence, head) writes only its own channels of dqkv, so the threads never share an output.
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (s.T * s.T * s.C * s.B >= (size_t{1} << 22))
#endif
  for (size_t bh = 0; bh < s.B * s.heads; ++bh) {
    const size_t b = bh / s.heads, h = bh % s.heads;
    Vec dp(s.T);
    for (size_t t = 0; t < s.T; ++t) {
      const double* p = &probs[s.probs_at(b, h, t)];
      const double* d_o = &dout[s.out_at(b, t, h)];
      double expected_dp = 0;
      for (size_t j = 0; j <= t; ++j) {
        dp[j] = dot(d_o, &qkv[s.qkv_at(b, j, 2, h)], s.hd);
        expected_dp += p[j] * dp[j];
        axpy(&dqkv[s.qkv_at(b, j, 2, h)], p[j], d_o, s.hd);
      }
      for (size_t j = 0; j <= t; ++j) {
        const double ds = scale * p[j] * (dp[j] - expected_dp);
        axpy(&dqkv[s.qkv_at(b, t, 0, h)], ds, &qkv[s.qkv_at(b, j, 1, h)], s.hd);
        axpy(&dqkv[s.qkv_at(b, j, 1, h)], ds, &qkv[s.qkv_at(b, t, 0, h)], s.hd);
      }
    }
  }
}

// ---- Exact GELU: z Phi(z) ----

Vec gelu_forward(const Vec& z) {
  Vec out(z.size());
  for (size_t i = 0; i < z.size(); ++i) out[i] = 0.5 * z[i] * (1 + std::erf(z[i] * std::numbers::sqrt2 / 2));
  return out;
}

// d/dz z Phi(z) = Phi(z) + z phi(z)
void gelu_backward(Vec& dz, const Vec& dout, const Vec& z) {
  const double inv_sqrt_2pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  for (size_t i = 0; i < z.size(); ++i) {
    const double cdf = 0.5 * (1 + std::erf(z[i] * std::numbers::sqrt2 / 2));
    const double pdf = inv_sqrt_2pi * std::exp(-0.5 * z[i] * z[i]);
    dz[i] += dout[i] * (cdf + z[i] * pdf);
  }
}

// ---- Cross-entropy, averaged over positions ----

double log_sum_exp(const double* x, size_t n) {
  const double max = *std::max_element(x, x + n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
  return max + std::log(sum);
}

// dlogits = (softmax(logits) - onehot(target)) / N
Vec cross_entropy_backward(const Vec& logits, std::span<const std::uint8_t> targets, size_t N, size_t V) {
  Vec dlogits(N * V);
  for (size_t n = 0; n < N; ++n) {
    const double lse = log_sum_exp(&logits[n * V], V);
    for (size_t v = 0; v < V; ++v)
      dlogits[n * V + v] = (std::exp(logits[n * V + v] - lse) - (v == targets[n] ? 1.0 : 0.0)) / static_cast<double>(N);
  }
  return dlogits;
}

// ---- Checks shared by the entry points ----

size_t positions(const Config& cfg, int batch) { return static_cast<size_t>(batch) * static_cast<size_t>(cfg.context); }

void check_tokens(const Config& cfg, std::span<const std::uint8_t> tokens, size_t expected, const char* what) {
  if (tokens.size() != expected)
    throw std::invalid_argument(std::string("gpt reference: ") + what + " holds " + std::to_string(tokens.size()) +
                                " tokens, expected " + std::to_string(expected));
  for (auto t : tokens)
    if (t >= cfg.vocab)
      throw std::invalid_argument(std::string("gpt reference: ") + what + " has token " + std::to_string(t) +
                                  " outside the vocabulary");
}

void check_parameters(const Config& cfg, std::span<const double> params) {
  if (params.size() != parameter_count(cfg))
    throw std::invalid_argument("gpt reference: " + std::to_string(params.size()) + " parameters, the config has " +
                                std::to_string(parameter_count(cfg)));
}

}  // namespace

std::vector<double> init_parameters(const Config& cfg, std::uint64_t seed) {
  // Box-Muller on mt19937_64: both are fixed by the standard, std::normal_distribution is not.
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1p-53; };  // [0, 1)
  auto normal = [&] {
    const double radius = std::sqrt(-2 * std::log(1 - uniform()));
    return radius * std::cos(2 * std::numbers::pi * uniform());
  };
  std::vector<double> params(parameter_count(cfg));
  for (const auto& slot : layout(cfg))
    for (size_t i = slot.offset; i < slot.offset + slot.count; ++i)
      params[i] = slot.init == InitKind::normal ? kInitStd * normal() : slot.init == InitKind::one ? 1.0 : 0.0;
  return params;
}

Activations forward(const Config& cfg, std::span<const double> params, std::span<const std::uint8_t> inputs,
                    int batch) {
  check_parameters(cfg, params);
  const size_t N = positions(cfg, batch), C = static_cast<size_t>(cfg.channels);
  const size_t V = static_cast<size_t>(cfg.vocab), hidden = static_cast<size_t>(cfg.hidden());
  check_tokens(cfg, inputs, N, "inputs");
  const auto off = parameter_offsets(cfg);
  const double* P = params.data();
  const auto shape = attention_shape(cfg, static_cast<size_t>(batch));

  Activations acts;
  acts.batch = batch;
  acts.inputs.assign(inputs.begin(), inputs.end());
  Vec x = embedding_forward(inputs.data(), P + off.wte, N, C);
  for (const LayerOffsets& o : off.layers) {
    BlockActivations& blk = acts.blocks.emplace_back();
    blk.input = x;
    // Attention half.
    blk.ln1 = layernorm_forward(x, P + o.ln1_w, P + o.ln1_b, N, C, cfg.ln_eps);
    blk.qkv = linear_forward(blk.ln1.out, P + o.qkv_w, P + o.qkv_b, N, C, 3 * C);
    rope_rotate(blk.qkv, cfg, N, +1);
    blk.attention = zeros(shape.B * shape.heads * shape.T * shape.T);
    blk.attn_out = zeros(N * C);
    attention_forward(blk.attn_out, blk.attention, blk.qkv, shape);
    blk.mid = linear_forward(blk.attn_out, P + o.attn_proj_w, P + o.attn_proj_b, N, C, C);
    add_into(blk.mid, x);
    // MLP half.
    blk.ln2 = layernorm_forward(blk.mid, P + o.ln2_w, P + o.ln2_b, N, C, cfg.ln_eps);
    blk.fc = linear_forward(blk.ln2.out, P + o.fc_w, P + o.fc_b, N, C, hidden);
    blk.gelu = gelu_forward(blk.fc);
    x = linear_forward(blk.gelu, P + o.fc_proj_w, P + o.fc_proj_b, N, hidden, C);
    add_into(x, blk.mid);
  }
  acts.lnf = layernorm_forward(x, P + off.lnf_w, P + off.lnf_b, N, C, cfg.ln_eps);
  acts.final_residual = std::move(x);
  acts.logits = linear_forward(acts.lnf.out, P + off.wte, nullptr, N, C, V);
  return acts;
}

double loss(const Config& cfg, const Activations& acts, std::span<const std::uint8_t> targets) {
  const size_t N = positions(cfg, acts.batch), V = static_cast<size_t>(cfg.vocab);
  check_tokens(cfg, targets, N, "targets");
  double total = 0;
  for (size_t n = 0; n < N; ++n) total += log_sum_exp(&acts.logits[n * V], V) - acts.logits[n * V + targets[n]];
  return total / static_cast<double>(N);
}

std::vector<double> backward(const Config& cfg, std::span<const double> params, const Activations& acts,
                             std::span<const std::uint8_t> targets) {
  check_parameters(cfg, params);
  const size_t N = positions(cfg, acts.batch), C = static_cast<size_t>(cfg.channels);
  const size_t V = static_cast<size_t>(cfg.vocab), hidden = static_cast<size_t>(cfg.hidden());
  check_tokens(cfg, targets, N, "targets");
  const auto off = parameter_offsets(cfg);
  const double* P = params.data();
  const auto shape = attention_shape(cfg, static_cast<size_t>(acts.batch));
  std::vector<double> grads(params.size(), 0.0);
  double* G = grads.data();

  // Head: logits = LNf(x) wte^T.
  const Vec dlogits = cross_entropy_backward(acts.logits, targets, N, V);
  Vec dlnf = zeros(N * C);
  linear_backward(dlnf.data(), G + off.wte, nullptr, dlogits, acts.lnf.out, P + off.wte, N, C, V);
  Vec dx = zeros(N * C);  // gradient of the residual stream, carried down through the blocks
  layernorm_backward(dx.data(), G + off.lnf_w, G + off.lnf_b, dlnf, acts.final_residual, acts.lnf, P + off.lnf_w, N, C);

  for (size_t l = off.layers.size(); l-- > 0;) {
    const LayerOffsets& o = off.layers[l];
    const BlockActivations& blk = acts.blocks[l];
    // MLP half: out = mid + fc_proj(GELU(fc(LN2(mid)))).
    Vec dgelu = zeros(N * hidden);
    linear_backward(dgelu.data(), G + o.fc_proj_w, G + o.fc_proj_b, dx, blk.gelu, P + o.fc_proj_w, N, hidden, C);
    Vec dfc = zeros(N * hidden);
    gelu_backward(dfc, dgelu, blk.fc);
    Vec dln2 = zeros(N * C);
    linear_backward(dln2.data(), G + o.fc_w, G + o.fc_b, dfc, blk.ln2.out, P + o.fc_w, N, C, hidden);
    Vec dmid = dx;  // the residual path
    layernorm_backward(dmid.data(), G + o.ln2_w, G + o.ln2_b, dln2, blk.mid, blk.ln2, P + o.ln2_w, N, C);
    // Attention half: mid = input + attn_proj(attention(RoPE(qkv(LN1(input))))).
    Vec dattn_out = zeros(N * C);
    linear_backward(dattn_out.data(), G + o.attn_proj_w, G + o.attn_proj_b, dmid, blk.attn_out, P + o.attn_proj_w, N, C,
                    C);
    Vec dqkv = zeros(N * 3 * C);
    attention_backward(dqkv, dattn_out, blk.qkv, blk.attention, shape);
    rope_rotate(dqkv, cfg, N, -1);
    Vec dln1 = zeros(N * C);
    linear_backward(dln1.data(), G + o.qkv_w, G + o.qkv_b, dqkv, blk.ln1.out, P + o.qkv_w, N, C, 3 * C);
    dx = std::move(dmid);  // the residual path
    layernorm_backward(dx.data(), G + o.ln1_w, G + o.ln1_b, dln1, blk.input, blk.ln1, P + o.ln1_w, N, C);
  }
  embedding_backward(G + off.wte, dx.data(), acts.inputs.data(), N, C);
  return grads;
}

void adamw_step(std::span<double> params, std::span<const double> grads, std::span<double> m, std::span<double> v,
                int step, const AdamW& opt) {
  if (grads.size() != params.size() || m.size() != params.size() || v.size() != params.size())
    throw std::invalid_argument("gpt reference: adamw_step needs params, grads, m and v of one size");
  if (step < 1) throw std::invalid_argument("gpt reference: AdamW steps count from 1");
  const auto correction = adamw_bias_correction(opt, step);
  for (size_t i = 0; i < params.size(); ++i) adamw_update(params[i], grads[i], m[i], v[i], opt, correction);
}

}  // namespace roofbench::gpt::reference
