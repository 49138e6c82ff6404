#include "allreduce.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "roofbench/case_support/process_sum.hpp"
#include "roofbench/cuda.hpp"
#include "roofbench/nccl/communicators.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::nccl {

GateSample choose_gate_sample(std::size_t elements, std::size_t element_size) {
  GateSample sample;
  sample.elements = elements;
  if (elements * element_size <= kGateFullCompareBytes) return sample;
  sample.indices.reserve(kGateSpread + kGateTail);
  // j * elements stays far below 2^64: at most 2^20 x 2^30.
  for (std::size_t j = 0; j < kGateSpread; ++j) sample.indices.push_back(j * elements / kGateSpread);
  for (std::size_t i = elements - std::min(kGateTail, elements); i < elements; ++i) sample.indices.push_back(i);
  std::sort(sample.indices.begin(), sample.indices.end());
  sample.indices.erase(std::unique(sample.indices.begin(), sample.indices.end()), sample.indices.end());
  return sample;
}

namespace {

struct ElementFormat {
  ElementType type;
  ncclDataType_t nccl_type;
  std::size_t size;
};

ElementFormat format_of(Precision precision) {
  switch (precision) {
    case Precision::fp32: return {ElementType::f32, ncclFloat32, 4};
    case Precision::bf16: return {ElementType::bf16, ncclBfloat16, 2};
    default: break;
  }
  throw Error(std::string("roofbench nccl: no all-reduce case for precision ") + to_string(precision));
}

// Exact: every fp32 and bf16 value is a double.
double element_to_double(const unsigned char* element, ElementType type) {
  float value = 0;
  if (type == ElementType::f32) {
    std::memcpy(&value, element, sizeof value);
  } else {
    std::uint16_t bf16_bits = 0;
    std::memcpy(&bf16_bits, element, sizeof bf16_bits);
    const std::uint32_t fp32_bits = std::uint32_t{bf16_bits} << 16;  // bf16 is the top half of an fp32
    std::memcpy(&value, &fp32_bits, sizeof value);
  }
  return value;
}

// Host copies go through in slices so that a 1 GiB message never needs 1 GiB of host memory per rank.
constexpr std::size_t kGatherSliceBytes = std::size_t{64} << 20;

// The sampled elements of one rank's device buffer, as doubles.
std::vector<double> gather_sample(Context& ctx, const void* device_buffer, const ElementFormat& format,
                                  const GateSample& sample, int rank) {
  std::vector<double> values(sample.size());
  const std::size_t slice_elements = kGatherSliceBytes / format.size;
  const auto* device_bytes = static_cast<const unsigned char*>(device_buffer);
  std::vector<unsigned char> slice;
  std::size_t next = 0;  // the next sample position to fill
  for (std::size_t first = 0; first < sample.elements && next < sample.size(); first += slice_elements) {
    const std::size_t count = std::min(slice_elements, sample.elements - first);
    if (sample.index(next) >= first + count) continue;  // nothing sampled in this slice
    slice.resize(count * format.size);
    ctx.copy_to_host(slice.data(), device_bytes + first * format.size, slice.size(), rank);
    for (; next < sample.size() && sample.index(next) < first + count; ++next)
      values[next] = element_to_double(slice.data() + (sample.index(next) - first) * format.size, format.type);
  }
  return values;
}

// NaN (a poisoned or broken output) is worse than any number.
bool worse(double error, double than) { return (std::isnan(error) && !std::isnan(than)) || error > than; }

std::string format_number(double value) {
  std::ostringstream out;
  out.precision(9);
  out << value;
  return out.str();
}

// Where one rank's result is furthest from the reference, for the gate's detail.
std::string largest_error(const std::vector<double>& got, const std::vector<double>& expected,
                          const GateSample& sample) {
  if (got.empty()) return "no elements";
  std::size_t worst_j = 0;
  double worst_difference = -1;
  for (std::size_t j = 0; j < got.size(); ++j) {
    const double difference = std::fabs(got[j] - expected[j]);
    if (worse(difference, worst_difference)) {
      worst_difference = difference;
      worst_j = j;
    }
  }
  return "largest error at element " + std::to_string(sample.index(worst_j)) + ": got " +
         format_number(got[worst_j]) + ", expected " + format_number(expected[worst_j]);
}

// One rank's all-reduce buffers. Out of place, pristine is send (NCCL only reads it); in place, send and
// recv are one buffer that NCCL overwrites, and pristine keeps what the rank contributed for the gate.
struct RankBuffers {
  void* send = nullptr;
  void* recv = nullptr;
  const void* pristine = nullptr;
};

class AllReduceCase final : public Case {
 public:
  AllReduceCase(Precision precision, const Params& params)
      : format_(format_of(precision)),
        elements_(std::max<std::size_t>(1, message_bytes(params) / format_.size)),
        in_place_(parse_in_place(params.str("inplace"))) {}

