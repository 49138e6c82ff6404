import contextlib
import copy
import io
import subprocess
import sys
import unittest

from roofbench_reports import compare_cli
from roofbench_reports.compare import SAME, SLOWER, TOO_FEW_SAMPLES, compare_benchmarks
from roofbench_reports.results import group_by_device, parse_run

from .helpers import (CPU_RUN, CPU_RUN_GATE_REGRESSION, CPU_RUN_SLOWER, GPU_RUN, REPORTS_DIR, TemporaryFolder,
                      load_fixture, perturbed)


def run_compare(*arguments):
    """(exit code, stdout, stderr) of roofbench-compare run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = compare_cli.main([str(argument) for argument in arguments])
    return code, out.getvalue(), err.getvalue()


class ExitCodeTest(unittest.TestCase):
    def test_same_run_measured_again_is_unchanged(self):
        folder = TemporaryFolder(self.addCleanup)
        for seed in range(3):
            again = folder.write_json(f"again{seed}.json", perturbed(load_fixture(CPU_RUN), 0.01, seed))
            code, out, _ = run_compare(CPU_RUN, again)
            self.assertEqual(code, 0, out)
            self.assertIn("No regression", out)

    def test_twenty_percent_slower_is_a_regression(self):
        code, out, _ = run_compare(CPU_RUN, CPU_RUN_SLOWER)
        self.assertEqual(code, 1)
        self.assertIn("| cpu/add/n:1048576 |", out)
        self.assertIn("SLOWER", out)

    def test_the_other_way_round_is_faster(self):
        code, out, _ = run_compare(CPU_RUN_SLOWER, CPU_RUN)
        self.assertEqual(code, 0)
        self.assertIn("| faster |", out)

    def test_a_higher_threshold_tolerates_the_slowdown(self):
        code, _, _ = run_compare(CPU_RUN, CPU_RUN_SLOWER, "--threshold", "0.3")
        self.assertEqual(code, 0)

    def test_gate_regression(self):
        code, out, _ = run_compare(CPU_RUN, CPU_RUN_GATE_REGRESSION)
        self.assertEqual(code, 1)
        self.assertIn("pass -> fail (REGRESSION)", out)
        self.assertIn("1 gate regression(s)", out)

    def test_a_gate_that_starts_passing_is_fine(self):
        code, _, _ = run_compare(CPU_RUN_GATE_REGRESSION, CPU_RUN)
        self.assertEqual(code, 0)

    def test_bad_inputs_exit_2_with_one_line(self):
        folder = TemporaryFolder(self.addCleanup)
        google_only = folder.write_json("google.json", {"context": {}, "benchmarks": []})
        (folder.path / "text.json").write_text("hello", encoding="utf-8")
        cases = {
            "missing": (folder.path / "missing.json", "no such file"),
            "not JSON": (folder.path / "text.json", "not JSON"),
            "not roofbench": (google_only, "not a roofbench results file"),
            "other device": (GPU_RUN, "different devices"),
        }
        for label, (new, message) in cases.items():
            with self.subTest(label):
                code, out, err = run_compare(CPU_RUN, new)
                self.assertEqual(code, 2)
                self.assertEqual(out, "")
                self.assertIn(message, err)
                self.assertEqual(err.count("\n"), 1)

    def test_device_mismatch_can_be_allowed(self):
        code, out, _ = run_compare(CPU_RUN, GPU_RUN, "--allow-device-mismatch")
        self.assertEqual(code, 0)
        self.assertIn("### Added (8)", out)
        self.assertIn("### Removed (12)", out)

    def test_the_installed_script_runs(self):
        completed = subprocess.run([sys.executable, str(REPORTS_DIR / "roofbench-compare"), str(CPU_RUN),
                                    str(CPU_RUN_SLOWER)], capture_output=True, text=True, timeout=60)
        self.assertEqual(completed.returncode, 1, completed.stderr)
        self.assertTrue(completed.stdout.startswith("# roofbench comparison"))


class VerdictTest(unittest.TestCase):
    def benchmarks(self, document):
        return group_by_device([parse_run(document)])[0].benchmarks

    def test_a_single_sample_is_never_a_verdict(self):
        base, new = load_fixture(CPU_RUN), load_fixture(CPU_RUN_SLOWER)
        for document in (base, new):
            for entry in document["benchmarks"]:
                entry.get("roofbench", {})["samples_s"] = entry.get("roofbench", {}).get("samples_s", [])[:1]
        comparisons, _, _ = compare_benchmarks(self.benchmarks(base), self.benchmarks(new), 0.05, 0.05)
        timed = [c for c in comparisons if c.new_median is not None]
        self.assertTrue(timed)
        self.assertTrue(all(c.verdict == TOO_FEW_SAMPLES and not c.regressed for c in timed))

    def test_repetitions_are_compared_by_their_medians(self):
        def repeated(document, medians):
            entry = document["benchmarks"][0]
            document["benchmarks"] = [dict(copy.deepcopy(entry), time_median=m, repetition_index=i)
                                      for i, m in enumerate(medians)]
            return self.benchmarks(document)

        base = repeated(load_fixture(CPU_RUN), [1.00, 1.01, 0.99, 1.02, 0.98])
        slower = repeated(load_fixture(CPU_RUN), [1.20, 1.21, 1.19, 1.22, 1.18])
        noisy = repeated(load_fixture(CPU_RUN), [0.70, 1.40, 1.00, 1.30, 0.90])
        [comparison], _, _ = compare_benchmarks(base, slower, 0.05, 0.05)
        self.assertEqual(comparison.verdict, SLOWER)
        self.assertAlmostEqual(comparison.change, 0.2)
        [comparison], _, _ = compare_benchmarks(base, noisy, 0.05, 0.05)
        self.assertEqual(comparison.verdict, SAME)  # the median did not move beyond noise


if __name__ == "__main__":
    unittest.main()
