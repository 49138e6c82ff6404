// gpt/R5_data_parallel and gpt/R5_data_parallel_R3: one data-parallel training step over every GPU the
// host gives the case (one rank per GPU, --gpus chooses them), built on R0 (eager, TF32, batch 64 a rank)
// and on the ladder's fast configuration R3 (bf16, batch 512 a rank; data_parallel.hpp: how a step runs,
// threads, multi-node, why the gradient is reduced in fp32).
//
// Predicted before it is measured, with the case study's cost model (Section 13.5):
//   t_comm  = 2 (k-1)/k x gradient_bytes / busbw        a ring all-reduce of the fp32 gradient
//   floor   = k B T / (t_compute + t_comm)               no overlap at all
//   ceiling = k B T / t_compute                          linear weak scaling: communication fully hidden
// t_compute (one plain step of the rung on one GPU) and busbw (all-reduces of the gradient's size on the ranks'
// communicator) are measured in setup with CUDA events: they are the model's inputs, not the benchmark's
// measurement, which the host takes as for every case. Where the measured tokens/s lands between floor and
// ceiling says how much of the all-reduce the bucketed overlap hid.
//
// Across nodes, on paper (never run): the same model over two nodes of k GPUs each, 2k ranks in one ring
// whose slowest link is a 400 Gb/s fabric (scaling_model.hpp, kTwoNodeFabricBytesPerSecond):
//   t_comm_2node = 2 (2k-1)/(2k) x gradient_bytes / 50e9
//   floor        = 2k B T / (t_compute + t_comm_2node)    ceiling (fully overlapped) = 2k B T / t_compute
// from the same measured t_compute and gradient bytes, as the counters predicted_two_node_*.
//
// Under a launcher (one roofbench per GPU, the ranks in several processes and perhaps on several hosts), k is
// the measured world and busbw the measured clique's, fabric included; from each process's host (exchanged in
// setup) the counters hosts, ring_edges_across_hosts and bytes_across_hosts_per_step say which of a ring's
// bytes (in rank order, 2 (k-1)/k x gradient_bytes an edge and step) crossed between hosts.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data_parallel.hpp"
#include "roofbench/case_support/process_sum.hpp"
#include "roofbench/cuda.hpp"
#include "scaling_model.hpp"
#include "training_gates.hpp"

namespace roofbench::gpt::cuda {
namespace {

// Each process's host name, in rank order (one rank a process under a launcher).
std::vector<std::string> host_of_each_process(Context& ctx) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return ctx.exchange(name);
}

// How many other processes' first ranks hold parameters other than global rank 0's, bit for bit: each
// process sends a 64-bit FNV-1a digest of its first rank's parameters (the parameters themselves would be
// the whole model through the host's rendezvous).
int processes_differing(Context& ctx, const std::vector<float>& parameters) {
  std::uint64_t digest = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(parameters.data());
  for (std::size_t i = 0; i < parameters.size() * sizeof(float); ++i) digest = (digest ^ bytes[i]) * 0x100000001b3ull;
  const std::vector<std::string> all = ctx.exchange(std::string(reinterpret_cast<const char*>(&digest), sizeof digest));
  return static_cast<int>(std::count_if(all.begin() + 1, all.end(), [&](const std::string& d) { return d != all.front(); }));
}

constexpr int kReplicaSteps = 10;     // steps after which every rank must hold the same parameters
constexpr int kModelWarmup = 3;       // untimed calls before each of the cost model's measurements
constexpr int kModelRepetitions = 5;  // timed calls, averaged

// The rung R5 replicates and its batch per rank (weak scaling: every rank runs the one-GPU step).
struct ReplicatedRung {
  Rung rung;
  int rank_batch;
};

class DataParallelTrainingStep final : public Case {
 public:
  explicit DataParallelTrainingStep(ReplicatedRung replicated) : rung_(replicated.rung) {
    cfg_.batch = replicated.rank_batch;
    cfg_.validate();
  }

