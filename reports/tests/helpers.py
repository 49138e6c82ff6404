"""Shared by the test modules: fixture paths and throw-away copies of fixtures."""

import copy
import json
import pathlib
import random
import tempfile

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
REPORTS_DIR = FIXTURES.parent.parent
CPU_RUN = FIXTURES / "cpu_run.json"
GPU_RUN = FIXTURES / "gpu_run.json"
CPU_RUN_SLOWER = FIXTURES / "cpu_run_20pct_slower.json"
CPU_RUN_GATE_REGRESSION = FIXTURES / "cpu_run_gate_regression.json"
# Twenty recorded smoke runs of one binary, 5 repetitions each (fixtures/thin_recorded_runs.py says how).
IDENTICAL_RUNS = sorted((FIXTURES / "identical_runs").glob("run*.json"))


def load_fixture(path):
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


class TemporaryFolder:
    """A temp folder with a helper to write JSON documents into it. register_cleanup: a test's
    addCleanup (or a class's addClassCleanup), which removes the folder when the test is done."""

    def __init__(self, register_cleanup):
        self._folder = tempfile.TemporaryDirectory(prefix="roofbench-reports-test-")
        register_cleanup(self._folder.cleanup)
        self.path = pathlib.Path(self._folder.name)

    def write_json(self, name, document):
        path = self.path / name
        path.write_text(json.dumps(document), encoding="utf-8")
        return path


def perturbed(document, relative_noise, seed):
    """A copy whose samples are resampled from the original ones with +-relative_noise jitter: the
    same run measured again, as far as a statistical test can tell."""
    random_source = random.Random(seed)
    result = copy.deepcopy(document)
    for entry in result["benchmarks"]:
        samples = entry.get("roofbench", {}).get("samples_s")
        if samples:
            entry["roofbench"]["samples_s"] = [
                random_source.choice(samples) * (1 + random_source.uniform(-relative_noise, relative_noise))
                for _ in samples
            ]
            entry["time_median"] *= 1 + random_source.uniform(-relative_noise, relative_noise)
    return result
