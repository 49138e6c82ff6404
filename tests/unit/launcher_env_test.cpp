// The launcher's environment: each launcher's variables, the rendezvous address, partial or inconsistent
// variables (a one-line usage error naming the variable) and the precedence when several launchers' are set.
#include "launcher_env.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "options.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const Environment kTorchrun{{"WORLD_SIZE", "8"},        {"RANK", "5"},           {"LOCAL_RANK", "1"},
                            {"LOCAL_WORLD_SIZE", "4"},  {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"}};
const Environment kSlurm{{"SLURM_STEP_ID", "0"},       {"SLURM_PROCID", "3"},   {"SLURM_STEP_NUM_TASKS", "4"},
                         {"SLURM_LOCALID", "1"},       {"SLURM_NTASKS", "16"},  {"SLURM_JOB_ID", "123456"},
                         {"SLURM_STEP_NODELIST", "gpu[003-004]"}, {"SLURM_NODELIST", "gpu[001-008]"}};
const Environment kOpenMpi{{"OMPI_COMM_WORLD_RANK", "2"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};

Environment with(Environment env, const std::string& name, const std::string& value) {
  env[name] = value;
  return env;
}

Environment without(Environment env, const std::string& name) {
  env.erase(name);
  return env;
}

// The usage error's message for `env` (empty when it parses).
std::string error_of(const Environment& env) {
  try {
    detect_launcher(env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// One line with every field: "torchrun rank 5/8 local 1/4 at node7:29400" ("local 1/?" without a local count).
std::string describe(const LauncherEnv& r) {
  std::string local_world = r.local_world_size ? std::to_string(*r.local_world_size) : "?";
  return std::string(launcher_name(r.launcher)) + " rank " + std::to_string(r.rank) + "/" +
         std::to_string(r.world_size) + " local " + std::to_string(r.local_rank) + "/" + local_world + " at " +
         r.rendezvous_host + ":" + std::to_string(r.rendezvous_port);
}

TEST(LauncherEnv, NoLauncherIsOneRank) {
  EXPECT_EQ(describe(detect_launcher({{"PATH", "/usr/bin"}, {"MASTER_ADDR", "x"}})), "none rank 0/1 local 0/1 at :0");
}

TEST(LauncherEnv, Torchrun) {
  EXPECT_EQ(describe(detect_launcher(kTorchrun)), "torchrun rank 5/8 local 1/4 at node7:29400");
}

TEST(LauncherEnv, TorchrunPartialNamesTheMissingVariable) {
  for (const char* name : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    std::string message = error_of(without(kTorchrun, name));
    EXPECT_THAT(message, StartsWith(std::string(name) + ": not set")) << name;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

TEST(LauncherEnv, InconsistentNumbersNameTheVariable) {
  EXPECT_THAT(error_of(with(kTorchrun, "RANK", "8")), StartsWith("RANK: RANK (8) is not below WORLD_SIZE (8)"));
  EXPECT_THAT(error_of(with(kTorchrun, "LOCAL_RANK", "4")), StartsWith("LOCAL_RANK: LOCAL_RANK (4) is not below"));
  EXPECT_THAT(error_of(with(kTorchrun, "WORLD_SIZE", "0")), StartsWith("WORLD_SIZE: must be at least 1"));
  EXPECT_THAT(error_of(with(kTorchrun, "LOCAL_WORLD_SIZE", "9")), StartsWith("LOCAL_WORLD_SIZE: must be from 1"));
  EXPECT_THAT(error_of(with(kTorchrun, "RANK", "two")), StartsWith("RANK: 'two' is not a whole number"));
  EXPECT_THAT(error_of(with(kTorchrun, "RANK", "-1")), StartsWith("RANK: '-1' is not a whole number"));
  EXPECT_THAT(error_of(with(kTorchrun, "RANK", "")), StartsWith("RANK: '' is not a whole number"));
  EXPECT_THAT(error_of(with(kTorchrun, "MASTER_PORT", "70000")), StartsWith("MASTER_PORT: '70000' is not"));
  EXPECT_THAT(error_of(with(kTorchrun, "MASTER_PORT", "0")), StartsWith("MASTER_PORT: must be from 1 to 65535"));
  EXPECT_THAT(error_of(with(kOpenMpi, "OMPI_COMM_WORLD_RANK", "4")), StartsWith("OMPI_COMM_WORLD_RANK: "));
  EXPECT_THAT(error_of(with(kSlurm, "SLURM_LOCALID", "x")), StartsWith("SLURM_LOCALID: 'x' is not"));
}

TEST(LauncherEnv, SlurmStep) {
  // The step's tasks (SLURM_STEP_NUM_TASKS), not the allocation's; the port from the job id.
  EXPECT_EQ(describe(detect_launcher(kSlurm)),
            "Slurm rank 3/4 local 1/? at gpu003:" + std::to_string(20000 + 123456 % 20000));
  EXPECT_EQ(detect_launcher(with(kSlurm, "SLURM_NTASKS_PER_NODE", "2")).local_world_size, 2);
}

TEST(LauncherEnv, SlurmRendezvousAddress) {
  EXPECT_EQ(detect_launcher(without(kSlurm, "SLURM_STEP_NODELIST")).rendezvous_host, "gpu001");
  Environment named = with(with(kSlurm, "MASTER_ADDR", "10.0.0.1"), "MASTER_PORT", "31000");
  EXPECT_EQ(detect_launcher(named).rendezvous_host, "10.0.0.1");
  EXPECT_EQ(detect_launcher(named).rendezvous_port, 31000);
  EXPECT_EQ(detect_launcher(without(kSlurm, "SLURM_JOB_ID")).rendezvous_port, kDefaultRendezvousPort);
  Environment no_list = without(without(kSlurm, "SLURM_STEP_NODELIST"), "SLURM_NODELIST");
  EXPECT_THAT(error_of(no_list), StartsWith("SLURM_STEP_NODELIST: not set, nor SLURM_NODELIST"));
  EXPECT_THAT(error_of(with(kSlurm, "SLURM_STEP_NODELIST", "gpu[1-2")), StartsWith("SLURM_STEP_NODELIST: 'gpu[1-2'"));
  EXPECT_THAT(error_of(without(kSlurm, "SLURM_STEP_NUM_TASKS")), StartsWith("SLURM_STEP_NUM_TASKS: not set"));
}

TEST(LauncherEnv, SlurmBatchShellIsNoLauncher) {
  // sbatch's script has SLURM_PROCID but runs outside any srun step.
  EXPECT_EQ(detect_launcher(without(kSlurm, "SLURM_STEP_ID")).launcher, Launcher::none);
}

TEST(LauncherEnv, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("gpu[003-004,9],login"), "gpu003");
  EXPECT_EQ(first_slurm_host("alpha,beta"), "alpha");
  EXPECT_EQ(first_slurm_host("single"), "single");
  EXPECT_EQ(first_slurm_host("rack[2-3]-node[07,9]"), "rack2-node07");
  EXPECT_THROW(first_slurm_host(""), UsageError);
  EXPECT_THAT(error_of(with(without(kSlurm, "SLURM_STEP_NODELIST"), "SLURM_NODELIST", ",x")),
              StartsWith("SLURM_NODELIST: ',x' names no host"));
}

TEST(LauncherEnv, OpenMpiOnOneHost) {
  EXPECT_EQ(describe(detect_launcher(kOpenMpi)), "Open MPI rank 2/4 local 2/4 at 127.0.0.1:29500");
}

TEST(LauncherEnv, OpenMpiAcrossHostsNeedsMasterAddr) {
  Environment two_hosts = with(with(kOpenMpi, "OMPI_COMM_WORLD_SIZE", "8"), "OMPI_COMM_WORLD_LOCAL_SIZE", "4");
  EXPECT_THAT(error_of(two_hosts), AllOf(StartsWith("MASTER_ADDR: not set"), HasSubstr("mpirun -x MASTER_ADDR")));
  EXPECT_EQ(detect_launcher(with(two_hosts, "MASTER_ADDR", "head")).rendezvous_host, "head");
  EXPECT_THAT(error_of(without(kOpenMpi, "OMPI_COMM_WORLD_LOCAL_SIZE")),
              StartsWith("OMPI_COMM_WORLD_LOCAL_SIZE: not set"));
}

TEST(LauncherEnv, TorchrunComesFirstThenOpenMpiThenSlurm) {
  Environment all = kSlurm;
  all.insert(kOpenMpi.begin(), kOpenMpi.end());
  EXPECT_EQ(detect_launcher(all).launcher, Launcher::open_mpi);
  all.insert(kTorchrun.begin(), kTorchrun.end());
  EXPECT_EQ(detect_launcher(all).launcher, Launcher::torchrun);
  EXPECT_EQ(detect_launcher(all).rank, 5);
}

TEST(LauncherEnv, ProcessEnvironmentHoldsTheVariables) {
  Environment env = process_environment();
  ASSERT_TRUE(env.count("PATH"));
  EXPECT_EQ(env["PATH"], ::getenv("PATH"));
}

TEST(LauncherEnv, Names) {
  EXPECT_EQ(launcher_name(Launcher::none), "none");
  EXPECT_EQ(launcher_name(Launcher::torchrun), "torchrun");
  EXPECT_EQ(launcher_name(Launcher::open_mpi), "Open MPI");
  EXPECT_EQ(launcher_name(Launcher::slurm), "Slurm");
}

TEST(LauncherEnv, TorchrunsAgentStoreKeepsItsPortAndTheRendezvousTakesTheNext) {
  EXPECT_EQ(detect_launcher(with(kTorchrun, "TORCHELASTIC_USE_AGENT_STORE", "True")).rendezvous_port, 29401);
  EXPECT_EQ(detect_launcher(with(kTorchrun, "TORCHELASTIC_USE_AGENT_STORE", "False")).rendezvous_port, 29400);
  EXPECT_THAT(error_of(with(with(kTorchrun, "TORCHELASTIC_USE_AGENT_STORE", "True"), "MASTER_PORT", "65535")),
              StartsWith("MASTER_PORT: "));
}

TEST(LauncherEnv, RoofbenchsOwnPortOverridesTheLaunchers) {
  EXPECT_EQ(detect_launcher(with(kTorchrun, "ROOFBENCH_RENDEZVOUS_PORT", "31000")).rendezvous_port, 31000);
  EXPECT_EQ(detect_launcher(with(kSlurm, "ROOFBENCH_RENDEZVOUS_PORT", "31000")).rendezvous_port, 31000);
  EXPECT_THAT(error_of(with(kOpenMpi, "ROOFBENCH_RENDEZVOUS_PORT", "0")), StartsWith("ROOFBENCH_RENDEZVOUS_PORT: "));
  EXPECT_EQ(detect_launcher({{"ROOFBENCH_RENDEZVOUS_PORT", "31000"}}).launcher, Launcher::none);
}

}  // namespace
}  // namespace roofbench
