"""roofbench as several processes on one machine, started the way torchrun starts them (WORLD_SIZE, RANK,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT on 127.0.0.1 and a free port), on the CPU: one results file from rank 0
with the slowest rank's time and the spread, a case whose ranks exchange through the rendezvous, a rank
whose gate fails, a rank that dies mid-run, a case not applicable on one rank, a rank that measures its ceilings
while the others wait (or dies meanwhile), flags refused under a launcher and ranks given different selections.

Environment: ROOFBENCH (the executable), RANKS_PLUGIN_DIR (the `ranks` test plugin's folder),
ROOFBENCH_CACHE_DIR (the calibrated CPU ceilings)."""
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ROOFBENCH = os.environ["ROOFBENCH"]
PLUGIN_DIR = os.environ["RANKS_PLUGIN_DIR"]
RUN_LIMIT_S = 90


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks:
    """N roofbench processes of one run; each rank's arguments may differ (extra[rank])."""

    def __init__(self, n, args, results_dir, env=None, extra=None, device=("--device", "cpu"), limit_s=RUN_LIMIT_S,
                 meanwhile=None):
        """`meanwhile(procs)`, where given, runs once every rank has started, before their ends are awaited."""
        port = free_port()
        self.procs = []
        self.started = time.monotonic()
        for rank in range(n):
            rank_env = dict(os.environ, WORLD_SIZE=str(n), RANK=str(rank), LOCAL_RANK=str(rank),
                            LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            rank_env.pop("ROOFBENCH_PLUGIN_PATH", None)
            rank_env.update(env or {})
            argv = [ROOFBENCH, *device, "--plugin-dir", PLUGIN_DIR, "--results-dir", results_dir,
                    "--max-time", "0.05", "--rendezvous-timeout", "20"] + args + (extra or {}).get(rank, [])
            self.procs.append(subprocess.Popen(argv, env=rank_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               text=True))
        if meanwhile:
            meanwhile(self.procs)
        self.out = []
        for p in self.procs:
            out, err = p.communicate(timeout=limit_s)
            self.out.append((p.returncode, out, err))
        self.seconds = time.monotonic() - self.started

    def codes(self):
        return [code for code, _, _ in self.out]

    def describe(self):
        return "\n".join(f"--- rank {r}: exit {c}\nstdout:\n{o}\nstderr:\n{e}" for r, (c, o, e) in enumerate(self.out))


def gpus_here():
    """How many NVIDIA GPUs nvidia-smi lists (0 without a driver)."""
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in listing.stdout.splitlines()) if listing.returncode == 0 else 0


def results_files(folder):
    return [f for f in glob.glob(os.path.join(folder, "*.json")) if not f.endswith("latest.json")]


def entries(folder):
    with open(os.path.join(folder, "latest.json")) as f:
        return {b["name"]: b for b in json.load(f)["benchmarks"]}


class RanksTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.results = os.path.join(self.tmp.name, "results")

    def tearDown(self):
        self.tmp.cleanup()

    def check_one_results_file(self, n):
        run = Ranks(n, ["--benchmark_filter=^ranks/(sum|scale)/"], self.results)
        self.assertEqual(run.codes(), [0] * n, run.describe())
        self.assertEqual(len(results_files(self.results)), 1, run.describe())
        found = entries(self.results)
        self.assertEqual(sorted(found), ["ranks/scale/n:1024", "ranks/sum/n:1024"], run.describe())
        for name, entry in found.items():
            ranks = entry["roofbench"]["ranks"]
            self.assertEqual([k["rank"] for k in ranks], list(range(n)), name)
            times = [k["time_median"] for k in ranks]
            self.assertEqual(entry["time_median"], max(times), name)
            self.assertEqual(entry["slowest_rank"], times.index(max(times)), name)
            # The file keeps 9 significant digits of each time: the spread from them agrees to about 1e-6 %.
            self.assertAlmostEqual(entry["rank_spread_pct"], 100 * (max(times) - min(times)) / min(times), delta=1e-4)
            self.assertEqual(entry["roofbench"]["gate"], "pass", name)
        self.assertEqual(found["ranks/sum/n:1024"]["roofbench"]["status"], "ok")
        for code, out, err in run.out[1:]:
            self.assertEqual(out, "", run.describe())  # only rank 0 prints the table
            for line in err.splitlines():
                self.assertTrue(line.startswith("[rank "), run.describe())
        self.assertIn("ranks/sum/n:1024", run.out[0][1])

    def test_a_launcher_of_one_rank_takes_the_ranks_path(self):
        run = Ranks(1, ["--benchmark_filter=^ranks/scale/"], self.results)
        self.assertEqual(run.codes(), [0], run.describe())
        entry = entries(self.results)["ranks/scale/n:1024"]
        self.assertEqual([k["rank"] for k in entry["roofbench"]["ranks"]], [0], run.describe())
        with open(os.path.join(self.results, "latest.json")) as f:
            ranks = json.load(f)["context"]["roofbench"]["ranks"]
        self.assertEqual((ranks["launcher"], ranks["world_size"]), ("torchrun", 1))

    def test_two_ranks_write_one_results_file_with_the_slowest_time(self):
        self.check_one_results_file(2)

    def test_four_ranks_write_one_results_file_with_the_slowest_time(self):
        self.check_one_results_file(4)

    def test_a_gate_that_fails_on_one_rank_fails_the_benchmark_naming_it(self):
        run = Ranks(2, ["--benchmark_filter=^ranks/(sum|scale)/"], self.results, env={"ROOFBENCH_TEST_FAIL_RANK": "1"})
        self.assertEqual(run.codes(), [1, 1], run.describe())
        found = entries(self.results)
        for name in ("ranks/sum/n:1024", "ranks/scale/n:1024"):
            self.assertEqual(found[name]["roofbench"]["status"], "gate_failed", run.describe())
            self.assertIn("rank 1: ", found[name]["error_message"], run.describe())
        self.assertIn("rank 1: ", run.out[0][1] + run.out[0][2])

    def test_a_rank_whose_worker_crashes_fails_the_benchmark_naming_it_and_the_run_goes_on(self):
        run = Ranks(2, ["--benchmark_filter=^ranks/(sum|scale)/"], self.results, env={"ROOFBENCH_TEST_CRASH_RANK": "1"})
        self.assertEqual(run.codes(), [1, 1], run.describe())
        found = entries(self.results)
        self.assertEqual(found["ranks/sum/n:1024"]["roofbench"]["status"], "crashed", run.describe())
        self.assertIn("rank 1: ", found["ranks/sum/n:1024"]["error_message"], run.describe())
        self.assertEqual(found["ranks/scale/n:1024"]["roofbench"]["status"], "ok", run.describe())

    def test_a_rank_that_dies_ends_the_others_and_keeps_what_was_measured(self):
        run = Ranks(4, ["--benchmark_filter=^ranks/(scale|nap)/"], self.results, env={"ROOFBENCH_TEST_KILL_RANK": "2"})
        codes = run.codes()
        self.assertEqual(codes[0:2] + codes[3:], [1, 1, 1], run.describe())
        self.assertNotEqual(codes[2], 0, run.describe())
        self.assertLess(run.seconds, 20 + 30, run.describe())
        found = entries(self.results)
        self.assertEqual(found["ranks/scale/n:1024"]["roofbench"]["status"], "ok", run.describe())
        self.assertEqual(found["ranks/nap/n:1024"]["roofbench"]["status"], "error", run.describe())
        self.assertIn("rank 2", found["ranks/nap/n:1024"]["error_message"], run.describe())

    def test_a_figure_impossible_on_one_rank_fails_the_benchmark_on_every_rank(self):
        # Rank 1 judges its own figures against its own ceilings and marks them stale (a copy of the cache).
        cache = os.path.join(self.tmp.name, "cache")
        shutil.copytree(os.environ["ROOFBENCH_CACHE_DIR"], cache)
        run = Ranks(2, ["--benchmark_filter=^ranks/(scale|sum)/"], self.results,
                    env={"ROOFBENCH_TEST_IMPLAUSIBLE_RANK": "1", "ROOFBENCH_CACHE_DIR": cache})
        self.assertEqual(run.codes(), [1, 1], run.describe())
        found = entries(self.results)
        scale = found["ranks/scale/n:1024"]
        self.assertEqual(scale["roofbench"]["status"], "implausible", run.describe())
        self.assertIn("rank 1: FLOP/s", scale["error_message"], run.describe())
        self.assertEqual([k["status"] for k in scale["roofbench"]["ranks"]], ["ok", "implausible"], run.describe())
        self.assertEqual(found["ranks/sum/n:1024"]["roofbench"]["status"], "ok", run.describe())
        self.assertIn("are marked stale", run.out[1][2], run.describe())

    def test_a_figure_impossible_on_one_rank_of_a_collective_stops_no_other_rank(self):
        # Rank 1's stall is implausible once measured in full: rank 0, still in its teardown, is not stopped.
        cache = os.path.join(self.tmp.name, "cache")
        shutil.copytree(os.environ["ROOFBENCH_CACHE_DIR"], cache)
        run = Ranks(3, ["--benchmark_filter=^ranks/stall/"], self.results,
                    env={"ROOFBENCH_TEST_IMPLAUSIBLE_RANK": "1", "ROOFBENCH_TEST_SLOW_TEARDOWN_RANK": "0",
                         "ROOFBENCH_CACHE_DIR": cache})
        self.assertEqual(run.codes(), [1, 1, 1], run.describe())
        stall = entries(self.results)["ranks/stall/n:1024"]
        self.assertEqual(stall["roofbench"]["status"], "implausible", run.describe())
        self.assertIn("rank 1: FLOP/s", stall["error_message"], run.describe())
        self.assertEqual([k["status"] for k in stall["roofbench"]["ranks"]], ["ok", "implausible", "ok"], run.describe())

    def stalled(self, switch, rank):
        """Three ranks of `stall` (and scale before it), one stopped mid-timing while the others wait for it."""
        run = Ranks(3, ["--benchmark_filter=^ranks/(scale|stall)/", "--timeout", "60"], self.results,
                    env={switch: str(rank)})
        self.assertLess(run.seconds, 30, "the others waited for the benchmark's timeout\n" + run.describe())
        found = entries(self.results)
        self.assertEqual(found["ranks/scale/n:1024"]["roofbench"]["status"], "ok", run.describe())
        self.assertEqual(found["ranks/stall/n:1024"]["roofbench"]["status"], "error", run.describe())
        return run, found["ranks/stall/n:1024"]["error_message"]

    def test_a_rank_that_fails_mid_timing_ends_the_others_at_once_naming_it(self):
        run, message = self.stalled("ROOFBENCH_TEST_THROW_RANK", 1)
        self.assertEqual(run.codes(), [1, 1, 1], run.describe())
        self.assertIn("rank 1: ", message, run.describe())
        self.assertIn("this rank failed mid-timing", message, run.describe())

    def test_a_rank_that_dies_mid_timing_ends_the_others_at_once_naming_it(self):
        run, message = self.stalled("ROOFBENCH_TEST_DIE_RANK", 2)
        codes = run.codes()
        self.assertEqual(codes[0:2], [1, 1], run.describe())
        self.assertNotEqual(codes[2], 0, run.describe())
        self.assertIn("rank 2 closed its connection", message, run.describe())

    def test_a_case_not_applicable_on_one_rank_is_not_applicable_on_every_rank_and_stops_no_worker(self):
        run = Ranks(3, ["--benchmark_filter=^ranks/fits/"], self.results, env={"ROOFBENCH_TEST_NOT_APPLICABLE_RANK": "1"})
        self.assertEqual(run.codes(), [0, 0, 0], run.describe())
        with open(os.path.join(self.results, "latest.json")) as f:
            listed = json.load(f)
        not_run = {n["case"]: n["reason"] for n in listed["context"]["roofbench"]["not_run"]}
        self.assertEqual(not_run.get("ranks/fits/n:2048"), "rank 1: n:2048 does not apply to this rank's device",
                         run.describe())
        found = entries(self.results)
        self.assertEqual(sorted(found), ["ranks/fits/n:1024", "ranks/fits/n:4096"], run.describe())
        # Every rank's worker measured the benchmark after it too: none was stopped or started again.
        pids = [json.dumps(found[name]).split('"worker_pids": "')[1].split('"')[0] for name in sorted(found)]
        self.assertEqual(pids[0], pids[1], run.describe())
        self.assertNotIn("stopped", "".join(err for _, _, err in run.out), run.describe())

    def test_a_rank_that_measures_its_ceilings_keeps_the_others_waiting_past_the_rendezvous_timeout(self):
        # Rank 1 measures its CPU's ceilings (some 20 s here) before the first benchmark; the others wait for it,
        # however short the rendezvous timeout (a copy of the cache: rank 1 writes what it measured).
        cache = os.path.join(self.tmp.name, "cache")
        shutil.copytree(os.environ["ROOFBENCH_CACHE_DIR"], cache)
        run = Ranks(2, ["--benchmark_filter=^ranks/(scale|sum)/", "--rendezvous-timeout", "2"], self.results,
                    env={"ROOFBENCH_CACHE_DIR": cache}, extra={1: ["--recalibrate"]}, limit_s=300)
        self.assertEqual(run.codes(), [0, 0], run.describe())
        self.assertIn("measuring the ceilings", run.out[1][2], run.describe())
        self.assertGreater(run.seconds, 2, run.describe())
        for entry in entries(self.results).values():
            self.assertEqual(entry["roofbench"]["status"], "ok", run.describe())

    def test_a_rank_that_dies_while_it_measures_its_ceilings_ends_the_others_at_once(self):
        # Rank 1 is killed while it measures its CPU's ceilings (some 20 s here). Rank 0 would wait for its
        # measuring up to 1800 s beyond the rendezvous timeout; it sees rank 1's connection close and ends at once.
        cache = os.path.join(self.tmp.name, "cache")
        shutil.copytree(os.environ["ROOFBENCH_CACHE_DIR"], cache)
        killed = {}

        def kill_rank_1_while_it_measures(procs):
            for line in procs[1].stderr:
                if "measuring the ceilings" in line:
                    break
            procs[1].kill()
            killed["at"] = time.monotonic()

        run = Ranks(2, ["--benchmark_filter=^ranks/(scale|sum)/", "--rendezvous-timeout", "60"], self.results,
                    env={"ROOFBENCH_CACHE_DIR": cache}, extra={1: ["--recalibrate"]}, limit_s=300,
                    meanwhile=kill_rank_1_while_it_measures)
        self.assertEqual(run.codes()[0], 1, run.describe())
        self.assertLess(time.monotonic() - killed["at"], 15, run.describe())
        self.assertIn("rank 1 closed its connection (it ended or crashed) during a barrier", run.out[0][2], run.describe())
        self.assertEqual(results_files(self.results), [], run.describe())

    def check_refused(self, flag, words):
        """Two ranks given `flag` both exit with 2, rank 0 saying `words`, and keep no results."""
        run = Ranks(2, ["--benchmark_filter=^ranks/scale/", flag], self.results)
        self.assertEqual(run.codes(), [2, 2], run.describe())
        self.assertIn(words, run.out[0][2], run.describe())
        self.assertEqual(results_files(self.results), [])

    def test_no_isolation_is_refused_on_every_rank(self):
        self.check_refused("--isolation=none", "--isolation=none: under torchrun each rank measures in a worker process")

    def test_random_interleaving_is_refused_on_every_rank(self):
        self.check_refused("--benchmark_enable_random_interleaving=true", "every rank runs the benchmarks in one order")

    def test_a_warm_up_of_google_benchmark_is_refused_on_every_rank(self):
        # Rank 0's Google Benchmark would call each benchmark again until the warm-up's seconds add up.
        self.check_refused("--benchmark_min_warmup_time=0.5",
                           "--benchmark_min_warmup_time: under torchrun every rank runs each benchmark once")

    def test_ranks_that_select_different_benchmarks_exit_2(self):
        run = Ranks(2, [], self.results, extra={0: ["--benchmark_filter=^ranks/(sum|scale)/"],
                                                 1: ["--benchmark_filter=^ranks/scale/"]})
        self.assertEqual(run.codes(), [2, 2], run.describe())
        self.assertIn("rank 1 selected other benchmarks than rank 0", run.out[0][2], run.describe())
        self.assertEqual(results_files(self.results), [])


