// Memory-bound cases: c = a + b (scalar and 16-byte vectorised, fp32 and bf16) and a device-to-device
// copy, the bandwidth roof's own case, by cudaMemcpyAsync and by a kernel.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cases.hpp"
#include "roofbench/case_support/formats.hpp"
#include "roofbench/case_support/gate.hpp"
#include "roofbench/case_support/input_copies.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/kernels/cuda_elementwise.hpp"

namespace roofbench::micro {
namespace {

using case_support::InputCopies;
using case_support::NonfiniteScan;
using case_support::check_elementwise;
using case_support::unit_roundoff;


template <typename T>
constexpr ElementType element_type_of();
template <>
constexpr ElementType element_type_of<float>() {
  return ElementType::f32;
}
template <>
constexpr ElementType element_type_of<__nv_bfloat16>() {
  return ElementType::bf16;
}

enum class AddVariant { scalar, vec16 };

// An elementwise result is one rounding of the exact value; two units of slack cover the fp32
// intermediate that bf16 arithmetic may round through.
constexpr double kAddRoundings = 2;

template <typename T>
class AddCase final : public Case {
 public:
  AddCase(AddVariant variant, std::size_t n) : variant_(variant), n_(n) {}

  void setup(Context& ctx) override {
    a_ = static_cast<T*>(ctx.alloc(n_ * sizeof(T), BufferRole::input));
    b_ = static_cast<T*>(ctx.alloc(n_ * sizeof(T), BufferRole::input));
    c_ = static_cast<T*>(ctx.alloc(n_ * sizeof(T), BufferRole::output));
    ctx.fill_random(a_, n_, kType);
    ctx.fill_random(b_, n_, kType);
    for (T** buffer : {&a_, &b_}) copies_.add(*buffer, n_ * sizeof(T), BufferRole::input);
    copies_.add(c_, n_ * sizeof(T), BufferRole::output);
    scan_.setup(ctx);
  }

  // Cold, runs read a and b and write c in copies taken in turn (input_copies.hpp).
  Rotation* rotation() override { return &copies_; }

  void run(Context& ctx) override {
    if (variant_ == AddVariant::scalar)
      kernels::launch_add_scalar(a_, b_, c_, n_, cuda::stream(ctx));
    else
      kernels::launch_add_vec16(a_, b_, c_, n_, cuda::stream(ctx));
  }

  Work work() const override {
    Work work;
    work.flops = double(n_);
    work.bytes = 3.0 * double(n_) * sizeof(T);
    work.bytes_read = 2.0 * double(n_) * sizeof(T);  // a and b read, c written
    work.items = double(n_);
    work.item_name = "elements";
    return work;
  }

  Check check(Context& ctx) override {
    return check_elementwise(ctx,
                             {.n = n_,
                              .out = {c_, kType},
                              .inputs = {{a_, kType}, {b_, kType}},
                              .reference = [](std::span<const double> x) { return x[0] + x[1]; },
                              .max_relative_error_per_element = kAddRoundings * unit_roundoff(kType)},
                             scan_, gate_figures_);
  }
  std::vector<Figure> figures() const override { return gate_figures_; }

 private:
  static constexpr ElementType kType = element_type_of<T>();
  AddVariant variant_;
  std::size_t n_;
  T *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  InputCopies copies_;
  NonfiniteScan scan_;
  std::vector<Figure> gate_figures_;
};

// cudaMemcpyAsync may run on a copy engine or as the driver's own kernel, which CUPTI's range profiler
// does not count; copy_vec16 is a kernel of roofbench's, so `--counters` sees its traffic.
enum class CopyPath { memcpy, kernel };

class CopyCase final : public Case {
 public:
  CopyCase(CopyPath path, std::size_t bytes) : path_(path), bytes_(bytes) {
    if (bytes_ % sizeof(float) != 0) throw Error("micro: copy sizes must be a multiple of 4 bytes");
  }

  void setup(Context& ctx) override {
    source_ = ctx.alloc(bytes_, BufferRole::input);
    destination_ = ctx.alloc(bytes_, BufferRole::output);
    ctx.fill_random(source_, floats(), ElementType::f32);
    copies_.add(source_, bytes_, BufferRole::input);
    copies_.add(destination_, bytes_, BufferRole::output);
    scan_.setup(ctx);
  }

