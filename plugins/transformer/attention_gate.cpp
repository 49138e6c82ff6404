#include "attention_gate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <sstream>

namespace roofbench::transformer {

std::vector<std::int64_t> sampled_pairs(std::int64_t pairs, std::size_t count, std::uint64_t seed) {
  std::set<std::int64_t> chosen = {0, pairs - 1};
  std::mt19937_64 rng(seed ^ 0x7061697273ULL);
  std::uniform_int_distribution<std::int64_t> any(0, pairs - 1);
  while (chosen.size() < std::min<std::size_t>(count, std::size_t(pairs))) chosen.insert(any(rng));
  return {chosen.begin(), chosen.end()};
}

std::vector<std::int64_t> run_boundary_pairs(std::int64_t blocks, std::int64_t run_len, std::int64_t kv_len,
                                             std::int64_t pairs, std::size_t count) {
  std::set<std::int64_t> spanning;
  if (blocks < 2 || run_len < 1 || kv_len < 1 || count == 0) return {};
  const std::int64_t step = std::max<std::int64_t>(1, (blocks - 1) / std::int64_t(count));
  for (std::int64_t block = 1; block < blocks && spanning.size() < count; block += step) {
    const std::int64_t first_key = block * run_len;  // of the whole cache, heads one after another
    const std::int64_t pair = first_key / kv_len;
    if (pair < pairs && first_key % kv_len != 0) spanning.insert(pair);
  }
  return {spanning.begin(), spanning.end()};
}

std::vector<std::int64_t> sampled_rows(std::int64_t q_len, std::size_t random_rows, std::uint64_t seed) {
  std::set<std::int64_t> chosen;
  for (std::int64_t edge : {std::int64_t{0}, std::int64_t{1}, std::int64_t{63}, std::int64_t{64}, std::int64_t{127},
                            std::int64_t{128}}) {
    chosen.insert(std::clamp<std::int64_t>(edge, 0, q_len - 1));
    chosen.insert(std::clamp<std::int64_t>(q_len - 1 - edge, 0, q_len - 1));
  }
  std::mt19937_64 rng(seed ^ 0x726f7773ULL);
  std::uniform_int_distribution<std::int64_t> any(0, q_len - 1);
  for (std::size_t r = 0; r < random_rows && chosen.size() < std::size_t(q_len); ++r) chosen.insert(any(rng));
  return {chosen.begin(), chosen.end()};
}

namespace {

// One (batch, head) pair's sampled rows against fp64 attention of its stored inputs: the pair's relative L2
// error (NaN where an output is), its worst row, and how many outputs were compared.
struct PairComparison {
  double error = 0;
  std::int64_t worst_row = 0;
  std::size_t compared = 0;
};

PairComparison compare_pair(Context& ctx, const AttentionOperands& op, std::int64_t pair,
                            const std::vector<std::int64_t>& rows) {
  const kernels::AttentionShape& shape = op.shape;
  const std::int64_t d = shape.head_dim;
  const std::size_t q_base = std::size_t(pair * shape.q_len * d), kv_base = std::size_t(pair * shape.kv_len * d);
  const auto k = case_support::fetch(ctx, {op.k, op.type}, kv_base, std::size_t(shape.kv_len * d));
  const auto v = case_support::fetch(ctx, {op.v, op.type}, kv_base, std::size_t(shape.kv_len * d));
  std::vector<double> q(std::size_t(shape.q_len * d), 0.0);
  for (const std::int64_t row : rows) {
    const auto q_row = case_support::fetch(ctx, {op.q, op.type}, q_base + std::size_t(row * d), std::size_t(d));
    std::copy(q_row.begin(), q_row.end(), q.begin() + row * d);
  }
  const auto expected = kernels::attention_reference(shape, q.data(), k.data(), v.data(), rows);
  std::vector<double> out, ref;
  PairComparison result;
  double worst_row_error = -1;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto got = case_support::fetch(ctx, {op.o, op.type}, q_base + std::size_t(rows[r] * d), std::size_t(d));
    double row_error = 0;
    for (std::int64_t c = 0; c < d; ++c) {
      const double e = got[c] - expected[r * d + c];
      row_error += std::isnan(e) ? std::numeric_limits<double>::infinity() : e * e;
    }
    if (row_error > worst_row_error) worst_row_error = row_error, result.worst_row = rows[r];
    out.insert(out.end(), got.begin(), got.end());
    ref.insert(ref.end(), expected.begin() + r * d, expected.begin() + (r + 1) * d);
  }
  result.error = relative_l2_error(out.data(), ref.data(), out.size());
  result.compared = out.size();
  return result;
}

}  // namespace

Check check_attention(Context& ctx, const AttentionOperands& op, const case_support::NonfiniteScan& scan,
                      std::vector<Figure>& figures) {
  const kernels::AttentionShape& shape = op.shape;
  const bool decode = shape.q_len == 1;
  // Decode pairs are cheap (one row each), so more of them are compared.
  std::vector<std::int64_t> pairs = sampled_pairs(shape.batch * shape.heads, decode ? 24 : 4, ctx.seed());
  pairs.insert(pairs.end(), op.must_check.begin(), op.must_check.end());
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  const auto rows = sampled_rows(shape.q_len, 16, ctx.seed());
  // The gate's error is the worst pair's relative L2 error (NaN, once any pair's is, stays the worst);
  // the detail names that pair and its worst row.
  std::size_t compared = 0;
  std::int64_t worst_pair = 0, worst_row = 0;
  double worst_pair_error = -1;
  for (const std::int64_t pair : pairs) {
    const PairComparison c = compare_pair(ctx, op, pair, rows);
    if (std::isnan(c.error) ? !std::isnan(worst_pair_error) : c.error > worst_pair_error)
      worst_pair_error = c.error, worst_pair = pair, worst_row = c.worst_row;
    compared += c.compared;
  }
  const std::size_t total = std::size_t(shape.q_elements());
  const std::uint64_t nonfinite = scan.count(ctx, {op.o, op.type}, total);
  Check check;
  check.rel_l2_error = worst_pair_error;
  figures = {{"nonfinite_outputs", double(nonfinite)}};
  std::ostringstream detail;
  detail << "compared " << rows.size() << " query rows of " << pairs.size() << " (batch, head) pairs (" << compared
         << " of " << total << " outputs";
  if (!op.must_check.empty()) detail << "; " << op.must_check.size() << " pairs where a split-KV run crosses a head";
  detail << ") with fp64 attention of the stored inputs; the error is the worst pair's: pair " << worst_pair
         << " (batch " << worst_pair / shape.heads << ", head " << worst_pair % shape.heads << "), its worst row "
         << worst_row;
  if (nonfinite > 0) {
    check.rel_l2_error = std::numeric_limits<double>::quiet_NaN();
    detail << "; " << nonfinite << " of " << total << " outputs are NaN or infinite";
  }
  check.detail = detail.str();
  return check;
}

}  // namespace roofbench::transformer
