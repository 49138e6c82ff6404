#include "roofbench/case_support/gate.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <utility>

#include "roofbench/case_support/formats.hpp"
#include "roofbench/cuda.hpp"
#include "nonfinite.hpp"

namespace roofbench::case_support {

namespace {
const unsigned char* byte_address(DeviceArray array, std::size_t element) {
  return static_cast<const unsigned char*>(array.data) + element * element_bytes(array.type);
}
}  // namespace

std::vector<double> fetch(Context& ctx, DeviceArray array, std::size_t first, std::size_t count, std::size_t stride) {
  const std::size_t bytes = element_bytes(array.type);
  std::vector<unsigned char> raw(count * bytes);
  std::vector<double> values(count);
  if (count == 0) return values;
  ctx.synchronize();
  if (stride == 1 || count == 1) {
    ctx.copy_to_host(raw.data(), byte_address(array, first), raw.size());
  } else {
    // One strided copy (a matrix column of row-major storage) instead of `count` tiny ones.
    ROOFBENCH_CUDA(cudaMemcpy2DAsync(raw.data(), bytes, byte_address(array, first), stride * bytes, bytes, count,
                                     cudaMemcpyDeviceToHost, cuda::stream(ctx)));
    ctx.synchronize();
  }
  decode(array.type, raw.data(), count, values.data());
  return values;
}

void NonfiniteScan::setup(Context& ctx) {
  device_count_ = static_cast<unsigned long long*>(ctx.alloc(sizeof(unsigned long long), BufferRole::scratch));
}

std::uint64_t NonfiniteScan::count(Context& ctx, DeviceArray array, std::size_t n) const {
  if (!device_count_) throw Error("micro: NonfiniteScan::count before setup");
  const cudaStream_t stream = cuda::stream(ctx);
  switch (array.type) {
    case ElementType::f32:
      detail::launch_count_nonfinite(static_cast<const float*>(array.data), n, device_count_, stream);
      break;
    case ElementType::bf16:
      detail::launch_count_nonfinite(static_cast<const __nv_bfloat16*>(array.data), n, device_count_, stream);
      break;
    case ElementType::f16:
      detail::launch_count_nonfinite(static_cast<const __half*>(array.data), n, device_count_, stream);
      break;
    default:
      throw Error("micro: no non-finite scan for this element type");
  }
  ctx.synchronize();
  unsigned long long found = 0;
  ctx.copy_to_host(&found, device_count_, sizeof(found));
  return found;
}

namespace {

struct Sample {
  std::int64_t matrix, i, j;
};

// `count` indices from 0 to last inclusive, evenly spaced (all of them when count > last).
std::vector<std::int64_t> evenly_spaced(std::int64_t last, std::size_t count) {
  const auto wanted = std::min<std::int64_t>(static_cast<std::int64_t>(count), last + 1);
  std::vector<std::int64_t> indices;
  for (std::int64_t t = 0; t < wanted; ++t) indices.push_back(wanted == 1 ? last : t * last / (wanted - 1));
  return indices;
}

std::vector<Sample> matmul_samples(const MatmulOperands& op, std::uint64_t seed) {
  std::vector<Sample> samples;
  std::mt19937_64 rng(seed ^ 0x6d61746d756cULL);
  auto uniform = [&](std::int64_t size) { return std::uniform_int_distribution<std::int64_t>(0, size - 1)(rng); };
  for (std::size_t s = 0; s < kMatmulRandomSamples; ++s)
    samples.push_back({uniform(op.batch), uniform(op.m), uniform(op.n)});
  // The edges last and in order: consecutive samples share an A row or a B column, fetched once.
  const std::int64_t last_matrix = op.batch - 1;
  for (const auto j : evenly_spaced(op.n - 1, kMatmulEdgeSamples)) samples.push_back({last_matrix, op.m - 1, j});
  for (const auto i : evenly_spaced(op.m - 1, kMatmulEdgeSamples)) samples.push_back({last_matrix, i, op.n - 1});
  return samples;
}

std::string nan_detail(std::uint64_t nonfinite, std::size_t total) {
  return std::to_string(nonfinite) + " of " + std::to_string(total) +
         " outputs are NaN or infinite (NaN: left unwritten from the poison, or computed)";
}

}  // namespace

Check check_matmul_sampled(Context& ctx, const MatmulOperands& op, const NonfiniteScan& scan,
                           std::vector<Figure>& figures) {
  figures.clear();
  if (op.m <= 0 || op.n <= 0 || op.batch <= 0) return {0.0, "empty output", true};
  const std::vector<Sample> samples = matmul_samples(op, ctx.seed());
  std::vector<double> out, ref;
  out.reserve(samples.size());
  ref.reserve(samples.size());

  std::pair<std::int64_t, std::int64_t> cached_row_key{-1, -1}, cached_col_key{-1, -1};
  std::vector<double> a_row, b_col;
  std::size_t worst = 0;
  double worst_error = -1;
  for (const Sample& s : samples) {
    if (cached_row_key != std::pair{s.matrix, s.i}) {
      a_row = fetch(ctx, op.a, s.matrix * op.a_strides.matrix + s.i * op.a_strides.row, op.k, op.a_strides.col);
      cached_row_key = {s.matrix, s.i};
    }
    if (cached_col_key != std::pair{s.matrix, s.j}) {
      b_col = fetch(ctx, op.b, s.matrix * op.b_strides.matrix + s.j * op.b_strides.col, op.k, op.b_strides.row);
      cached_col_key = {s.matrix, s.j};
    }
    double dot = 0;
    for (std::int64_t p = 0; p < op.k; ++p) dot += a_row[p] * b_col[p];
    const auto c_index = s.matrix * op.c_strides.matrix + s.i * op.c_strides.row + s.j * op.c_strides.col;
    out.push_back(fetch(ctx, op.c, c_index, 1)[0]);
    ref.push_back(dot);
    const double error = std::abs(out.back() - dot);
    const double ranked_error = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
    if (ranked_error > worst_error) {
      worst_error = ranked_error;
      worst = out.size() - 1;
    }
  }

  const std::size_t total = static_cast<std::size_t>(op.batch * op.m * op.n);
  const std::uint64_t nonfinite = scan.count(ctx, op.c, total);
  Check check;
  check.rel_l2_error = relative_l2_error(out.data(), ref.data(), out.size());
  figures.push_back({"nonfinite_outputs", static_cast<double>(nonfinite)});
  std::ostringstream detail;
  detail << "compared " << samples.size() << " of " << total << " outputs (" << kMatmulRandomSamples
         << " random, then the last row and column) with fp64 dot products of the stored inputs; worst at (matrix "
         << samples[worst].matrix << ", row " << samples[worst].i << ", col " << samples[worst].j << "): out "
         << out[worst] << ", ref " << ref[worst];
  if (nonfinite > 0) {
    check.rel_l2_error = std::numeric_limits<double>::quiet_NaN();
    detail << "; " << nan_detail(nonfinite, total);
  }
  check.detail = detail.str();
  return check;
}

namespace {

// The (first, count) ranges of n outputs that the elementwise gate compares: all of them, fetched a million at
// a time, up to kElementwiseFullCheck; above it, evenly spaced blocks and the last block.
std::vector<std::pair<std::size_t, std::size_t>> elementwise_ranges(std::size_t n) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  if (n <= kElementwiseFullCheck) {
    for (std::size_t first = 0; first < n; first += kChunk) ranges.emplace_back(first, std::min(kChunk, n - first));
    return ranges;
  }
  for (std::size_t block = 0; block < kElementwiseSampleBlocks; ++block)
    ranges.emplace_back(block * (n / kElementwiseSampleBlocks), kElementwiseBlock);
  ranges.emplace_back(n - kElementwiseBlock, kElementwiseBlock);
  return ranges;
}

}  // namespace

