#include "launcher_env.hpp"

#include <unistd.h>

#include <charconv>

#include "options.hpp"

extern char** environ;

namespace roofbench {
namespace {

// Each launcher's variables for the rank, the world size, the local rank and the local world size.
struct LauncherVariables {
  Launcher launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;  // optional for Slurm
};

constexpr LauncherVariables kTorchrun{Launcher::torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr LauncherVariables kOpenMpi{Launcher::open_mpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
// SLURM_STEP_NUM_TASKS is the size of this srun step (SLURM_NTASKS is the allocation's); SLURM_NTASKS_PER_NODE
// is set only when the job asked for a count per node.
constexpr LauncherVariables kSlurm{Launcher::slurm, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
                                   "SLURM_NTASKS_PER_NODE"};

[[noreturn]] void fail(std::string_view variable, const std::string& cause) {
  throw UsageError(std::string(variable) + ": " + cause);
}

const std::string* find(const Environment& env, std::string_view name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// A whole non-negative decimal number no larger than `max`.
int parse_count(const Environment& env, std::string_view name, std::string_view launcher, int max = 1 << 24) {
  const std::string* text = find(env, name);
  if (!text) fail(name, "not set, but other variables of " + std::string(launcher) + " are");
  int value = -1;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (text->empty() || error != std::errc() || end != text->data() + text->size() || value < 0 || value > max)
    fail(name, "'" + *text + "' is not a whole number from 0 to " + std::to_string(max));
  return value;
}

bool any_set(const Environment& env, const LauncherVariables& v) {
  return find(env, v.rank) || find(env, v.world_size) || find(env, v.local_rank) ||
         (v.launcher != Launcher::slurm && find(env, v.local_world_size));
}

void check_ranks(const LauncherVariables& v, const LauncherEnv& out) {
  auto pair = [](const char* a, int x, const char* b, int y) {
    return std::string(a) + " (" + std::to_string(x) + ") is not below " + b + " (" + std::to_string(y) + ")";
  };
  if (out.world_size < 1) fail(v.world_size, "must be at least 1");
  if (out.rank >= out.world_size) fail(v.rank, pair(v.rank, out.rank, v.world_size, out.world_size));
  if (!out.local_world_size) return;
  if (*out.local_world_size < 1 || *out.local_world_size > out.world_size)
    fail(v.local_world_size, "must be from 1 to " + std::string(v.world_size) + " (" +
                                 std::to_string(out.world_size) + ")");
  if (out.local_rank >= *out.local_world_size)
    fail(v.local_rank, pair(v.local_rank, out.local_rank, v.local_world_size, *out.local_world_size));
}

LauncherEnv read_ranks(const Environment& env, const LauncherVariables& v) {
  const std::string name(launcher_name(v.launcher));
  LauncherEnv out;
  out.launcher = v.launcher;
  out.rank = parse_count(env, v.rank, name);
  out.world_size = parse_count(env, v.world_size, name);
  out.local_rank = parse_count(env, v.local_rank, name);
  out.local_world_size.reset();
  if (v.launcher != Launcher::slurm || find(env, v.local_world_size))
    out.local_world_size = parse_count(env, v.local_world_size, name);
  check_ranks(v, out);
  return out;
}

void read_port(const Environment& env, LauncherEnv& out, int fallback) {
  if (!find(env, "MASTER_PORT")) {
    out.rendezvous_port = fallback;
    return;
  }
  out.rendezvous_port = parse_count(env, "MASTER_PORT", launcher_name(out.launcher), 65535);
  if (out.rendezvous_port == 0) fail("MASTER_PORT", "must be from 1 to 65535");
}

// torchrun always sets MASTER_ADDR and MASTER_PORT. Where its agent keeps its own store on that port
// (TORCHELASTIC_USE_AGENT_STORE=True, torchrun's default rendezvous), roofbench's meets on the next one.
void torchrun_rendezvous(const Environment& env, LauncherEnv& out) {
  const std::string* host = find(env, "MASTER_ADDR");
  if (!host || host->empty()) fail("MASTER_ADDR", "not set, but other variables of torchrun are");
  if (!find(env, "MASTER_PORT")) fail("MASTER_PORT", "not set, but other variables of torchrun are");
  out.rendezvous_host = *host;
  read_port(env, out, kDefaultRendezvousPort);
  const std::string* agent_store = find(env, "TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store && (*agent_store == "True" || *agent_store == "1")) {
    if (out.rendezvous_port == 65535) fail("MASTER_PORT", "is 65535: torchrun's store holds it and no port follows");
    ++out.rendezvous_port;
  }
}

// ROOFBENCH_RENDEZVOUS_PORT, when set, is the port whatever the launcher says.
void port_override(const Environment& env, LauncherEnv& out) {
  if (out.launcher == Launcher::none || !find(env, "ROOFBENCH_RENDEZVOUS_PORT")) return;
  out.rendezvous_port = parse_count(env, "ROOFBENCH_RENDEZVOUS_PORT", "roofbench", 65535);
  if (out.rendezvous_port == 0) fail("ROOFBENCH_RENDEZVOUS_PORT", "must be from 1 to 65535");
}

// mpirun names no host of rank 0: MASTER_ADDR (passed with `mpirun -x MASTER_ADDR=...`) does, or this host
// when every rank runs on it.
void open_mpi_rendezvous(const Environment& env, LauncherEnv& out) {
  const std::string* host = find(env, "MASTER_ADDR");
  if (host && !host->empty()) out.rendezvous_host = *host;
  else if (out.local_world_size == out.world_size) out.rendezvous_host = "127.0.0.1";
  else fail("MASTER_ADDR", "not set, and Open MPI's ranks span hosts: pass `mpirun -x MASTER_ADDR=<rank 0's host>`");
  read_port(env, out, kDefaultRendezvousPort);
}

// Rank 0 runs on the step's first host (srun places ranks in host order). SLURM_LAUNCH_NODE_IPADDR is not used:
// it is the host srun ran on, often a login host that runs no rank. Without MASTER_PORT, the port comes from
// the job id so that two jobs sharing a host do not meet at one port.
void slurm_rendezvous(const Environment& env, LauncherEnv& out) {
  const std::string* host = find(env, "MASTER_ADDR");
  const char* list_name = find(env, "SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_NODELIST";
  const std::string* list = find(env, list_name);
  if (host && !host->empty()) out.rendezvous_host = *host;
  else if (list) out.rendezvous_host = first_slurm_host(*list, list_name);
  else fail("SLURM_STEP_NODELIST", "not set, nor SLURM_NODELIST nor MASTER_ADDR: no host for rank 0");
  int fallback = kDefaultRendezvousPort;
  if (find(env, "SLURM_JOB_ID")) fallback = 20000 + parse_count(env, "SLURM_JOB_ID", "Slurm", 1 << 30) % 20000;
  read_port(env, out, fallback);
}

}  // namespace

std::string_view launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::torchrun: return "torchrun";
    case Launcher::open_mpi: return "Open MPI";
    case Launcher::slurm: return "Slurm";
    case Launcher::none: break;
  }
  return "none";
}

Environment process_environment() {
  Environment env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view text(*entry);
    auto equals = text.find('=');
    if (equals != std::string_view::npos) env.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return env;
}

LauncherEnv detect_launcher(const Environment& env) {
  LauncherEnv out;
  if (any_set(env, kTorchrun)) {
    out = read_ranks(env, kTorchrun);
    torchrun_rendezvous(env, out);
  } else if (any_set(env, kOpenMpi)) {
    out = read_ranks(env, kOpenMpi);
    open_mpi_rendezvous(env, out);
  } else if (find(env, "SLURM_STEP_ID") && find(env, "SLURM_PROCID")) {
    // Only inside an srun step: a batch script's own shell has SLURM_PROCID=0 but no step of ranks.
    out = read_ranks(env, kSlurm);
    slurm_rendezvous(env, out);
  }
  port_override(env, out);
  return out;
}

std::string first_slurm_host(std::string_view list, std::string_view variable) {
  std::string host;
  for (size_t i = 0; i < list.size() && list[i] != ','; ++i) {
    if (list[i] != '[') {
      host += list[i];
      continue;
    }
    // A range set such as [003-004,9]: its first number, then on past the ']'.
    auto close = list.find(']', i);
    if (close == std::string_view::npos) fail(variable, "'" + std::string(list) + "' has a '[' without ']'");
    auto first = list.substr(i + 1, close - i - 1);
    host += first.substr(0, first.find_first_of(",-"));
    i = close;
  }
  if (host.empty()) fail(variable, "'" + std::string(list) + "' names no host");
  return host;
}

}  // namespace roofbench