  Rotation* rotation() override { return &copies_; }

  void run(Context& ctx) override {
    if (path_ == CopyPath::kernel)
      kernels::launch_copy_vec16(static_cast<const float*>(source_), static_cast<float*>(destination_), floats(),
                                 cuda::stream(ctx));
    else
      ROOFBENCH_CUDA(cudaMemcpyAsync(destination_, source_, bytes_, cudaMemcpyDeviceToDevice, cuda::stream(ctx)));
  }

  Work work() const override {
    Work work;
    work.bytes = 2.0 * double(bytes_);  // read once, written once
    work.bytes_read = double(bytes_);
    return work;
  }

  Check check(Context& ctx) override {
    // A copy is exact: any difference at all fails.
    return check_elementwise(ctx,
                             {.n = floats(),
                              .out = {destination_, ElementType::f32},
                              .inputs = {{source_, ElementType::f32}},
                              .reference = [](std::span<const double> x) { return x[0]; },
                              .max_relative_error_per_element = 0},
                             scan_, gate_figures_);
  }
  std::vector<Figure> figures() const override { return gate_figures_; }

 private:
  std::size_t floats() const { return bytes_ / sizeof(float); }
  CopyPath path_;
  std::size_t bytes_;
  void *source_ = nullptr, *destination_ = nullptr;
  InputCopies copies_;
  NonfiniteScan scan_;
  std::vector<Figure> gate_figures_;
};

std::size_t positive_size(const Params& params, const std::string& axis) {
  const std::int64_t value = params.integer(axis);
  if (value <= 0) throw Error("micro: axis " + axis + " must be positive, got " + params.str(axis));
  return static_cast<std::size_t>(value);
}

// From L2-resident (2^20 elements, 12 MiB for three fp32 arrays in a 50-60 MB L2) to 4 GiB per fp32 array.
constexpr std::int64_t kAddFirstN = std::int64_t{1} << 20;
constexpr std::int64_t kAddLastN = std::int64_t{1} << 30;

template <typename T>
void add_add_cases(Plugin& plugin, const char* type_name, Precision precision) {
  struct Variant {
    AddVariant variant;
    const char* name;
    const char* how;
  };
  for (const Variant& variant :
       {Variant{AddVariant::scalar, "scalar", "one element per thread, grid-stride"},
        Variant{AddVariant::vec16, "vec16", "16-byte loads and stores, 4 in flight per thread, scalar edges"}}) {
    plugin.add(gpu_case(std::string("add_") + type_name + "_" + variant.name,
                        std::string("c = a + b in ") + type_name + ", " + variant.how,
                        Axis::powers("n", kAddFirstN, kAddLastN, 4), precision,
                        [kind = variant.variant](const Params& params) -> std::unique_ptr<Case> {
                          return std::make_unique<AddCase<T>>(kind, positive_size(params, "n"));
                        }));
  }
}

}  // namespace

void add_elementwise_cases(Plugin& plugin) {
  add_add_cases<float>(plugin, "fp32", Precision::fp32);
  add_add_cases<__nv_bfloat16>(plugin, "bf16", Precision::bf16);

  struct Copy {
    CopyPath path;
    const char* name;
    const char* description;
  };
  for (const Copy& copy :
       {Copy{CopyPath::memcpy, "copy",
             "cudaMemcpyAsync device to device: the memory bandwidth roof (bytes read + written)"},
        Copy{CopyPath::kernel, "copy_kernel",
             "the same copy by add vec16's kernel without the add (16-byte loads and stores, 4 in flight per "
             "thread), a kernel that --counters sees (bytes read + written)"}}) {
    plugin.add(gpu_case(copy.name, copy.description,
                        Axis::powers("bytes", std::int64_t{1} << 20, std::int64_t{1} << 32, 4), Precision::fp32,
                        [path = copy.path](const Params& params) -> std::unique_ptr<Case> {
                          return std::make_unique<CopyCase>(path, positive_size(params, "bytes"));
                        }));
  }
}

}  // namespace roofbench::micro