class OneRankOnAGpuTest(unittest.TestCase):
    """A launcher's world of one rank on one GPU measures what the plain run measures (within noise): the ranks
    path adds nothing to the timed span."""

    def setUp(self):
        if gpus_here() < 1:
            self.skipTest("needs a GPU")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_one_rank_through_the_launcher_times_what_the_plain_run_times(self):
        select = ["--benchmark_filter=^nccl/allreduce_fp32/bytes:1073741824/inplace:0/", "--max-time", "1"]
        plain_dir, launched_dir = (os.path.join(self.tmp.name, d) for d in ("plain", "launched"))
        env = dict(os.environ, NCCL_NVLS_ENABLE="0")
        env.pop("ROOFBENCH_PLUGIN_PATH", None)
        plain = subprocess.run([ROOFBENCH, "--plugin-dir", PLUGIN_DIR, "--results-dir", plain_dir, *select], env=env,
                               capture_output=True, text=True, timeout=300)
        self.assertEqual(plain.returncode, 0, plain.stdout + plain.stderr)
        launched = Ranks(1, select, launched_dir, env={"NCCL_NVLS_ENABLE": "0"}, device=(), limit_s=300)
        self.assertEqual(launched.codes(), [0], launched.describe())
        (name, alone), = entries(plain_dir).items()
        ranked = entries(launched_dir)[name]
        self.assertEqual([k["rank"] for k in ranked["roofbench"]["ranks"]], [0])
        for entry in (alone, ranked):
            self.assertEqual(entry["roofbench"]["status"], "ok", name)
        # Within three times the two runs' noise, and never further apart than 5%.
        bound = min(0.05, max(0.01, 3 * (alone["noise"] + ranked["noise"])))
        difference = abs(ranked["time_median"] - alone["time_median"]) / alone["time_median"]
        figures = (f"plain {alone['time_median']:.6g} s (noise {alone['noise']:.2%}), one rank "
                   f"{ranked['time_median']:.6g} s (noise {ranked['noise']:.2%}): {difference:.2%} apart, bound {bound:.2%}")
        print("\n" + name + ": " + figures, file=sys.stderr)
        self.assertLess(difference, bound, figures)