  void setup(Context& ctx) override {
    const std::vector<std::uint8_t> tokens = load_training_corpus(cfg_);
    unigram_entropy_ = unigram_entropy_nats(tokens);
    std::vector<DataParallelRank> ranks;
    for (int rank = 0; rank < ctx.ranks(); ++rank) {
      const DeviceInfo& device = ctx.device(rank);
      if (device.kind != DeviceKind::cuda) throw Error("gpt R5: rank " + std::to_string(rank) + " is not a GPU");
      auto* corpus = static_cast<std::uint8_t*>(ctx.alloc(tokens.size(), BufferRole::input, rank));
      ctx.copy_to_device(corpus, tokens.data(), tokens.size(), rank);
      // ctx.alloc, so the host's high-water mark covers every rank's step; used only while the trainers
      // are built, one rank after the other on this thread.
      DeviceAllocator alloc = [&ctx, rank](std::size_t bytes, BufferRole role) { return ctx.alloc(bytes, role, rank); };
      ranks.push_back({device.index, roofbench::cuda::stream(ctx, rank), std::move(alloc),
                       DeviceCorpus{corpus, tokens.size()}});
    }
    const std::size_t gate_tokens = static_cast<std::size_t>(kGateSequences) * cfg_.context;
    gate_inputs_ = static_cast<std::uint8_t*>(ctx.alloc(gate_tokens, BufferRole::scratch, 0));
    gate_targets_ = static_cast<std::uint8_t*>(ctx.alloc(gate_tokens, BufferRole::scratch, 0));
    trainer_ = std::make_unique<DataParallelTrainer>(cfg_, rung_, std::move(ranks), ctx.seed(), kInitSeed, &ctx);
    if (ctx.world_size() > ctx.ranks()) process_hosts_ = host_of_each_process(ctx);
    predict();
  }

  void run(Context&) override { trainer_->train_step(); }

  // Tokens of all k ranks, so the host's tokens/s is the data-parallel throughput; FLOPs and bytes of one
  // rank (every rank does the same step), so FLOP/s and roof_pct are one GPU's against that GPU's roofs,
  // as the nccl plugin counts bytes per rank (k times them put roof_pct k-fold too high). Before setup k is
  // unknown and the amounts are zero.
  // scaling_efficiency: the host reports each rate as amount / median step time, so an amount of t_compute
  // gives t_compute / t_step, the weak-scaling efficiency (measured tokens/s over k x one GPU's tokens/s).
  Work work() const override {
    Work w = training_step_work(cfg_);
    w.items *= ranks_;
    if (t_compute_ > 0) w.rates.push_back({"scaling_efficiency", t_compute_});
    return w;
  }

  // The cost model's inputs and prediction (seconds, bytes, bytes/s, tokens/s), then the gate's figures.
  std::vector<Figure> figures() const override {
    std::vector<Figure> figures = cost_model_figures();
    figures.insert(figures.end(), gate_figures_.begin(), gate_figures_.end());
    return figures;
  }

  std::vector<Figure> cost_model_figures() const {
    std::vector<Figure> figures{{"parameters", static_cast<double>(parameter_count(cfg_))}};
    if (ranks_ < 1) return figures;
    figures.push_back({"ranks", static_cast<double>(ranks_)});
    figures.push_back({"buckets", static_cast<double>(buckets_)});
    figures.push_back({"gradient_bytes", gradient_bytes()});
    figures.push_back({"t_compute", t_compute_});
    figures.push_back({"busbw_assumed", busbw_});
    figures.push_back({"t_comm", t_comm_});
    const ScalingPrediction here = predict_scaling(ranks_, rank_tokens(), t_compute_, t_comm_);
    figures.push_back({"predicted_floor_tokens_per_s", here.floor_tokens_per_s});
    figures.push_back({"linear_ceiling_tokens_per_s", here.ceiling_tokens_per_s});
    const ScalingPrediction two_nodes = predict_two_nodes(ranks_, rank_tokens(), t_compute_, gradient_bytes());
    figures.push_back({"predicted_two_node_t_comm", two_nodes.t_comm});
    figures.push_back({"predicted_two_node_tokens_per_s", two_nodes.floor_tokens_per_s});
    figures.push_back({"predicted_two_node_ceiling_tokens_per_s", two_nodes.ceiling_tokens_per_s});
    if (!process_hosts_.empty()) {
      // The ring in rank order (one rank a process): each of its edges carries 2 (k-1)/k of the gradient a step.
      const int crossing = ring_edges_across_hosts(process_hosts_);
      figures.push_back({"hosts", static_cast<double>(std::set<std::string>(process_hosts_.begin(), process_hosts_.end()).size())});
      figures.push_back({"ring_edges_across_hosts", static_cast<double>(crossing)});
      figures.push_back({"bytes_across_hosts_per_step", crossing * ring_allreduce_bytes_per_rank(ranks_, gradient_bytes())});
    }
    return figures;
  }

