import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from roofbench_reports.ctest_measurements import measurement_line

from .helpers import CPU_RUN, GPU_RUN, REPORTS_DIR

FAKE_HOST = REPORTS_DIR / "tests" / "fake_roofbench.py"
MEASUREMENT = re.compile(r'<CTestMeasurement type="numeric/double" name="([^"]+)">([^<]+)</CTestMeasurement>')


def ctest_bench(*host_arguments, results_dir=None, device_variable=None):
    environment = {name: value for name, value in os.environ.items() if name != "ROOFBENCH_BENCH_DEVICE"}
    if device_variable is not None:
        environment["ROOFBENCH_BENCH_DEVICE"] = device_variable
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, str(REPORTS_DIR / "ctest_bench.py"), "--roofbench", str(FAKE_HOST), "--suite",
                   "smoke", "--results-dir", str(results_dir or scratch), *map(str, host_arguments)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)


class CTestBenchTest(unittest.TestCase):
    def test_results_are_kept_in_the_results_folder(self):
        with tempfile.TemporaryDirectory() as results_dir:
            completed = ctest_bench("--results-from", CPU_RUN, results_dir=results_dir)
            self.assertEqual(completed.returncode, 0, completed.stderr)
            self.assertTrue((Path(results_dir) / "latest.json").is_file())
            self.assertIn(f"results kept in {results_dir}", completed.stderr)

    def test_an_earlier_runs_results_are_not_reported_again(self):
        with tempfile.TemporaryDirectory() as results_dir:
            self.assertEqual(ctest_bench("--results-from", CPU_RUN, results_dir=results_dir).returncode, 0)
            completed = ctest_bench(results_dir=results_dir)  # this run writes nothing
            self.assertEqual(completed.returncode, 1)
            self.assertIn("no results to report", completed.stderr)
            self.assertFalse(self.measurements(completed))

    def test_the_host_chooses_the_device_unless_one_is_named(self):
        self.assertIn("on the default device", ctest_bench("--results-from", CPU_RUN).stdout)
        self.assertIn("on cuda:1", ctest_bench("--device", "cuda:1", "--results-from", CPU_RUN).stdout)
        named_at_test_time = ctest_bench("--device", "cuda:1", "--results-from", CPU_RUN, device_variable="cpu")
        self.assertIn("on cpu", named_at_test_time.stdout)

    def measurements(self, completed):
        return {name: float(value) for name, value in MEASUREMENT.findall(completed.stdout)}

    def test_headline_counters_of_every_benchmark(self):
        completed = ctest_bench("--results-from", GPU_RUN)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        self.assertIn("fake roofbench: suite smoke", completed.stdout)  # the host's own output passes through
        values = self.measurements(completed)
        self.assertAlmostEqual(values["gpt/R1_fused/batch:64 tokens/s"] / 382000, 1, delta=0.01)
        for counter in ("time_median", "FLOP/s", "B/s", "roof_pct"):
            self.assertIn(f"micro/matmul/n:8192/dtype:bf16 {counter}", values)
        self.assertNotIn("micro/copy/bytes:2147483648 FLOP/s", values)  # no FLOPs: no counter, no line
        self.assertEqual(len(completed.stdout.strip().splitlines()), 1 + len(values))

    def test_failed_benchmarks_skip_missing_counters(self):
        values = self.measurements(ctest_bench("--results-from", CPU_RUN))
        self.assertFalse([name for name in values if name.startswith("cpu/layernorm")])
        self.assertIn("cpu/add/n:1048576 elements/s", values)

    def test_host_exit_code_is_forwarded(self):
        completed = ctest_bench("--results-from", CPU_RUN, "--exit-code", "3")
        self.assertEqual(completed.returncode, 3)
        self.assertTrue(self.measurements(completed))  # what was measured is still reported

    def test_missing_results_fail_even_when_the_host_says_success(self):
        completed = ctest_bench()
        self.assertEqual(completed.returncode, 1)
        self.assertIn("no results to report", completed.stderr)

    def test_names_are_escaped(self):
        line = measurement_line('odd "name" <&>', "B/s", 1.5)
        self.assertEqual(line, '<CTestMeasurement type="numeric/double" name="odd &quot;name&quot; &lt;&amp;&gt; '
                               'B/s">1.5</CTestMeasurement>')


if __name__ == "__main__":
    unittest.main()
