"""A results file of a run with one process per GPU (roofbench under torchrun, srun or mpirun) has, beside what
every file has, the figures slowest_rank and rank_spread_pct, each rank's own figures under roofbench.ranks of
an entry, and the launcher and the ranks' hosts under context.roofbench.ranks: the report, compare and the
history read such a file as any other."""
import copy
import unittest

from roofbench_reports.results import load_run_file

from .helpers import GPU_RUN, TemporaryFolder, load_fixture
from .test_compare import rows, run_compare
from .test_history import run_history
from .test_report import write_report


def ranked(document, ranks=4):
    """`document` as rank 0 of `ranks` processes writes it: each entry's time the slowest rank's."""
    result = copy.deepcopy(document)
    roofbench = result["context"]["roofbench"]
    roofbench["ranks"] = {"launcher": "torchrun", "world_size": ranks, "hosts": ["node1"] * (ranks // 2) + ["node2"] * (ranks - ranks // 2)}
    for entry in result["benchmarks"]:
        if entry.get("error_occurred") or "time_median" not in entry:
            continue
        slowest = entry["time_median"]
        times = [slowest * (1 - 0.01 * r) for r in range(ranks)]
        entry["slowest_rank"] = 0
        entry["rank_spread_pct"] = 100 * (max(times) - min(times)) / min(times)
        summaries = entry["roofbench"].setdefault("summaries", {})
        summaries["slowest_rank"] = {"unit": "rank", "description": "the slowest rank"}
        summaries["rank_spread_pct"] = {"unit": "%", "description": "the spread"}
        entry["roofbench"]["ranks"] = [
            {"rank": r, "host": roofbench["ranks"]["hosts"][r], "device": "cuda:%d" % (r % 2), "status": "ok",
             "time_median": t, "sm_clock_mhz": 1980.0} for r, t in enumerate(times)]
    return result


class RankedFileTest(unittest.TestCase):
    def setUp(self):
        self.folder = TemporaryFolder(self.addCleanup)
        self.plain = GPU_RUN
        self.ranked = self.folder.write_json("ranked.json", ranked(load_fixture(GPU_RUN)))

    def test_it_loads_like_a_file_of_one_process(self):
        plain, ranks = load_run_file(self.plain), load_run_file(self.ranked)
        self.assertEqual(len(ranks.entries), len(plain.entries))

    def test_the_report_reads_it(self):
        out = write_report(self, self.ranked)
        self.assertTrue((out / "summary.md").exists())

    def test_compare_reads_it_against_a_file_of_one_process(self):
        code, out, err = run_compare(self.plain, self.ranked)
        plain_code, plain_out, _ = run_compare(self.plain, self.plain)
        self.assertEqual((code, err), (plain_code, ""))  # one run a side: cannot judge, as two plain files
        self.assertEqual(rows(out).keys(), rows(plain_out).keys())

    def test_the_history_adds_it(self):
        store = self.folder.path / "history.sqlite"
        code, _, err = run_history("add", "--db", store, self.plain, self.ranked)
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
