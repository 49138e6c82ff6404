// Which rank this process is when a launcher started it: torchrun, Slurm's srun or Open MPI's mpirun each
// describe the job in environment variables; this reads them into one shape: the host's rank mode
// (rank_mode.hpp) runs one process per GPU from it.
//
// Precedence when several launchers' variables are present: torchrun, then Open MPI, then Slurm. A launcher
// started inside another's allocation sets its own variables for the processes it starts, while the outer
// one's describe the job step that started the launcher (torchrun under srun, mpirun inside an sbatch script).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace roofbench {

using Environment = std::map<std::string, std::string, std::less<>>;

enum class Launcher { none, torchrun, open_mpi, slurm };

// "none", "torchrun", "Open MPI", "Slurm".
std::string_view launcher_name(Launcher launcher);

struct LauncherEnv {
  Launcher launcher = Launcher::none;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;                   // the rank among the processes of this host: it picks the GPU
  std::optional<int> local_world_size = 1;  // absent when the launcher does not say (Slurm without a per-node count)
  std::string rendezvous_host;          // rank 0's host, where it listens; empty for one rank without a launcher
  int rendezvous_port = 0;
};

// Port of the rendezvous when the launcher names none: torchrun's default. Under torchrun whose agent holds
// MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True) the port after it; ROOFBENCH_RENDEZVOUS_PORT, when set,
// overrides every launcher's.
inline constexpr int kDefaultRendezvousPort = 29500;

// The process's environment as a map.
Environment process_environment();

// Reads the launcher's variables. No launcher: one rank (rank 0 of 1). Throws UsageError (exit code 2) with a
// one-line message naming the variable and the cause for a partial or inconsistent set.
LauncherEnv detect_launcher(const Environment& env);

// The first host of a Slurm host list: "gpu[003-004,9],login" -> "gpu003". Throws UsageError naming `variable`
// on a malformed list.
std::string first_slurm_host(std::string_view list, std::string_view variable = "SLURM_STEP_NODELIST");

}  // namespace roofbench
