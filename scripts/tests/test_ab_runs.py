"""scripts/ab_runs.sh over one executable taken as both sides: every round runs, the sides alternate,
and roofbench-compare judges the benchmark (its verdict on a loaded machine is its own business: what
is checked here is that the script ran both sides in turn and handed every run to the comparison). Needs ROOFBENCH (the executable) and AB_RUN_ARGS (what selects a plugin)."""
import os
import pathlib
import subprocess
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "ab_runs.sh"


class AbRuns(unittest.TestCase):
    def test_one_build_against_itself_is_not_a_change(self):
        roofbench = os.environ["ROOFBENCH"]
        with tempfile.TemporaryDirectory() as out:
            env = dict(os.environ, OUT=out, ROUNDS="3", SELECT=os.environ["AB_SELECT"],
                       RUN_ARGS=os.environ["AB_RUN_ARGS"] + " --max-time 0.02")
            run = subprocess.run(["bash", str(SCRIPT), roofbench, roofbench], env=env, capture_output=True,
                                 text=True, timeout=240)
            self.assertIn(run.returncode, (0, 1, 3), run.stdout + run.stderr)  # 2 would be bad input
            order = [line.split(" round ")[0].split()[-1] for line in run.stdout.splitlines() if " round " in line]
            self.assertEqual(order, ["base", "new", "new", "base", "base", "new"], run.stdout)
            reports = list(pathlib.Path(out).glob("compare-*.md"))
            self.assertEqual(len(reports), 1)
            self.assertIn("good/scale/n:1024", reports[0].read_text())

    def test_a_missing_executable_is_a_usage_error(self):
        run = subprocess.run(["bash", str(SCRIPT), "/nonexistent/roofbench", "/nonexistent/roofbench"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 2)
        self.assertIn("not an executable", run.stderr)


if __name__ == "__main__":
    unittest.main()
