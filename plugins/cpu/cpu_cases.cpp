#include "cpu_cases.hpp"

#include "cpu_kernels.hpp"
#include "thread_team.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace roofbench::plugins::cpu {
namespace {

namespace kc = roofbench::kernels::cpu;

template <typename T>
constexpr ElementType element_type() {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, float>);
  return std::is_same_v<T, double> ? ElementType::f64 : ElementType::f32;
}

template <typename T>
constexpr Precision precision() {
  return std::is_same_v<T, double> ? Precision::fp64 : Precision::fp32;
}

// Where an output differs most from its reference, for Check::detail; the first non-finite value wins
// because that is what a skipped element (still poisoned) looks like.
struct Deviation {
  std::size_t index = 0;
  double got = 0, want = 0;
};

template <typename Out>
Deviation largest_deviation(const Out* out, const double* reference, std::size_t count) {
  Deviation worst;
  double worst_gap = -1;
  for (std::size_t i = 0; i < count; ++i) {
    const double got = static_cast<double>(out[i]);
    if (!std::isfinite(got)) return {i, got, reference[i]};
    if (const double gap = std::abs(got - reference[i]); gap > worst_gap) {
      worst_gap = gap;
      worst = {i, got, reference[i]};
    }
  }
  return worst;
}

// ---- Streaming kernels: one output element from Inputs input elements, all of type T.

template <typename T, std::size_t Inputs>
using InputPointers = std::array<const T*, Inputs>;

template <typename T, std::size_t Inputs>
struct StreamingKernel {
  void (*run)(const InputPointers<T, Inputs>& inputs, T* output, std::int64_t n);
  void (*reference)(const InputPointers<T, Inputs>& inputs, double* output, std::int64_t n);
  double flops_per_element;
};

template <typename T, std::size_t Inputs>
class StreamingCase final : public Case {
 public:
  StreamingCase(const Params& params, StreamingKernel<T, Inputs> kernel)
      : n_(params.integer("n")), kernel_(kernel) {
    if (n_ <= 0) throw Error("n must be positive");
  }

  void setup(Context& ctx) override {
    awake_.emplace();  // the kernels' threads spin from here to teardown: no run waits for one to wake
    const std::size_t bytes = count() * sizeof(T);
    for (auto& input : inputs_) {
      auto* data = static_cast<T*>(ctx.alloc(bytes, BufferRole::input));
      ctx.fill_random(data, count(), element_type<T>(), -1, 1);
      input = data;
    }
    output_ = static_cast<T*>(ctx.alloc(bytes, BufferRole::output));
  }

  void run(Context&) override { kernel_.run(inputs_, output_, n_); }
  void teardown(Context&) override { awake_.reset(); }

  // Each input read once and the output written once; write-allocate traffic is not counted.
  Work work() const override {
    Work work;
    work.flops = kernel_.flops_per_element * static_cast<double>(n_);
    work.bytes = static_cast<double>((Inputs + 1) * sizeof(T)) * static_cast<double>(n_);
    work.items = static_cast<double>(n_);
    work.item_name = "elements";
    return work;
  }

  Check check(Context&) override {
    std::vector<double> reference(count());
    kernel_.reference(inputs_, reference.data(), n_);
    const Deviation worst = largest_deviation(output_, reference.data(), count());
    std::ostringstream detail;
    detail << "all " << n_ << " elements against an fp64 reference; largest deviation at element " << worst.index
           << ": got " << worst.got << ", want " << worst.want;
    Check check;
    check.rel_l2_error = relative_l2_error(output_, reference.data(), count());
    check.detail = detail.str();
    return check;
  }

 private:
  std::size_t count() const { return static_cast<std::size_t>(n_); }

  std::int64_t n_;
  StreamingKernel<T, Inputs> kernel_;
  InputPointers<T, Inputs> inputs_{};
  T* output_ = nullptr;
  std::optional<kc::KeepAwake> awake_;
};

