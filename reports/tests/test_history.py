"""roofbench-history end to end, on an SQLite file and on a real PostgreSQL server (started here)."""

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
import unittest

from roofbench_reports import history_cli
from roofbench_reports.history_store import open_store

from .helpers import IDENTICAL_RUNS, REPORTS_DIR, TemporaryFolder
from .history_synthetic import noisy_series, write_history
from .postgresql_server import server_for

TOOL = [sys.executable, "-B", str(REPORTS_DIR / "roofbench-history")]


def run_history(*arguments):
    """(exit code, stdout, stderr) of roofbench-history run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = history_cli.main([str(argument) for argument in arguments])
    return code, out.getvalue(), err.getvalue()


def change_rows(markdown):
    """{benchmark: commit range} of the change-point table in check's or trend's Markdown."""
    rows = {}
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if len(cells) == 9 and ".." in cells[2] and cells[0] != "Benchmark":
            rows[cells[0]] = cells[2]
    return rows


def commit_label(run_number):
    return f"c{run_number:04d}{'0' * 35}"[:10]


def synthetic_steps(count=30):
    """The step history: a 10% step after run 12 in one benchmark, a 3% step in one whose noise is 0.5%,
    and quiet benchmarks from 0.5% to 3% of noise, one of them with a lone 2x outlier."""
    medians = {
        "gpt/step10": noisy_series(count, 2e-3, 0.01, seed=11, step_after=12, step=0.10),
        "gpt/step3": noisy_series(count, 5e-6, 0.005, seed=12, step_after=12, step=0.03),
        "gpt/quiet_half_percent": noisy_series(count, 1e-4, 0.005, seed=13),
        "gpt/quiet_one_percent": noisy_series(count, 3e-4, 0.01, seed=14),
        "gpt/quiet_three_percent": noisy_series(count, 7e-3, 0.03, seed=15),
        "gpt/outlier": noisy_series(count, 4e-5, 0.01, seed=16),
    }
    medians["gpt/outlier"][20] *= 2
    noises = {"gpt/step10": 0.01, "gpt/step3": 0.005, "gpt/quiet_half_percent": 0.005,
              "gpt/quiet_one_percent": 0.01, "gpt/quiet_three_percent": 0.03, "gpt/outlier": 0.01}
    return medians, noises


class HistoryCases:
    """The tests every store runs; a subclass says where its store is (new_store)."""

    def setUp(self):
        self.folder = TemporaryFolder(self.addCleanup).path
        self.store = self.new_store()

    def history(self, *arguments):
        command, rest = arguments[0], arguments[1:]
        return run_history(command, "--db", self.store, *rest)

    def add_synthetic(self, medians, noises, **options):
        paths = write_history(self.folder, medians, noises, **options)
        code, _, err = self.history("add", *paths)
        self.assertEqual(code, 0, err)
        return paths

    def test_identical_runs_have_no_change_point(self):
        code, out, err = self.history("add", *IDENTICAL_RUNS)
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(out.count("recorded as run"), 20)
        code, out, _ = self.history("check")
        self.assertEqual(code, 0, out)
        self.assertIn("0 change points in 9 benchmarks over 20 runs", out)
        self.assertIn("No regression in the newest run.", out)

    def test_steps_are_found_at_their_commit_and_nothing_else(self):
        self.add_synthetic(*synthetic_steps())
        code, out, _ = self.history("check")
        self.assertEqual(code, 1, out)
        first_after = commit_label(13)
        self.assertEqual(change_rows(out), {"gpt/step10": f"{commit_label(12)} .. {first_after}",
                                            "gpt/step3": f"{commit_label(12)} .. {first_after}"})
        self.assertRegex(out, r"REGRESSION gpt/step10 on NVIDIA H200: \+1\d\.\d % .* between "
                              rf"{commit_label(12)} \.\. {first_after}; evidence: p = ")
        self.assertIn("REGRESSION gpt/step3 on NVIDIA H200: +3.", out)

    def test_a_step_below_the_threshold_is_listed_but_passes(self):
        self.add_synthetic(*synthetic_steps())
        code, out, _ = self.history("check", "--threshold", "0.2")
        self.assertEqual(code, 0, out)
        self.assertEqual(len(change_rows(out)), 2)

    def test_a_faster_step_passes_the_check(self):
        medians = {"gpt/faster": noisy_series(20, 1e-3, 0.01, seed=21, step_after=10, step=-0.2)}
        self.add_synthetic(medians, {"gpt/faster": 0.01})
        code, out, _ = self.history("check")
        self.assertEqual(code, 0, out)
        self.assertIn("-20.", out)

    def test_a_gate_that_newly_fails_fails_the_check(self):
        medians = {"gpt/gated": noisy_series(6, 1e-3, 0.01, seed=22)}
        self.add_synthetic(medians, {"gpt/gated": 0.01}, gates={("gpt/gated", 5): "fail"})
        code, out, _ = self.history("check")
        self.assertEqual(code, 1, out)
        self.assertIn(f"GATE gpt/gated on NVIDIA H200: fail in {commit_label(6)}, passed in {commit_label(5)}", out)

    def test_the_same_file_is_recorded_once(self):
        paths = self.add_synthetic({"gpt/one": [1e-3, 1.1e-3]}, {"gpt/one": 0.01})
        copy = self.folder / "latest.json"
        shutil.copy(paths[-1], copy)
        code, out, _ = self.history("add", paths[0], copy)
        self.assertEqual(code, 0)
        self.assertEqual(out.count("already recorded"), 2)
        store = open_store(self.store)
        self.addCleanup(store.close)
        self.assertEqual(store.run_count(), 2)

    def test_records_the_context_and_the_summary(self):
        self.add_synthetic({"gpt/one": [1e-3]}, {"gpt/one": 0.02})
        store = open_store(self.store)
        self.addCleanup(store.close)
        [run] = store.runs()
        [result] = store.results()
        self.assertEqual((run.commit[:5], run.host, run.device_name, run.driver, run.mode, run.gate_mode),
                         ("c0001", "runner-1", "NVIDIA H200", "580.65", "hot", "on"))
        self.assertEqual(run.ceilings["flops"], {"bf16": 7.5e14})
        self.assertEqual((result.median_s, result.q1_s, result.q3_s, result.noise, result.run_count, result.gate),
                         (1e-3, 1e-3 * 0.99, 1e-3 * 1.01, 0.02, 1, "pass"))
        self.assertEqual(set(result.counters), {"FLOP/s", "tokens/s"})

    def test_trend_writes_markdown_and_an_offline_page(self):
        self.add_synthetic(*synthetic_steps())
        output = self.folder / "trend"
        code, out, err = self.history("trend", "step", "--output", output)
        self.assertEqual((code, err), (0, ""))
        self.assertIn("2 change points in 2 benchmarks over 30 runs", out)
        markdown = (output / "trend.md").read_text(encoding="utf-8")
        self.assertEqual(set(change_rows(markdown)), {"gpt/step10", "gpt/step3"})
        page = (output / "trend.html").read_text(encoding="utf-8")
        self.assertIn("Plotly.newPlot", page)
        self.assertNotRegex(page, r"<script[^>]+src=")  # plotly.js is inside the page, fetched from nowhere
        charts = json.loads(re.search(r'id="chart-data">(.*?)</script>', page, re.S).group(1))
        self.assertEqual(len(charts["charts"]), 2)
        self.assertEqual(len(charts["charts"][0]["layout"]["shapes"]), 1)  # the change point's line

    def test_export_for_bencher(self):
        self.add_synthetic({"gpt/one": [1e-3, 2e-3]}, {"gpt/one": 0.02})
        code, out, _ = self.history("export", "--format", "bencher")
        self.assertEqual(code, 0)
        metrics = json.loads(out)["gpt/one"]
        self.assertAlmostEqual(metrics["latency"]["value"], 2e6)  # nanoseconds, the newest run
        self.assertAlmostEqual(metrics["latency"]["lower_value"], 2e6 * 0.99)
        self.assertAlmostEqual(metrics["latency"]["upper_value"], 2e6 * 1.01)
        self.assertAlmostEqual(metrics["throughput"]["value"], 4096 / 2e-3)

    def test_export_for_github_action_benchmark(self):
        self.add_synthetic({"gpt/one": [1e-3, 2e-3]}, {"gpt/one": 0.02})
        target = self.folder / "benchmark.json"
        code, _, _ = self.history("export", "--format", "github-action-benchmark", "--run", "1", "--output",
                                  target)
        self.assertEqual(code, 0)
        [entry] = json.loads(target.read_text(encoding="utf-8"))
        self.assertEqual((entry["name"], entry["unit"]), ("gpt/one", "ns"))
        self.assertAlmostEqual(entry["value"], 1e6)
        self.assertIn(f"commit {'c0001'}", entry["extra"])

    def test_two_processes_adding_at_once_lose_nothing(self):
        medians = {f"gpt/b{i}": noisy_series(40, 1e-3, 0.01, seed=i) for i in range(20)}
        paths = [str(path) for path in write_history(self.folder, medians, {name: 0.01 for name in medians})]
        # Each process adds its own 15 runs and the 10 both were given.
        shares = [paths[:15] + paths[30:], paths[15:30] + paths[30:]]
        processes = [subprocess.Popen(TOOL + ["add", "--db", str(self.store)] + share, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for share in shares]
        outputs = [process.communicate(timeout=300) for process in processes]
        self.assertEqual([process.returncode for process in processes], [0, 0], outputs)
        recorded = sum(out.count("recorded as run") for out, _ in outputs)
        self.assertEqual(recorded, 40)
        store = open_store(self.store)
        self.addCleanup(store.close)
        self.assertEqual(store.run_count(), 40)
        self.assertEqual(len(store.results()), 40 * 20)

    def test_bad_input_is_one_line_and_exit_2(self):
        bad = self.folder / "bad.json"
        bad.write_text("{not json", encoding="utf-8")
        negative = write_history(self.folder, {"gpt/one": [-1e-3]}, {"gpt/one": 0.01}, first_number=7)[0]
        cases = [("add", bad), ("add", negative), ("add", self.folder / "missing.json"),
                 ("check", "(unclosed"), ("export", "--format", "bencher", "--run", "99"),
                 ("check", "--threshold", "2"), ("trend", "no-such-benchmark")]
        self.add_synthetic({"gpt/one": [1e-3]}, {"gpt/one": 0.01})
        for arguments in cases:
            with self.subTest(arguments=arguments):
                code, _, err = self.history(*arguments)
                self.assertEqual(code, 2)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertNotIn("Traceback", err)


class SQLiteHistoryTest(HistoryCases, unittest.TestCase):
    def new_store(self):
        return self.folder / "results" / "history.sqlite"

    def test_readers_refuse_a_missing_or_foreign_store(self):
        for command in ("trend", "check", "export --format bencher"):
            with self.subTest(command=command):
                code, _, err = run_history(*command.split(), "--db", self.folder / "none.sqlite")
                self.assertEqual(code, 2)
                self.assertIn("no history store here", err)
        foreign = self.folder / "foreign.sqlite"
        foreign.write_text("not a database", encoding="utf-8")
        code, _, err = run_history("check", "--db", foreign)
        self.assertEqual(code, 2)
        self.assertIn("foreign.sqlite: cannot open as an SQLite history store: file is not a database", err)

    def test_the_script_runs_without_a_traceback(self):
        completed = subprocess.run(TOOL + ["check", "--db", str(self.folder / "none.sqlite")],
                                   capture_output=True, text=True)
        self.assertEqual(completed.returncode, 2)
        self.assertEqual(len(completed.stderr.splitlines()), 1, completed.stderr)


class PostgreSQLHistoryTest(HistoryCases, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = server_for(cls)

    def new_store(self):
        return self.server.new_database()

    def test_an_unreachable_server_is_one_line(self):
        code, _, err = run_history("check", "--db", "postgresql://nobody@/none?host=/nonexistent&port=1")
        self.assertEqual(code, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("cannot connect", err)


if __name__ == "__main__":
    unittest.main()
