"""add + trend over 1,000 runs of a transformer-sized suite (200 benchmarks a run) in under 10 s.

The budget is on the processor time of the two commands (user + system): on a machine shared with
other jobs, wall time measures the neighbours as much as the commands. Both are printed. The budget holds
on a machine as fast as the one it was set on; on a slower one (a virtual machine whose neighbours share
its caches and memory, where processor time stretches too) it grows by how much longer parsing the same
run files takes there, work of the same kind as the tools' own."""

import json
import os
import resource
import subprocess
import sys
import time
import unittest

from .helpers import REPORTS_DIR, TemporaryFolder
from .history_synthetic import noisy_series, transformer_suite_names, write_history

RUNS = 1000
BENCHMARKS = 200
BUDGET_S = 10.0
# _parse_cpu_s's figure on the machine BUDGET_S was set on, an estimate: add's 3.2 s there takes 9.5 s where
# the parse takes 2.0 s, so about 0.7 s there; rounded up, which makes the scaled budget the tighter.
PARSE_S = 0.8
# Three benchmarks get a step, so the permutation tests that confirm a change are part of the time.
STEPPED = {5: (600, 0.05), 77: (300, -0.10), 150: (900, 0.08)}


class HistoryAtScaleTest(unittest.TestCase):
    def test_add_and_trend_a_thousand_runs_of_two_hundred_benchmarks(self):
        folder = TemporaryFolder(self.addCleanup).path
        names = transformer_suite_names(BENCHMARKS)
        medians, noises = {}, {}
        for number, name in enumerate(names):
            step_after, step = STEPPED.get(number, (None, 0.0))
            noises[name] = 0.005 + 0.025 * (number % 5) / 4
            medians[name] = noisy_series(RUNS, 1e-5 * (1 + number % 40), noises[name], seed=number,
                                         step_after=step_after, step=step)
        paths = write_history(folder, medians, noises)
        store = folder / "history.sqlite"
        tool = [sys.executable, str(REPORTS_DIR / "roofbench-history")]

        cpu_before = _children_cpu_s()
        started = time.perf_counter()
        subprocess.run(tool + ["add", "--db", str(store)] + [str(path) for path in paths], check=True,
                       capture_output=True)
        added = time.perf_counter()
        trend = subprocess.run(tool + ["trend", "--db", str(store), "--output", str(folder / "trend")],
                               check=True, capture_output=True, text=True)
        finished = time.perf_counter()
        cpu_s = _children_cpu_s() - cpu_before

        print(f"\n{RUNS} runs x {BENCHMARKS} benchmarks: add {added - started:.1f} s + trend "
              f"{finished - added:.1f} s = {finished - started:.1f} s wall, {cpu_s:.1f} s of processor time",
              file=sys.stderr)
        self.assertIn(f"3 change points in {BENCHMARKS} benchmarks over {RUNS} runs", trend.stdout)
        load = os.getloadavg()[0]
        if load > os.cpu_count():
            # More runnable jobs than cores: even processor time grows (shared caches and cores), so a
            # budget says nothing about the tool. The figures above are still printed.
            self.skipTest(f"time not judged: load {load:.1f} on {os.cpu_count()} cores; measured "
                          f"{finished - started:.1f} s wall, {cpu_s:.1f} s of processor time")
        parse_s = _parse_cpu_s(paths)
        budget_s = BUDGET_S * max(1.0, parse_s / PARSE_S)
        print(f"budget {budget_s:.1f} s (parsing the run files took {parse_s:.2f} s of processor time, "
              f"against {PARSE_S} s where the budget was set)", file=sys.stderr)
        self.assertLess(cpu_s, budget_s)


def _parse_cpu_s(paths):
    """This process's processor time to read and parse every run file."""
    started = time.process_time()
    for path in paths:
        with open(path, encoding="utf-8") as file:
            json.load(file)
    return time.process_time() - started


def _children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    unittest.main()
