// The data-parallel cost model of gpt/R5 (the case study's Section 13.5), as arithmetic on measured inputs:
// kept apart from the CUDA/NCCL case so a CPU test checks it and the two-node prediction uses the very same
// formulas as the single-node one.
//   t_comm  = 2 (n-1)/n x gradient_bytes / busbw     a ring all-reduce over n ranks whose slowest link has busbw
//   floor   = n B T / (t_compute + t_comm)           no overlap at all
//   ceiling = n B T / t_compute                      linear weak scaling: communication fully hidden
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace roofbench::gpt {

// The fabric between two nodes the across-nodes prediction assumes: one 400 Gb/s link (InfiniBand NDR or
// 400G Ethernet) per node, 50 GB/s each way. A ring over both nodes crosses it, so it is the ring's slowest
// link (NVLink inside a node is ~7x faster). A node with one such NIC per GPU gives NCCL one ring per NIC and
// up to that many times the bandwidth: the figure is the pessimistic one-link case.
inline constexpr double kTwoNodeFabricBytesPerSecond = 400e9 / 8;

struct ScalingPrediction {
  int ranks = 1;
  double t_comm = 0;                // seconds per step, the all-reduce alone
  double floor_tokens_per_s = 0;    // communication not overlapped at all
  double ceiling_tokens_per_s = 0;  // communication hidden entirely behind the backward
};

// A ring all-reduce of `bytes` over `ranks` ranks: each rank sends and receives 2 (n-1)/n of the buffer over
// its slowest link. Zero for one rank, which sends nothing.
inline double ring_allreduce_seconds(int ranks, double bytes, double busbw_bytes_per_s) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  return 2 * (n - 1) / n * bytes / busbw_bytes_per_s;
}

// What one rank of that ring sends to the next (and receives from the one before): 2 (n-1)/n of the buffer.
inline double ring_allreduce_bytes_per_rank(int ranks, double bytes) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  return 2 * (n - 1) / n * bytes;
}

// The edges of a ring over the ranks in rank order (hosts[r]: rank r's host) whose two ends are on different
// hosts: each carries ring_allreduce_bytes_per_rank across the hosts' fabric. 0 for one rank.
inline int ring_edges_across_hosts(const std::vector<std::string>& hosts) {
  int crossing = 0;
  for (std::size_t r = 0; hosts.size() > 1 && r < hosts.size(); ++r) crossing += hosts[r] != hosts[(r + 1) % hosts.size()];
  return crossing;
}

// The inverse: the bus bandwidth a measured all-reduce time implies (0 for one rank).
inline double ring_allreduce_busbw(int ranks, double bytes, double seconds) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  return 2 * (n - 1) / n * bytes / seconds;
}

// Weak scaling: every rank runs the one-GPU step of `tokens_per_rank` tokens in `t_compute` seconds.
inline ScalingPrediction predict_scaling(int ranks, double tokens_per_rank, double t_compute, double t_comm) {
  const double step_tokens = ranks * tokens_per_rank;
  return {ranks, t_comm, step_tokens / (t_compute + t_comm), step_tokens / t_compute};
}

// The same rung on two nodes of `ranks_per_node` GPUs each (2k ranks), from the single-node measurements:
//   t_comm_2node = 2 (2k-1)/(2k) x gradient_bytes / 50e9
//   floor        = 2k B T / (t_compute + t_comm_2node),   ceiling (fully overlapped) = 2k B T / t_compute
inline ScalingPrediction predict_two_nodes(int ranks_per_node, double tokens_per_rank, double t_compute,
                                           double gradient_bytes) {
  const int ranks = 2 * ranks_per_node;
  return predict_scaling(ranks, tokens_per_rank, t_compute,
                         ring_allreduce_seconds(ranks, gradient_bytes, kTwoNodeFabricBytesPerSecond));
}

}  // namespace roofbench::gpt
