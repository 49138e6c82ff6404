import re
import subprocess
import sys
import unittest

from roofbench_reports.ctest_measurements import measurement_line

from .helpers import CPU_RUN, GPU_RUN, REPORTS_DIR

FAKE_HOST = REPORTS_DIR / "tests" / "fake_roofbench.py"
MEASUREMENT = re.compile(r'<CTestMeasurement type="numeric/double" name="([^"]+)">([^<]+)</CTestMeasurement>')


def ctest_bench(*host_arguments):
    command = [sys.executable, str(REPORTS_DIR / "ctest_bench.py"), "--roofbench", str(FAKE_HOST), "--suite",
               "smoke", *map(str, host_arguments)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


class CTestBenchTest(unittest.TestCase):
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
