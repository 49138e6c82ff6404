"""add + trend over 1,000 runs of a transformer-sized suite (200 benchmarks a run) in under 10 s."""

import subprocess
import sys
import time
import unittest

from .helpers import REPORTS_DIR, TemporaryFolder
from .history_synthetic import noisy_series, transformer_suite_names, write_history

RUNS = 1000
BENCHMARKS = 200
BUDGET_S = 10.0
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

        started = time.perf_counter()
        subprocess.run(tool + ["add", "--db", str(store)] + [str(path) for path in paths], check=True,
                       capture_output=True)
        added = time.perf_counter()
        trend = subprocess.run(tool + ["trend", "--db", str(store), "--output", str(folder / "trend")],
                               check=True, capture_output=True, text=True)
        finished = time.perf_counter()

        print(f"\nadd {added - started:.1f} s + trend {finished - added:.1f} s = {finished - started:.1f} s "
              f"for {RUNS} runs x {BENCHMARKS} benchmarks", file=sys.stderr)
        self.assertIn(f"3 change points in {BENCHMARKS} benchmarks over {RUNS} runs", trend.stdout)
        self.assertLess(finished - started, BUDGET_S)


if __name__ == "__main__":
    unittest.main()
