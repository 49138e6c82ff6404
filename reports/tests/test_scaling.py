"""The weak-scaling table of gpt/R5_data_parallel, from one results file per rank count."""

import contextlib
import copy
import io
import unittest

from roofbench_reports import report_cli

from roofbench_reports.results import group_by_device, parse_run
from roofbench_reports.scaling import FROM_CASE_COUNTER, FROM_K1_POINT, scaling_configurations

from .helpers import TemporaryFolder

TOKENS_PER_RANK = 64 * 128
GRADIENT_BYTES = 4 * 18_929_664
DEVICE = {"kind": "cuda", "index": 0, "name": "NVIDIA H200", "key": "cuda-NVIDIA_H200-GPU-0f3c"}


def r5_run(ranks, step_seconds, counters, gate="pass"):
    """A results file as the host writes one for gpt/R5_data_parallel on `ranks` GPUs. Test fixture built
    from figures measured on an H200 (k = 2 on two GPUs; k = 1 is R0's 10.43 ms step), not a measurement."""
    tokens = ranks * TOKENS_PER_RANK
    entry = {
        "name": "gpt/R5_data_parallel", "run_name": "gpt/R5_data_parallel", "run_type": "iteration",
        "repetitions": 1, "repetition_index": 0, "threads": 1, "iterations": 1,
        "real_time": step_seconds * 1e3, "cpu_time": step_seconds * 1e3, "time_unit": "ms",
        "label": f"precision=tf32 gate={gate} mode=hot", "error_occurred": gate != "pass",
        "error_message": "" if gate == "pass" else "2 rank(s) differ from rank 0 (FAILED)",
        "time_median": step_seconds, "noise": 0.004, "samples": 40,
        "parameters": 18_929_664, "ranks": ranks, "gradient_bytes": GRADIENT_BYTES,
        "roofbench": {
            "plugin": "gpt", "case": "R5_data_parallel", "params": {}, "precision": "tf32", "bound": "compute",
            "gate": gate, "ladder": "gpt-data-parallel",
            "device": "cuda:" + ",".join(str(rank) for rank in range(ranks)),
            "flops": 0, "bytes": 0, "items": tokens, "item_name": "tokens",
        },
    }
    if gate == "pass":
        entry["tokens/s"] = tokens / step_seconds
    entry.update(counters)
    return {
        "context": {
            "date": "2026-11-29T12:00:00+00:00", "host_name": "fixture",
            "note": "test fixture: gpt/R5 figures quoted from an H200 run, not a measurement",
            "roofbench": {"version": "0.1.0", "suite": "", "complete": True, "gate": "on", "mode": "hot",
                          "device": DEVICE, "ceilings": {}, "load_failures": [], "not_run": []},
        },
        "benchmarks": [entry],
    }


def two_nodes(ranks_per_node, t_compute):
    """What the case writes for two nodes over 50 GB/s (plugins/gpt/scaling_model.hpp, tested in C++)."""
    ranks = 2 * ranks_per_node
    t_comm = 2 * (ranks - 1) / ranks * GRADIENT_BYTES / 50e9
    return {"predicted_two_node_tokens_per_s": ranks * TOKENS_PER_RANK / (t_compute + t_comm),
            "predicted_two_node_ceiling_tokens_per_s": ranks * TOKENS_PER_RANK / t_compute}


K1_STEP = 10.43e-3
K2_T_COMPUTE = 2 * TOKENS_PER_RANK / 1.586e6  # the measured k=2 ceiling
K1 = r5_run(1, K1_STEP, {"predicted_floor_tokens_per_s": TOKENS_PER_RANK / K1_STEP,
                         "linear_ceiling_tokens_per_s": TOKENS_PER_RANK / K1_STEP, "scaling_efficiency": 1.0,
                         **two_nodes(1, K1_STEP)})
K2 = r5_run(2, 2 * TOKENS_PER_RANK / 1.556e6,
            {"predicted_floor_tokens_per_s": 1.544e6, "linear_ceiling_tokens_per_s": 1.586e6,
             "scaling_efficiency": 0.981, **two_nodes(2, K2_T_COMPUTE)})


def configurations(*documents):
    (device,) = group_by_device([parse_run(copy.deepcopy(document)) for document in documents])
    return device, scaling_configurations(device.benchmarks.values())


