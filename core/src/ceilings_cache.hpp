// Ceilings are measured once per device and kept in a small text file per device key:
// $ROOFBENCH_CACHE_DIR, else $XDG_CACHE_HOME/roofbench, else ~/.cache/roofbench.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "roofbench/plugin.hpp"
#include "roofline.hpp"

namespace roofbench {

struct CachedCeilings {
  Ceilings ceilings;
  std::string measured_at;
  std::vector<std::string> how;
  // Why the next run must measure again (a result beat these ceilings); empty while they are trusted.
  std::string stale;
};

std::string ceilings_cache_path(const std::string& device_key);

// The cache file's format. 3 added cache_bandwidth; 4 measures a GPU's bandwidth and read_bandwidth as the
// best of several kernels (memory_roofs.hpp), which beat the single kernel of 3: a file of 3 holds lower
// roofs that shipped cases exceed, so it is measured again, not read; 5 takes each GEMM roof as the best of 20
// launches after 10 warm-ups (of 4: 10 after 3, which a cuBLAS GEMM of the same shape beat by 0.5%); 6 takes
// the GEMM roofs as the best of the NN and TN layouts and streams 4 GiB for the memory roofs where it fits (an
// H200's 4 GiB copy and TN fp32 GEMM beat 5's 2 GiB and NN roofs by 0.7% and 0.2%); 7 times the launches back
// to back behind a busy wait (cuda_event_timing.hpp), so the host's launch time is no longer inside a roof's
// events (with 6, an H100's fp8 GEMM case beat its roof by 0.2%); 8 adds micro's copy_kernel in its own form
// (one step a thread) to the copy table, so that the copy roof bounds it.
inline constexpr int kCeilingsFormat = 8;

// Why `c` cannot be a device of `kind`'s ceilings, on one line; empty when it can. Every figure must be
// finite; bandwidth, read_bandwidth, cache_bandwidth and fp32 present; each figure present within the
// physical bounds of the kind (a CPU: 100 MB/s to 3 TB/s of memory bandwidth, 10 MFLOP/s to 100 TFLOP/s;
// a GPU: 10 GB/s to 100 TB/s, 10 GFLOP/s to 100 PFLOP/s; caches up to 10x the memory's most).
std::string ceilings_problem(const Ceilings& c, DeviceKind kind);

// The cached ceilings when the file holds valid ones that are not stale; else nullopt, with why in
// `why_not` ("" for a missing file).
std::optional<CachedCeilings> read_ceilings(const std::string& path, DeviceKind kind, std::string* why_not = nullptr);
// Throws std::runtime_error when the file cannot be written.
void write_ceilings(const std::string& path, const CachedCeilings& c);
// Marks the cache at `path` stale (appends the reason): the next run measures again. Throws when it cannot.
void mark_ceilings_stale(const std::string& path, const std::string& reason);

std::string serialize_ceilings(const CachedCeilings& c);
std::optional<CachedCeilings> parse_ceilings(const std::string& text, DeviceKind kind, std::string* why_not = nullptr);

// Ceilings measured in rounds until they settle: `rounds` so far, the settled ceilings (each figure the
// best round's) once every figure's best round is matched within `tolerance` by another round, else
// nullopt with the figure that has not settled in `unsettled` ("fp32: 57.5 G to 201 GFLOP/s"). Load on
// the machine only slows a round, so the best round is the device if another comes near it. Within
// kCeilingsSettle (25%) they are trusted; after kCeilingsMaxRounds, within kCeilingsUsable (50%) they
// are kept with a note (a result that beats them marks them stale); beyond that the machine is too busy
// to measure.
// On a 2-core machine shared with five compilers, memory bandwidth rounds varied 1.7x.
inline constexpr double kCeilingsSettle = 0.25;
inline constexpr double kCeilingsUsable = 0.50;
inline constexpr int kCeilingsMaxRounds = 6;
std::optional<Ceilings> settled_ceilings(const std::vector<Ceilings>& rounds, double tolerance = kCeilingsSettle,
                                         std::string* unsettled = nullptr);

}  // namespace roofbench