Check check_elementwise(Context& ctx, const ElementwiseOperands& op, const NonfiniteScan& scan,
                        std::vector<Figure>& figures) {
  figures.clear();
  if (op.n == 0) return {0.0, "empty output", true};
  const std::vector<std::pair<std::size_t, std::size_t>> ranges = elementwise_ranges(op.n);

  std::vector<double> out, ref, arguments(op.inputs.size());
  std::size_t mismatches = 0, first_mismatch = 0;
  for (const auto& [first, count] : ranges) {
    const std::vector<double> out_range = fetch(ctx, op.out, first, count);
    std::vector<std::vector<double>> input_ranges;
    for (const DeviceArray& input : op.inputs) input_ranges.push_back(fetch(ctx, input, first, count));
    for (std::size_t e = 0; e < count; ++e) {
      for (std::size_t arg = 0; arg < arguments.size(); ++arg) arguments[arg] = input_ranges[arg][e];
      const double expected = op.reference(arguments);
      const double got = out_range[e];
      // Written so that a NaN output counts as a mismatch.
      if (!(std::abs(got - expected) <= op.max_relative_error_per_element * std::abs(expected))) {
        if (mismatches++ == 0) first_mismatch = out.size();
      }
      out.push_back(got);
      ref.push_back(expected);
    }
  }
  // Index in the output of the n-th compared element.
  auto output_index = [&](std::size_t compared) {
    for (const auto& [first, count] : ranges) {
      if (compared < count) return first + compared;
      compared -= count;
    }
    return op.n;
  };

  const std::uint64_t nonfinite = scan.count(ctx, op.out, op.n);
  Check check;
  check.rel_l2_error = relative_l2_error(out.data(), ref.data(), out.size());
  figures.push_back({"nonfinite_outputs", static_cast<double>(nonfinite)});
  figures.push_back({"mismatched_elements", static_cast<double>(mismatches)});
  std::ostringstream detail;
  detail << "compared " << out.size() << " of " << op.n << " outputs"
         << (op.n > kElementwiseFullCheck ? " (evenly spaced blocks and the last block)" : "")
         << " with fp64 references from the stored inputs";
  if (mismatches > 0) {
    check.passed_extra = false;
    detail << "; " << mismatches << " differ from the reference by more than " << op.max_relative_error_per_element
           << " relative, the first at index " << output_index(first_mismatch) << ": out " << out[first_mismatch]
           << ", ref " << ref[first_mismatch];
  }
  if (nonfinite > 0) {
    check.rel_l2_error = std::numeric_limits<double>::quiet_NaN();
    detail << "; " << nan_detail(nonfinite, op.n);
  }
  check.detail = detail.str();
  return check;
}

}  // namespace roofbench::case_support