  // (a) rank 0's forward against the fp64 reference; (b) every rank holds rank 0's parameters bit for bit
  // after kReplicaSteps steps from a fresh start; (c) the same run, continued to kLearningSteps, learns
  // (the ranks' mean loss per step, judged as every rung's).
  Check check(Context& ctx) override {
    Check result;
    gate_figures_.clear();
    std::ostringstream detail;
    {
      roofbench::cuda::DeviceGuard on(trainer_->device(0));
      result.rel_l2_error = logits_vs_reference(ctx, trainer_->trainer(0), gate_inputs_, gate_targets_, detail);
    }
    trainer_->initialize(kInitSeed);
    for (int step = 0; step < kReplicaSteps; ++step) trainer_->train_step();
    trainer_->synchronize();
    compare_replicas(ctx, result, detail);
    for (int step = kReplicaSteps; step < kLearningSteps; ++step) trainer_->train_step();  // no host read
    trainer_->synchronize();
    std::vector<float> mean_history(kLossHistory, 0.0f), history(kLossHistory);
    for (int rank = 0; rank < trainer_->ranks(); ++rank) {
      ctx.copy_to_host(history.data(), trainer_->trainer(rank).loss_history(), history.size() * sizeof(float), rank);
      for (std::size_t s = 0; s < history.size(); ++s) mean_history[s] += history[s] / static_cast<float>(ranks_);
    }
    if (ranks_ > trainer_->ranks()) mean_history = case_support::sum_over_processes(ctx, mean_history);
    judge_learning(mean_history, unigram_entropy_, result, gate_figures_, detail);
    result.detail = detail.str();
    return result;
  }

  void teardown(Context&) override {
    if (trainer_) trainer_->destroy();
    trainer_.reset();
  }

 private:
  double gradient_bytes() const { return 4.0 * static_cast<double>(parameter_count(cfg_)); }
  double rank_tokens() const { return static_cast<double>(cfg_.batch) * cfg_.context; }

  void predict() {
    ranks_ = trainer_->world_size();
    buckets_ = trainer_->buckets();
    t_compute_ = trainer_->time_single_rank_step(kModelWarmup, kModelRepetitions);
    if (ranks_ > 1) {
      const double t_allreduce = trainer_->time_gradient_allreduce(kModelWarmup, kModelRepetitions);
      busbw_ = ring_allreduce_busbw(ranks_, gradient_bytes(), t_allreduce);
      // The model's formula, not t_allreduce itself: busbw is the figure comparable with a link's
      // bandwidth whatever k is, and the one to replace by an assumed value when predicting another k.
      t_comm_ = ring_allreduce_seconds(ranks_, gradient_bytes(), busbw_);
    } else {
      busbw_ = 0;  // one rank: nothing to send
      t_comm_ = 0;
    }
    trainer_->initialize(kInitSeed);  // the measurements trained rank 0 alone: replicas again
    const ScalingPrediction here = predict_scaling(ranks_, rank_tokens(), t_compute_, t_comm_);
    const ScalingPrediction two_nodes = predict_two_nodes(ranks_, rank_tokens(), t_compute_, gradient_bytes());
    std::cerr << "R5 on " << to_string(rung_) << " b" << cfg_.batch << " k=" << ranks_ << ": t_compute " << format_gate_number(t_compute_ * 1e3) << " ms, t_comm "
              << format_gate_number(t_comm_ * 1e3) << " ms (busbw " << format_gate_number(busbw_ / 1e9)
              << " GB/s, " << format_gate_number(gradient_bytes() / 1e6) << " MB of gradients)\n  floor "
              << format_gate_number(here.floor_tokens_per_s) << " tokens/s, ceiling "
              << format_gate_number(here.ceiling_tokens_per_s) << " tokens/s\n  on paper, two such nodes over "
              << format_gate_number(kTwoNodeFabricBytesPerSecond * 8 / 1e9) << " Gb/s: t_comm "
              << format_gate_number(two_nodes.t_comm * 1e3) << " ms, floor "
              << format_gate_number(two_nodes.floor_tokens_per_s) << " tokens/s, ceiling "
              << format_gate_number(two_nodes.ceiling_tokens_per_s) << " tokens/s\n";
  }