// From 4096 elements (every array in L1/L2) to 2^24 (hundreds of MiB: far past the last-level cache).
Axis streaming_sizes() { return Axis::powers("n", 4096, std::int64_t{1} << 24, 4); }

template <typename T, std::size_t Inputs>
CaseSpec streaming_spec(std::string name, std::string description, StreamingKernel<T, Inputs> kernel) {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.axes = {streaming_sizes()};
  spec.device = DeviceNeed::cpu();
  spec.precision = precision<T>();
  spec.make = [kernel](const Params& params) { return std::make_unique<StreamingCase<T, Inputs>>(params, kernel); };
  return spec;
}

// ---- Square fp32 matmul C = A * B, n x n, one case for every kernel of that signature.

using MatmulKernel = void (*)(const float* A, const float* B, float* C, std::int64_t m, std::int64_t n,
                              std::int64_t k);

class MatmulCase final : public Case {
 public:
  MatmulCase(const Params& params, MatmulKernel kernel, bool on_team_threads)
      : n_(params.integer("n")), kernel_(kernel), on_team_threads_(on_team_threads) {
    if (n_ <= 0) throw Error("n must be positive");
  }

  void setup(Context& ctx) override {
    if (on_team_threads_) awake_.emplace();
    const std::size_t bytes = elements() * sizeof(float);
    auto* a = static_cast<float*>(ctx.alloc(bytes, BufferRole::input));
    auto* b = static_cast<float*>(ctx.alloc(bytes, BufferRole::input));
    ctx.fill_random(a, elements(), ElementType::f32, -1, 1);
    ctx.fill_random(b, elements(), ElementType::f32, -1, 1);
    a_ = a;
    b_ = b;
    c_ = static_cast<float*>(ctx.alloc(bytes, BufferRole::output));
  }

  void run(Context&) override { kernel_(a_, b_, c_, n_, n_, n_); }
  void teardown(Context&) override { awake_.reset(); }

  // A and B read once, C written once: what a perfectly blocked kernel would move.
  Work work() const override {
    const double n = static_cast<double>(n_);
    Work work;
    work.flops = 2 * n * n * n;
    work.bytes = 3 * sizeof(float) * n * n;
    work.items = 1;  // matrix products per second: the ladder's bar height
    work.item_name = "matmuls";
    return work;
  }

  Check check(Context&) override {
    Check check;
    // The reference may cover only some rows, so a tile the kernel skipped elsewhere is caught here.
    for (std::size_t i = 0; i < elements(); ++i)
      if (!std::isfinite(c_[i])) {
        check.rel_l2_error = std::numeric_limits<double>::quiet_NaN();
        check.detail = "C[" + std::to_string(i / columns()) + "," + std::to_string(i % columns()) + "] is not finite";
        return check;
      }

    const std::vector<std::int64_t> rows = matmul_checked_rows(n_);
    std::vector<float> got(rows.size() * columns());
    std::vector<double> want(got.size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const float* c_row = c_ + static_cast<std::size_t>(rows[r]) * columns();
      std::copy(c_row, c_row + columns(), got.begin() + static_cast<std::ptrdiff_t>(r * columns()));
      kc::matmul_reference_row(a_, b_, want.data() + r * columns(), rows[r], n_, n_);
    }
    const Deviation worst = largest_deviation(got.data(), want.data(), got.size());
    std::ostringstream detail;
    if (rows.size() == static_cast<std::size_t>(n_))
      detail << "all " << n_ << " x " << n_ << " outputs";
    else
      detail << rows.size() << " evenly spaced rows of " << n_ << " (all columns; every output checked finite)";
    detail << " against an fp64 reference; largest deviation at C[" << rows[worst.index / columns()] << ","
           << worst.index % columns() << "]: got " << worst.got << ", want " << worst.want;
    check.rel_l2_error = relative_l2_error(got.data(), want.data(), got.size());
    check.detail = detail.str();
    return check;
  }

 private:
  std::size_t columns() const { return static_cast<std::size_t>(n_); }
  std::size_t elements() const { return columns() * columns(); }