class ScalingConfigurationsTest(unittest.TestCase):
    def test_each_rank_count_is_its_own_row(self):
        device, found = configurations(K1, K2)
        # Two benchmarks, not one median over k = 1 and k = 2.
        self.assertEqual(list(device.benchmarks), ["gpt/R5_data_parallel", "gpt/R5_data_parallel [cuda:0,1]"])
        (points,) = found.values()
        self.assertEqual([point.ranks for point in points], [1, 2])
        one, two = points
        self.assertAlmostEqual(one.measured, 785.4e3, delta=100)
        self.assertAlmostEqual(two.measured, 1.556e6, delta=1)
        self.assertEqual((two.floor, two.ceiling), (1.544e6, 1.586e6))
        self.assertAlmostEqual(two.two_node_floor, 2.601e6, delta=1e3)
        self.assertAlmostEqual(two.two_node_ceiling, 3.172e6, delta=1)

    def test_each_rank_count_is_its_own_waterfall_point(self):
        device, _ = configurations(K1, K2)
        self.assertEqual(list(device.ladders()), ["gpt-data-parallel", "gpt-data-parallel (cuda:0,1)"])
        two = device.benchmarks["gpt/R5_data_parallel [cuda:0,1]"]
        self.assertEqual((two.case, two.short_name, two.base_short_name, two.point),
                         ("R5_data_parallel", "R5_data_parallel [cuda:0,1]", "R5_data_parallel", "cuda:0,1"))

    def test_efficiency_from_the_k1_point(self):
        _, found = configurations(K2, K1)  # the order of the files does not matter
        one, two = next(iter(found.values()))
        self.assertEqual(two.efficiency_source, FROM_K1_POINT)
        self.assertAlmostEqual(one.efficiency, 1.0)
        self.assertAlmostEqual(two.efficiency, 1.556e6 / (2 * TOKENS_PER_RANK / 10.43e-3), places=9)
        self.assertAlmostEqual(two.efficiency, 0.9905, places=4)

    def test_efficiency_from_the_case_without_a_k1_point(self):
        _, found = configurations(K2)
        (two,) = next(iter(found.values()))
        self.assertEqual((two.efficiency, two.efficiency_source), (0.981, FROM_CASE_COUNTER))

    def test_a_failed_gate_shows_no_measurement(self):
        failed = r5_run(2, 11e-3, {"predicted_floor_tokens_per_s": 1.544e6}, gate="fail")
        _, found = configurations(K1, failed)
        two = next(iter(found.values()))[1]
        self.assertIsNone(two.measured)
        self.assertIsNone(two.efficiency)

    def test_cases_without_the_cost_model_have_no_table(self):
        document = r5_run(1, 10.43e-3, {})
        _, found = configurations(document)
        self.assertEqual(found, {})


class ScalingReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        folder = TemporaryFolder(cls.addClassCleanup)
        paths = [folder.write_json("k1.json", K1), folder.write_json("k2.json", K2)]
        with contextlib.redirect_stdout(io.StringIO()):
            code = report_cli.main([str(path) for path in paths] + ["-o", str(folder.path / "out")])
        assert code == 0, code
        cls.out = folder.path / "out"

    def test_summary_has_the_scaling_table(self):
        summary = (self.out / "summary.md").read_text(encoding="utf-8")
        self.assertIn("#### Scaling: R5_data_parallel", summary)
        self.assertIn("| k | GPUs | predicted floor tokens/s | measured tokens/s | linear ceiling tokens/s | "
                      "weak-scaling efficiency | 2 nodes (2k GPUs, on paper): floor tokens/s | "
                      "2 nodes: ceiling tokens/s | gate |", summary)
        self.assertIn("| 1 | cuda:0 | 785 k | 785 k | 785 k | 1 | 1.37 M | 1.57 M | pass |", summary)
        self.assertIn("| 2 | cuda:0,1 | 1.54 M | 1.56 M | 1.59 M | 0.991 | 2.6 M | 3.17 M | pass |", summary)
        self.assertIn("never measured", summary)

    def test_the_page_shows_it_too(self):
        page = (self.out / "index.html").read_text(encoding="utf-8")
        self.assertIn("Scaling: R5_data_parallel", page)
        self.assertIn("0.991", page)


if __name__ == "__main__":
    unittest.main()