  void compare_replicas(Context& ctx, Check& result, std::ostringstream& detail) {
    const std::size_t P = parameter_count(cfg_);
    std::vector<float> reference(P), replica(P);
    ctx.copy_to_host(reference.data(), trainer_->trainer(0).params(), P * sizeof(float), 0);
    double largest_difference = 0;
    int differing_ranks = ranks_ > trainer_->ranks() ? processes_differing(ctx, reference) : 0;
    for (int rank = 1; rank < trainer_->ranks(); ++rank) {
      ctx.copy_to_host(replica.data(), trainer_->trainer(rank).params(), P * sizeof(float), rank);
      if (std::memcmp(replica.data(), reference.data(), P * sizeof(float)) == 0) continue;
      ++differing_ranks;
      for (std::size_t i = 0; i < P; ++i)
        largest_difference = std::max(largest_difference, std::fabs(static_cast<double>(replica[i]) - reference[i]));
    }
    gate_figures_.push_back({"replica_max_abs_difference", largest_difference});
    detail << ranks_ << " rank(s) after " << kReplicaSteps << " steps: "
           << (differing_ranks == 0 ? "parameters identical bit for bit"
                                    : std::to_string(differing_ranks) + " rank(s) differ from rank 0 (FAILED), by up to " +
                                          format_gate_number(largest_difference))
           << ". ";
    if (differing_ranks != 0) result.passed_extra = false;
  }

  Rung rung_;
  Config cfg_;
  std::vector<std::string> process_hosts_;  // each process's host, in rank order, under a launcher
  int ranks_ = 0;  // the clique's ranks: this process's, or every process's under a launcher
  std::vector<Figure> gate_figures_;  // check()'s, returned by figures()
  int buckets_ = 0;
  double unigram_entropy_ = 0;
  double t_compute_ = 0, busbw_ = 0, t_comm_ = 0;
  std::uint8_t* gate_inputs_ = nullptr;
  std::uint8_t* gate_targets_ = nullptr;
  std::unique_ptr<DataParallelTrainer> trainer_;
};

CaseSpec data_parallel_case(std::string name, std::string description, ReplicatedRung replicated,
                            Precision precision, std::string ladder) {
  CaseSpec spec;
  spec.name = std::move(name);
  spec.description = std::move(description);
  spec.device = DeviceNeed::gpus(1);
  spec.precision = precision;
  // Not on the single-GPU waterfall: its bars are k GPUs' tokens/s, compared by the scaling counters
  // (predicted floor, linear ceiling, scaling_efficiency), not by ratio to the rung before. A ladder per
  // replicated rung: both are rung R5 by name, so in one ladder their bars would share a slot.
  spec.ladder = std::move(ladder);
  // run() drives several streams from several host threads and NCCL: not one capturable stream.
  spec.timing.graphable = false;
  // The learning gate trains 300 steps on every rank (at batch 512 a rank: seconds) after the replica check.
  spec.timeout_s = 240;
  spec.make = [replicated](const Params&) -> std::unique_ptr<Case> {
    return std::make_unique<DataParallelTrainingStep>(replicated);
  };
  return spec;
}

}  // namespace

std::vector<CaseSpec> data_parallel_cases() {
  return {
      data_parallel_case("R5_data_parallel",
                         "data parallel: R0 replicated on every selected GPU (one rank each), batch 64 per rank "
                         "drawn by each rank (weak scaling), gradients averaged with NCCL in per-block buckets on "
                         "a comm stream that overlaps the backward; tokens/s over all ranks, with the cost "
                         "model's floor and ceiling as counters",
                         {Rung::eager, 64}, Precision::tf32, "gpt-data-parallel"),
      data_parallel_case("R5_data_parallel_R3",
                         "data parallel on the fast configuration: R3 (bf16, batch 512 per rank, the step "
                         "enqueued rather than replayed as a graph, so the buckets hook into its backward) "
                         "replicated as R5_data_parallel replicates R0; the fp32 gradient averaged in fp32",
                         {Rung::bf16, 512}, Precision::bf16, "gpt-data-parallel-R3"),
  };
}

}  // namespace roofbench::gpt::cuda