class RanksOnGpusTest(unittest.TestCase):
    """One roofbench per GPU (a CUDA build on a host of 2 or more GPUs; skipped elsewhere): NCCL's clique and
    R5 across processes, through ncclCommInitRank and the unique id rank 0 broadcasts."""

    def setUp(self):
        self.gpus = gpus_here()
        if self.gpus < 2:
            self.skipTest("needs 2 or more GPUs; %d here" % self.gpus)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.results = os.path.join(self.tmp.name, "results")

    def test_an_all_reduce_across_processes_passes_its_gate_on_every_rank(self):
        n = min(self.gpus, 4)
        run = Ranks(n, ["--benchmark_filter=^nccl/allreduce_fp32/bytes:1048576/inplace:(0|1)/"], self.results,
                    env={"NCCL_NVLS_ENABLE": "0"}, device=(), limit_s=300)
        self.assertEqual(run.codes(), [0] * n, run.describe())
        for name, entry in entries(self.results).items():
            self.assertEqual(entry["roofbench"]["status"], "ok", name)
            self.assertEqual(entry["ranks"], n, name)  # the clique's ranks, every process's
            self.assertEqual([k["device"] for k in entry["roofbench"]["ranks"]], ["cuda:%d" % r for r in range(n)])

    def test_data_parallel_training_across_processes_keeps_the_replicas_identical(self):
        run = Ranks(2, ["--benchmark_filter=^gpt/R5_data_parallel/", "--max-time", "1"], self.results,
                    env={"NCCL_NVLS_ENABLE": "0"}, device=(), limit_s=600)
        self.assertEqual(run.codes(), [0, 0], run.describe())
        entry = entries(self.results)["gpt/R5_data_parallel"]
        self.assertEqual(entry["roofbench"]["status"], "ok", run.describe())
        self.assertEqual(entry["ranks"], 2)
        self.assertEqual(entry["replica_max_abs_difference"], 0)
        self.assertEqual(entry["ring_edges_across_hosts"], 0)  # both on this host


if __name__ == "__main__":
    unittest.main()
