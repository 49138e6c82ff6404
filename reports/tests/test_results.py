import copy
import unittest

from roofbench_reports.results import ResultsError, finite_number, group_by_device, load_run_file, parse_run
from roofbench_reports.summary import benchmark_row

from .helpers import CPU_RUN, GPU_RUN, TemporaryFolder, load_fixture


class LoadTest(unittest.TestCase):
    def test_reads_a_fixture(self):
        run = load_run_file(CPU_RUN)
        self.assertEqual(run.device.kind, "cpu")
        self.assertEqual(run.ceilings.bandwidth_Bps, 1.9e10)
        self.assertNotIn("bf16", run.ceilings.flops)  # null in the file: not a ceiling
        self.assertEqual(len(run.entries), 12)
        self.assertEqual(run.load_failures[0]["reason"], "no entry point roofbench_plugin")

    def test_bad_inputs_have_one_line_messages(self):
        folder = TemporaryFolder(self.addCleanup)
        (folder.path / "broken.json").write_text("{not json", encoding="utf-8")
        cases = {
            folder.path / "missing.json": "no such file",
            folder.path / "broken.json": "not JSON",
            folder.write_json("google.json", {"context": {"date": "x"}, "benchmarks": []}): "no context.roofbench",
            folder.write_json("list.json", [1, 2]): "no context.roofbench",
            folder.write_json("nolist.json", {"context": {"roofbench": {}}}): "no benchmarks list",
        }
        for path, expected in cases.items():
            with self.subTest(path=path.name), self.assertRaises(ResultsError) as raised:
                load_run_file(path)
            self.assertIn(expected, str(raised.exception))
            self.assertNotIn("\n", str(raised.exception))

    def test_items_counter_is_read_from_the_summaries(self):
        document = load_fixture(CPU_RUN)
        entry = next(e for e in document["benchmarks"] if e["roofbench"].get("item_name"))
        item_rate = entry["roofbench"]["item_name"] + "/s"
        # The case's items per second under a renamed name (a host figure had its name): found by its unit.
        entry["case." + item_rate] = entry.pop(item_rate, 1.0)
        entry["roofbench"]["summaries"] = {
            "time_median": {"unit": "s", "description": "median"},
            "case." + item_rate: {"unit": item_rate, "description": "items", "from_plugin": True}}
        benchmark = group_by_device([parse_run(document)])[0].benchmarks[entry["name"]]
        self.assertEqual(benchmark.items_counter, "case." + item_rate)
        self.assertEqual(benchmark.figure_names(from_plugin=False), ["time_median"])
        del entry["roofbench"]["summaries"]
        benchmark = group_by_device([parse_run(document)])[0].benchmarks[entry["name"]]
        self.assertEqual(benchmark.items_counter, item_rate, "a file without summaries: the name the host gives")

    def test_finite_number(self):
        self.assertEqual(finite_number(3), 3.0)
        for not_a_number in (None, "3", True, float("nan"), float("inf")):
            self.assertIsNone(finite_number(not_a_number))


class BenchmarkTest(unittest.TestCase):
    def setUp(self):
        self.device = group_by_device([load_run_file(CPU_RUN)])[0]

    def test_names_and_metadata(self):
        benchmark = self.device.benchmarks["cpu/matmul_blas/n:1024/dtype:fp64"]
        self.assertEqual(benchmark.plugin, "cpu")
        self.assertEqual(benchmark.short_name, "matmul_blas/n:1024/dtype:fp64")
        self.assertEqual(benchmark.case, "matmul_blas")
        self.assertEqual(benchmark.precision, "fp64")
        self.assertEqual(benchmark.bound, "compute")

    def test_times_in_any_unit(self):
        for name in ("cpu/add/n:1048576", "cpu/reduce_tree/n:65536"):  # us and ns
            benchmark = self.device.benchmarks[name]
            entry = benchmark.entries[0]
            del entry["time_median"]
            self.assertAlmostEqual(benchmark.median_seconds / entry["roofbench"]["samples_s"][6], 1, delta=0.05)

    def test_failed_gate(self):
        benchmark = self.device.benchmarks["cpu/layernorm/rows:4096/cols:1024"]
        self.assertTrue(benchmark.errored)
        self.assertEqual(benchmark.gate, "fail")
        self.assertIsNone(benchmark.median_seconds)  # zero real_time means 'not timed'
        self.assertIn("tolerance", benchmark.error_messages[0])
        self.assertIsNone(benchmark.counter("FLOP/s"))

    def test_samples_of_a_single_run(self):
        benchmark = self.device.benchmarks["cpu/add/n:1048576"]
        self.assertEqual(len(benchmark.timing_samples()), 12)


class MergeTest(unittest.TestCase):
    def test_repetitions_become_one_benchmark(self):
        document = load_fixture(CPU_RUN)
        entry = document["benchmarks"][0]
        repetitions = []
        for index, median in enumerate([1.0, 3.0, 2.0]):
            repetition = copy.deepcopy(entry)
            repetition.update(repetition_index=index, repetitions=3, time_median=median, noise=0.01 * (index + 1))
            repetitions.append(repetition)
        aggregate = dict(copy.deepcopy(entry), run_type="aggregate", aggregate_name="mean", name=entry["name"] + "_mean")
        document["benchmarks"] = repetitions + [aggregate]
        benchmark = group_by_device([parse_run(document)])[0].benchmarks[entry["name"]]
        self.assertEqual(benchmark.repetitions, 3)
        self.assertEqual(benchmark.median_seconds, 2.0)
        self.assertEqual(benchmark.counter("noise"), 0.02)
        self.assertEqual(sorted(benchmark.timing_samples()), [1.0, 2.0, 3.0])

    def test_summary_row_explains_gpu_noise_and_cache_resident_data(self):
        document = load_fixture(GPU_RUN)
        entry = document["benchmarks"][0]
        entry.update(noise=0.0214, noise_at_fixed_clock=0.0005)
        entry["roofbench"]["cache_resident"] = True
        benchmark = group_by_device([parse_run(document)])[0].benchmarks[entry["name"]]
        row = benchmark_row(benchmark)
        self.assertIn("2.1 % (0.05 % at a fixed clock)", row)
        self.assertTrue(any(cell.endswith("(data in L2)") for cell in row))

    def test_one_group_per_device(self):
        devices = group_by_device([load_run_file(CPU_RUN), load_run_file(GPU_RUN), load_run_file(CPU_RUN)])
        self.assertEqual([d.device.kind for d in devices], ["cpu", "cuda"])
        self.assertEqual(len(devices[0].files), 2)
        self.assertEqual(devices[0].benchmarks["cpu/add/n:1048576"].repetitions, 2)
        self.assertEqual(len(devices[0].load_failures), 1)  # the same failure twice is listed once

    def test_ladder_rungs_keep_the_declared_order_at_each_point(self):
        document = load_fixture(GPU_RUN)
        ladders = group_by_device([parse_run(document)])[0].ladders()
        self.assertEqual(list(ladders), ["gpt (batch:64)"])
        self.assertEqual([b.case for b in ladders["gpt (batch:64)"]], ["R0_eager", "R1_fused"])
        self.assertEqual(ladders["gpt (batch:64)"][0].items_counter, "tokens/s")

        document["benchmarks"].reverse()  # the file's order is the plugin's declared order
        ladders = group_by_device([parse_run(document)])[0].ladders()
        self.assertEqual([b.case for b in ladders["gpt (batch:64)"]], ["R1_fused", "R0_eager"])


if __name__ == "__main__":
    unittest.main()