  void setup(Context& ctx) override {
    const int ranks = ctx.ranks();
    // NCCL returns at once from an in-place all-reduce over one rank: there is no work to time, and
    // a "bandwidth" of bytes over nothing would be a flattering absurdity.
    if (in_place_ && ctx.world_size() == 1)
      throw NotApplicable("an in-place all-reduce over one rank launches no work in NCCL; needs 2 or more GPUs");
    std::vector<int> devices;
    for (int rank = 0; rank < ranks; ++rank) {
      const DeviceInfo& device = ctx.device(rank);
      if (device.kind != DeviceKind::cuda)
        throw Error("roofbench nccl: rank " + std::to_string(rank) + " is not on a CUDA device");
      devices.push_back(device.index);
    }
    comms_ = make_communicators(ctx, devices);
    ranks_ = ranks;
    world_ = ctx.world_size();

    const std::size_t bytes = elements_ * format_.size;
    buffers_.assign(static_cast<std::size_t>(ranks), {});
    for (int rank = 0; rank < ranks; ++rank) {
      RankBuffers& buffers = buffers_[static_cast<std::size_t>(rank)];
      if (in_place_) {
        // Both are inputs: the host poisons outputs only, and the in-place buffer must reach the gate
        // run holding the values it is summed from.
        void* pristine = ctx.alloc(bytes, BufferRole::input, rank);
        ctx.fill_random(pristine, elements_, format_.type, -1.0, 1.0, rank);
        buffers.send = buffers.recv = ctx.alloc(bytes, BufferRole::input, rank);
        buffers.pristine = pristine;
        {
          cuda::DeviceGuard on(devices[static_cast<std::size_t>(rank)]);
          // The fill may have been queued on any stream of the device; the copy must see it finished.
          ROOFBENCH_CUDA(cudaDeviceSynchronize());
          ROOFBENCH_CUDA(cudaMemcpyAsync(buffers.send, pristine, bytes, cudaMemcpyDeviceToDevice,
                                         cuda::stream(ctx, rank)));
        }
        ctx.synchronize(rank);
      } else {
        buffers.send = ctx.alloc(bytes, BufferRole::input, rank);
        buffers.recv = ctx.alloc(bytes, BufferRole::output, rank);
        buffers.pristine = buffers.send;
        ctx.fill_random(buffers.send, elements_, format_.type, -1.0, 1.0, rank);
      }
    }
  }

  // In place, every run after the gate run sums the previous sums: the values grow k-fold per run and
  // reach inf after a few dozen runs with k > 1. Harmless to the timing (GPU arithmetic does not trap
  // or slow down on inf), and the gate has already looked at the first run.
  void run(Context& ctx) override {
    if (comms_.empty()) throw Error("roofbench nccl: run() before setup()");
    GroupScope group;
    for (int rank = 0; rank < ranks_; ++rank) {
      const RankBuffers& buffers = buffers_[static_cast<std::size_t>(rank)];
      ROOFBENCH_NCCL(ncclAllReduce(buffers.send, buffers.recv, elements_, format_.nccl_type, ncclSum,
                                   comms_[rank], cuda::stream(ctx, rank)));
    }
    group.end();
  }

  // busbw and the FLOPs depend on the rank count, which only setup() learns from the context. Asked
  // before setup, work() leaves them out (no busbw, zero FLOPs) rather than guess a count.
  Work work() const override {
    const double bytes = static_cast<double>(elements_ * format_.size);
    Work work;
    work.bytes = bytes;
    work.rates = {{"algbw", bytes}};
    if (world_ >= 1) {
      const double ranks = world_;  // every rank of the clique, in this process or in others
      work.flops = (ranks - 1) * static_cast<double>(elements_);  // each element gets k - 1 additions
      work.rates.push_back({"busbw", bytes * 2 * (ranks - 1) / ranks});
    }
    return work;
  }