  std::int64_t n_;
  MatmulKernel kernel_;
  bool on_team_threads_;
  const float* a_ = nullptr;
  const float* b_ = nullptr;
  float* c_ = nullptr;
  std::optional<kc::KeepAwake> awake_;
};

// on_team_threads: the kernel splits its loops over kernels/cpu's threads (thread_team.hpp), which
// the case keeps spinning while it runs; the naive loop runs on one thread, BLAS on its own.
CaseSpec matmul_spec(std::string name, std::string description, std::int64_t largest_n, MatmulKernel kernel,
                     bool on_team_threads) {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.axes = {Axis::powers("n", 64, largest_n)};
  spec.device = DeviceNeed::cpu();
  spec.precision = Precision::fp32;
  // naive -> blocked -> BLAS is the CPU's waterfall: what each step of optimisation buys at one n.
  spec.ladder = "cpu-matmul";
  spec.make = [kernel, on_team_threads](const Params& params) {
    return std::make_unique<MatmulCase>(params, kernel, on_team_threads);
  };
  return spec;
}

}  // namespace

std::vector<std::int64_t> matmul_checked_rows(std::int64_t n) {
  constexpr std::int64_t kLargestFullyChecked = 512, kSampledRows = 64;
  std::vector<std::int64_t> rows;
  if (n <= kLargestFullyChecked) {
    for (std::int64_t r = 0; r < n; ++r) rows.push_back(r);
  } else {
    for (std::int64_t s = 0; s < kSampledRows; ++s) rows.push_back(s * (n - 1) / (kSampledRows - 1));
  }
  return rows;
}

void add_cases(Plugin& plugin) {
  plugin.add(streaming_spec<double, 1>(
      "stream_copy", "STREAM copy b = a in fp64: bandwidth of one read and one write stream",
      {.run = [](const InputPointers<double, 1>& in, double* out, std::int64_t n) { kc::stream_copy(in[0], out, n); },
       .reference = [](const InputPointers<double, 1>& in, double* out,
                       std::int64_t n) { kc::stream_copy_reference(in[0], out, n); },
       .flops_per_element = 0}));
  plugin.add(streaming_spec<double, 2>(
      "stream_triad", "STREAM triad a = b + 3c in fp64: bandwidth of two read streams and one write stream",
      {.run = [](const InputPointers<double, 2>& in, double* out,
                 std::int64_t n) { kc::stream_triad(out, in[0], in[1], kc::kTriadScalar, n); },
       .reference = [](const InputPointers<double, 2>& in, double* out,
                       std::int64_t n) { kc::stream_triad_reference(in[0], in[1], kc::kTriadScalar, out, n); },
       .flops_per_element = 2}));
  plugin.add(streaming_spec<float, 2>(
      "add", "Elementwise c = a + b in fp32: bandwidth of a typical elementwise layer",
      {.run = [](const InputPointers<float, 2>& in, float* out, std::int64_t n) { kc::add(in[0], in[1], out, n); },
       .reference = [](const InputPointers<float, 2>& in, double* out,
                       std::int64_t n) { kc::add_reference(in[0], in[1], out, n); },
       .flops_per_element = 1}));

  plugin.add(matmul_spec("matmul_naive",
                         "fp32 C = A*B as a single-threaded (i,j,k) triple loop: the unoptimised baseline", 512,
                         &kc::matmul_naive, false));
  plugin.add(matmul_spec("matmul_blocked",
                         "fp32 C = A*B with packed cache blocks, a register tile and threads over row blocks: "
                         "what blocking alone buys",
                         1024, &kc::matmul_blocked, true));
#ifdef ROOFBENCH_HAVE_CBLAS
  plugin.add(matmul_spec("matmul_blas", "fp32 C = A*B through the system BLAS (cblas_sgemm): the tuned ceiling",
                         2048, &kc::matmul_blas, false));
#endif
}

}  // namespace roofbench::plugins::cpu
