#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "roofbench/kernels/cuda_attention.hpp"

namespace roofbench::kernels {

double AttentionShape::visible_pairs() const {
  if (!causal) return double(q_len) * double(kv_len);
  double pairs = 0;
  for (std::int64_t row = 0; row < q_len; ++row) pairs += double(visible_keys(row));
  return pairs;
}

std::vector<double> attention_reference(const AttentionShape& shape, const double* q, const double* k,
                                        const double* v, const std::vector<std::int64_t>& rows) {
  const std::int64_t d = shape.head_dim;
  const double scale = 1.0 / std::sqrt(double(d));
  std::vector<double> out(rows.size() * d, 0.0), scores;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double* query = q + rows[r] * d;
    const std::int64_t keys = shape.visible_keys(rows[r]);
    scores.assign(keys, 0.0);
    double max_score = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (std::int64_t c = 0; c < d; ++c) dot += query[c] * k[j * d + c];
      scores[j] = dot * scale;
      max_score = std::max(max_score, scores[j]);
    }
    double sum = 0;
    for (double& s : scores) sum += (s = std::exp(s - max_score));
    double* o = out.data() + r * d;
    for (std::int64_t j = 0; j < keys; ++j)
      for (std::int64_t c = 0; c < d; ++c) o[c] += scores[j] / sum * v[j * d + c];
  }
  return out;
}

}  // namespace roofbench::kernels