  Check check(Context& ctx) override {
    const GateSample sample = choose_gate_sample(elements_, format_.size);
    // The reference sums what each rank contributed, in fp64 from the values as stored.
    std::vector<double> expected(sample.size(), 0.0);
    for (int rank = 0; rank < ranks_; ++rank) {
      const std::vector<double> contributed =
          gather_sample(ctx, buffers_[static_cast<std::size_t>(rank)].pristine, format_, sample, rank);
      for (std::size_t j = 0; j < expected.size(); ++j) expected[j] += contributed[j];
    }
    if (world_ > ranks_) expected = case_support::sum_over_processes(ctx, expected);

    Check result;
    result.rel_l2_error = 0;
    std::string worst_detail;
    std::string disagreement;
    std::vector<double> rank0_result;
    for (int rank = 0; rank < ranks_; ++rank) {
      std::vector<double> got =
          gather_sample(ctx, buffers_[static_cast<std::size_t>(rank)].recv, format_, sample, rank);
      const double error = relative_l2_error(got.data(), expected.data(), got.size());
      if (rank == 0 || worse(error, result.rel_l2_error)) {
        result.rel_l2_error = error;
        worst_detail = "worst rank " + std::to_string(rank) + " (rel L2 " + format_number(error) + "), " +
                       largest_error(got, expected, sample);
      }
      // An all-reduce leaves the same bits on every rank; compare bits so NaNs compare too.
      if (rank == 0) {
        rank0_result = std::move(got);
      } else if (disagreement.empty() &&
                 std::memcmp(got.data(), rank0_result.data(), got.size() * sizeof(double)) != 0) {
        disagreement = "rank " + std::to_string(rank) + " holds a different result from rank 0";
      }
    }

    result.detail = std::to_string(world_) + " rank(s)" +
                    (world_ > ranks_ ? " (" + std::to_string(ranks_) + " in this process)" : std::string()) + ", " +
                    (in_place_ ? "in place" : "out of place") + ", compared " + std::to_string(sample.size()) + " of " + std::to_string(elements_) +
                    " elements" + (sample.every() ? "" : " (an even spread plus the last " +
                                                             std::to_string(kGateTail) + ")") +
                    "; " + worst_detail;
    if (!disagreement.empty()) {
      result.passed_extra = false;
      result.detail += "; " + disagreement;
    }
    // One rank: the all-reduce is a copy, so nothing short of the input itself passes.
    if (world_ == 1 && result.rel_l2_error != 0) {
      result.passed_extra = false;
      result.detail += "; with one rank the result must equal the input exactly";
    }
    gate_elements_ = sample.size();
    return result;
  }

  void teardown(Context&) override { comms_.destroy(); }

  // The ranks once set up, then how many elements the gate compared once it ran.
  std::vector<Figure> figures() const override {
    std::vector<Figure> figures;
    if (world_ >= 1) figures.push_back({"ranks", static_cast<double>(world_)});
    if (gate_elements_ > 0) figures.push_back({"gate_elements", static_cast<double>(gate_elements_)});
    return figures;
  }

 private:
  static std::size_t message_bytes(const Params& params) {
    const std::int64_t bytes = params.integer("bytes");
    if (bytes < 1) throw Error("roofbench nccl: bytes must be positive, not " + std::to_string(bytes));
    return static_cast<std::size_t>(bytes);
  }
  static bool parse_in_place(const std::string& value) {
    if (value == "0") return false;
    if (value == "1") return true;
    throw Error("roofbench nccl: inplace must be 0 or 1, not '" + value + "'");
  }

  ElementFormat format_;
  std::size_t elements_;
  bool in_place_;
  int ranks_ = 0;  // in this process
  int world_ = 0;  // in the clique: ranks_, or every process's under a launcher (one roofbench per GPU)
  std::size_t gate_elements_ = 0;  // check()'s sample size
  Communicators comms_;
  std::vector<RankBuffers> buffers_;
};

// nccl-tests' range (8 B up) in steps of 4, closed with 1 GiB itself: 8 x 4^n never lands on it, and
// the top of the range is where busbw reaches its plateau.
Axis message_sizes() {
  constexpr std::int64_t kLargest = std::int64_t{1} << 30;
  Axis axis = Axis::powers("bytes", 8, kLargest, 4);
  if (axis.values.back() != std::to_string(kLargest)) axis.values.push_back(std::to_string(kLargest));
  return axis;
}

CaseSpec allreduce_spec(Precision precision) {
  CaseSpec spec;
  spec.name = std::string("allreduce_") + to_string(precision);
  spec.description =
      std::string("ncclAllReduce (sum) of a ") + to_string(precision) +
      " message on every GPU given, one rank per GPU, as nccl-tests all_reduce_perf measures it. "
      "bytes is the message size per rank; inplace 1 reduces into the input buffer. "
      "algbw = message bytes / time (the host's bytes/s); busbw = algbw x 2(k-1)/k for k ranks, the "
      "traffic each rank's links carry in a ring all-reduce, comparable with the link bandwidth "
      "whatever k is. FLOPs are the (k-1) additions per element.";
  spec.axes = {message_sizes(), Axis::strings("inplace", {"0", "1"})};
  spec.device = DeviceNeed::gpus(1);
  spec.precision = precision;
  spec.make = [precision](const Params& params) -> std::unique_ptr<Case> {
    return std::make_unique<AllReduceCase>(precision, params);
  };
  // NCCL enqueues from host-side group calls; keep the host's timing plain rather than graph-captured.
  spec.timing.graphable = false;
  return spec;
}

}  // namespace

void describe_plugin(Plugin& plugin) {
  plugin.name = "nccl";
  plugin.description =
      "NCCL collectives across every GPU the host gives a case (one process, one rank per GPU; or one "
      "roofbench per GPU under torchrun, srun or mpirun), reported as algbw and busbw like nccl-tests. "
      "NVLS (multicast) is kept off.";
  plugin.add(allreduce_spec(Precision::fp32));
  plugin.add(allreduce_spec(Precision::bf16));
}

}  // namespace roofbench::nccl
