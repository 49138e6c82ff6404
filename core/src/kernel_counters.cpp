#include "kernel_counters.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "text.hpp"

namespace roofbench {

namespace {

using F = CounterField;

// Nsight Compute's roofline counts FLOPs the same way (its SpeedOfLight roofline sections): the FP pipes'
// add and multiply instructions once, their FMAs twice, per thread with the predicate on; the tensor
// pipe's math ops per source precision (already FLOPs: an MMA's multiply-add counts 2).
const std::vector<CounterMetric> kMetrics = {
    {"dram__bytes_read.sum", F::dram_read, 1},
    {"dram__bytes_write.sum", F::dram_write, 1},
    {"lts__t_bytes.sum", F::l2_bytes, 1},
    {"sm__sass_thread_inst_executed_op_dadd_pred_on.sum", F::flops_fp64, 1},
    {"sm__sass_thread_inst_executed_op_dmul_pred_on.sum", F::flops_fp64, 1},
    {"sm__sass_thread_inst_executed_op_dfma_pred_on.sum", F::flops_fp64, 2},
    {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", F::flops_fp32, 1},
    {"sm__sass_thread_inst_executed_op_fmul_pred_on.sum", F::flops_fp32, 1},
    {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", F::flops_fp32, 2},
    {"sm__sass_thread_inst_executed_op_hadd_pred_on.sum", F::flops_fp16, 1},
    {"sm__sass_thread_inst_executed_op_hmul_pred_on.sum", F::flops_fp16, 1},
    {"sm__sass_thread_inst_executed_op_hfma_pred_on.sum", F::flops_fp16, 2},
    {"sm__ops_path_tensor_src_fp64.sum", F::flops_tensor, 1},
    {"sm__ops_path_tensor_src_tf32_dst_fp32.sum", F::flops_tensor, 1},
    {"sm__ops_path_tensor_src_fp16.sum", F::flops_tensor, 1},
    {"sm__ops_path_tensor_src_bf16_dst_fp32.sum", F::flops_tensor, 1},
    {"sm__ops_path_tensor_src_fp8.sum", F::flops_tensor, 1},
};

double& field(KernelCounters& k, CounterField f) {
  switch (f) {
    case F::dram_read: return k.dram_read;
    case F::dram_write: return k.dram_write;
    case F::l2_bytes: return k.l2_bytes;
    case F::flops_fp64: return k.flops_fp64;
    case F::flops_fp32: return k.flops_fp32;
    case F::flops_fp16: return k.flops_fp16;
    case F::flops_tensor: break;
  }
  return k.flops_tensor;
}

void add(KernelCounters& into, const KernelCounters& k) {
  into.launches_per_run += k.launches_per_run;
  into.dram_read += k.dram_read, into.dram_write += k.dram_write, into.l2_bytes += k.l2_bytes;
  into.flops_fp64 += k.flops_fp64, into.flops_fp32 += k.flops_fp32, into.flops_fp16 += k.flops_fp16;
  into.flops_tensor += k.flops_tensor;
}

std::string times(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, ratio < 0.095 ? "%.2fx" : "%.1fx", ratio);
  return text;
}

}  // namespace

const std::vector<CounterMetric>& counter_metrics() { return kMetrics; }

const char* to_string(CounterReplay replay) {
  switch (replay) {
    case CounterReplay::kernel: return "kernel";
    case CounterReplay::run: return "run";
    case CounterReplay::automatic: return "auto";
  }
  return "auto";
}

std::string range_name(const std::vector<std::string>& launches_seen, std::size_t i, std::size_t ranges, int passes) {
  if (passes > 0 && launches_seen.size() == ranges * static_cast<std::size_t>(passes) && !launches_seen[i].empty())
    return demangled(launches_seen[i].c_str());
  return "kernel " + std::to_string(i + 1);
}

std::optional<CounterReplay> counter_replay_from(const std::string& word) {
  for (CounterReplay r : {CounterReplay::automatic, CounterReplay::kernel, CounterReplay::run})
    if (word == to_string(r)) return r;
  return std::nullopt;
}

void add_range(KernelCounters& k, const std::vector<double>& values) {
  const std::size_t n = std::min(values.size(), kMetrics.size());
  for (std::size_t i = 0; i < n; ++i) field(k, kMetrics[i].field) += kMetrics[i].weight * values[i];
  k.launches_per_run += 1;
}

CounterProfile sum_ranges(const std::vector<CounterRange>& ranges) {
  std::map<std::string, KernelCounters> by_name;
  for (const CounterRange& range : ranges) {
    KernelCounters& k = by_name[range.name];
    k.name = range.name;
    add_range(k, range.values);
  }
  CounterProfile profile;
  profile.total.name = "all kernels";
  for (auto& [name, k] : by_name) {
    add(profile.total, k);
    profile.kernels.push_back(k);
  }
  std::stable_sort(profile.kernels.begin(), profile.kernels.end(),
                   [](const KernelCounters& a, const KernelCounters& b) { return a.dram_bytes() > b.dram_bytes(); });
  return profile;
}

double counter_ratio(double measured, double modelled) { return measured > 0 && modelled > 0 ? measured / modelled : 0; }

std::string counted_ridge_clause(const KernelCounters& m, double compute_roof, double memory_roof) {
  if (compute_roof <= 0 || memory_roof <= 0 || m.dram_bytes() <= 0 || m.flops() <= 0) return "";
  const double ridge = compute_roof / memory_roof, intensity = m.flops() / m.dram_bytes();
  if (intensity >= ridge) return "";
  char text[160];
  std::snprintf(text, sizeof text, "its counted intensity, %.3g FLOP/B, is under the ridge (%.3g FLOP/B): by its counted "
                "bytes DRAM bounds it", intensity, ridge);
  return text;
}

std::string counters_verdict(const KernelCounters& m, double modelled_bytes, double modelled_flops) {
  constexpr double kHigh = 1.2, kLow = 0.8;  // within 20% of the model says nothing
  std::string verdict;
  auto add_clause = [&](const std::string& clause) { verdict += (verdict.empty() ? "" : "; ") + clause; };
  if (modelled_bytes > 0) {
    const double bytes = m.dram_bytes() / modelled_bytes;
    if (bytes >= kHigh)
      add_clause("moves " + times(bytes) + " its minimum bytes");
    else if (bytes <= kLow && m.l2_bytes >= kLow * modelled_bytes)
      add_clause("reads its data from L2: DRAM bytes " + times(bytes) + " the model");
    else if (bytes <= kLow)
      add_clause("DRAM bytes " + times(bytes) + " the model");
  }
  if (modelled_flops > 0 && m.flops() > 0) {
    const double flops = m.flops() / modelled_flops;
    if (flops >= kHigh) add_clause("executes " + times(flops) + " its counted FLOPs");
    if (flops <= kLow) add_clause("executes " + times(flops) + " its counted FLOPs (the rest on pipes not counted)");
  }
  return verdict;
}

}  // namespace roofbench
