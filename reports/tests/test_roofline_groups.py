"""The roofline's grouping by case, sweeps and their ridge crossings, the read-streaming roof, facts and
the noisy flag in the tables, and a report of 10,000 benchmarks in under 10 s."""

import os
import time
import unittest

from roofbench_reports import report_cli
from roofbench_reports.results import group_by_device, parse_run
from roofbench_reports.roofline import (group_points, key_names, plottable_points, point_hover, ridge_crossings,
                                       roofline_of)

from .helpers import TemporaryFolder
from .test_report import page_specs, parse_svg, plotted_points, texts, with_id

BANDWIDTH, READ_BANDWIDTH, FP32 = 2e10, 2.6e10, 1e11  # fp32 ridge at 5 FLOP/B


def entry(case, params, flops, bytes_, seconds, precision="fp32", plugin="lab", **roofbench):
    name = "/".join([plugin, case] + [f"{k}:{v}" for k, v in params.items()])
    info = {"plugin": plugin, "case": case, "params": params, "precision": precision, "gate": "pass",
            "samples_s": [seconds] * 5}
    info.update(roofbench)
    rate, intensity = flops / seconds, flops / bytes_
    bandwidth = READ_BANDWIDTH if roofbench.get("read_dominated") else BANDWIDTH
    attainable = min(FP32, intensity * bandwidth)
    return {"name": name, "run_name": name, "run_type": "iteration", "real_time": seconds * 1e6, "time_unit": "us",
            "time_median": seconds, "noise": 0.01, "FLOP/s": rate, "B/s": bytes_ / seconds, "AI": intensity,
            "roof_pct": 100 * rate / attainable, "label": "gate=pass", "roofbench": info}


def document(entries):
    return {"context": {"date": "2026-12-01T09:00:00+00:00", "host_name": "box", "roofbench": {
        "version": "0.1.0", "complete": True, "mode": "hot", "gate": "on",
        "device": {"kind": "cpu", "index": 0, "name": "Test CPU", "key": "cpu-test"},
        "ceilings": {"measured": {"bandwidth_Bps": BANDWIDTH, "read_bandwidth_Bps": READ_BANDWIDTH,
                                  "flops": {"fp32": FP32}}}}},
            "benchmarks": entries}


def matmul_sweep(layout="nn", plugin="lab"):
    """An n x n matmul from n = 1 (AI 1/6) to n = 64 (AI 10.7): crosses the 5 FLOP/B ridge."""
    return [entry("matmul", {"layout": layout, "n": str(n)}, 2 * n**3, 12 * n * n, 1e-6 * n, plugin=plugin)
            for n in (1, 4, 16, 64)]


def traces(spec, name_part):
    return [trace for trace in spec["data"] if name_part in trace["name"]]


class GroupingTest(unittest.TestCase):
    def groups(self, entries):
        device = group_by_device([parse_run(document(entries))])[0]
        return group_points(plottable_points(device))

    def test_a_size_sweep_is_one_line_and_a_layout_makes_another(self):
        groups = self.groups(matmul_sweep("nn") + matmul_sweep("nt") + [
            entry("add", {"n": "1024"}, 1024, 12288, 1e-6)])
        self.assertEqual([(g.title, g.sweep_axis, len(g.points)) for g in groups], [
            ("lab/matmul (layout:nn)", "n", 4), ("lab/matmul (layout:nt)", "n", 4), ("lab/add (n:1024)", "", 1)])
        self.assertEqual(groups[0].shape, groups[1].shape)  # one shape per case
        self.assertNotEqual(groups[0].shape, groups[2].shape)
        self.assertEqual([p.benchmark.params["n"] for p in groups[0].points], ["1", "4", "16", "64"])

    def test_the_hosts_sweep_axis_wins_over_the_inferred_one(self):
        entries = [entry("conv", {"batch": str(b), "c": str(c)}, 1e6 * b * c, 1e5 * b, 1e-3, sweep_axis="batch")
                   for b in (1, 2) for c in (8, 16, 32)]
        groups = self.groups(entries)
        self.assertEqual({g.sweep_axis for g in groups}, {"batch"})
        self.assertEqual(len(groups), 3)  # one line per c


class RooflineDrawingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        folder = TemporaryFolder(cls.addClassCleanup)
        entries = matmul_sweep() + [
            entry("reduce", {"n": "1048576"}, 1048576, 4194304, 2e-4, read_dominated=True),
            entry("conv", {"n": "64"}, 1e9, 1e8, 1e-2, facts={"algorithm": "IMPLICIT_PRECOMP_GEMM"}),
            entry("jitter", {"n": "4096"}, 4096, 49152, 1e-6, quality="noisy",
                  quality_reason="bimodal: 10 of 40 samples near 4.77 ms, the rest near 959 ns"),
        ]
        path = folder.write_json("run.json", document(entries))
        cls.out = folder.path / "out"
        report_cli.write_report([str(path)], str(cls.out))
        cls.root = parse_svg(cls.out / "roofline.svg")
        cls.spec = page_specs(cls.out)[0]
        cls.summary = (cls.out / "summary.md").read_text(encoding="utf-8")

    def test_titles_name_what_tells_lines_apart_and_the_key_shortens_them_alike(self):
        # conv_bf16 as the resnet50 suite runs it: one pass and layout, layers and impls vary.
        entries = [entry("conv_bf16", {"layer": layer, "pass": "fwd", "layout": "nhwc", "impl": impl, "n": str(n)},
                         1e9 * n, 1e7 * n, 1e-5 * n, plugin="conv")
                   for layer in ("conv2_1x1_64to256", "conv5_3x3_512") for impl in ("cudnn", "implicit_gemm")
                   for n in (32, 256)]
        groups = group_points(plottable_points(group_by_device([parse_run(document(entries))])[0]))
        self.assertEqual([g.title for g in groups][:2], ["conv/conv_bf16 (layer:conv2_1x1_64to256, impl:cudnn)",
                                                        "conv/conv_bf16 (layer:conv2_1x1_64to256, impl:implicit_gemm)"])
        self.assertEqual(key_names(groups, 70)[1], "conv_bf16 (layer:conv2_1x1_64to256, impl:implicit_gemm) (n sweep, 2)")
        short = key_names(groups, 52)
        self.assertEqual(short[1], "conv_bf16 (conv2_1x1_64to256, implicit_gemm) (n x2)")
        self.assertEqual(short[0], "conv_bf16 (conv2_1x1_64to256, cudnn) (n x2)")  # alike, though it would fit longer
        self.assertTrue(all(len(name) <= 20 and "…" in name for name in key_names(groups, 20)))

    def test_the_key_keeps_the_plugin_where_two_plugins_share_a_case_name(self):
        entries = [entry("add", {"n": str(n)}, n, 12 * n, 1e-6 * n, plugin=plugin)
                   for plugin in ("micro", "cpu") for n in (1024, 4096)]
        groups = group_points(plottable_points(group_by_device([parse_run(document(entries))])[0]))
        self.assertEqual(key_names(groups, 70), ["micro/add (n sweep, 2)", "cpu/add (n sweep, 2)"])
        # Where only the short forms would fit, both would read "add (...)": the plugin stays, cut in the middle.
        names = key_names(groups, 16)
        self.assertEqual(len(set(names)), 2, names)
        self.assertTrue(all(len(name) <= 16 for name in names), names)

    def test_the_sweep_is_joined_and_its_ridge_crossing_marked(self):
        [sweep] = traces(self.spec, "lab/matmul")
        self.assertEqual(sweep["mode"], "lines+markers")
        self.assertEqual(len(sweep["x"]), 4)
        [crossing] = traces(self.spec, "crosses its ridge")
        self.assertIn("crosses the fp32 ridge (5 FLOP/B) between n:16 and n:64", crossing["hovertext"][0])
        self.assertEqual(len(with_id(self.root, "ridge-crossing")), 1)

    def test_the_read_roof_is_drawn_beside_the_memory_roof(self):
        self.assertEqual(len(with_id(self.root, "memory-roof")), 1)
        self.assertEqual(len(with_id(self.root, "read-memory-roof")), 1)
        self.assertIn("read-streaming roof 26 GB/s", texts(self.root))
        self.assertEqual(len(traces(self.spec, "read-streaming roof 26 GB/s")), 1)
        self.assertIn("| read-streaming bandwidth | 26 GB/s |", self.summary)
        self.assertIn("| — (read roof) | pass |", self.summary)

    def test_hover_names_benchmark_time_noise_and_roof(self):
        tips = [hover for _, hover in plotted_points(self.spec)]
        self.assertEqual(len(tips), 7)
        conv = next(t for t in tips if t.startswith("lab/conv/n:64"))
        self.assertIn("time 10 ms, noise 1 %", conv)
        self.assertIn("% of roof", conv)
        self.assertIn("algorithm: IMPLICIT_PRECOMP_GEMM", conv)
        self.assertIn("(NOISY)", next(t for t in tips if t.startswith("lab/jitter")))

    def test_facts_and_the_noisy_flag_are_in_the_summary_table(self):
        self.assertIn("| facts |", self.summary)
        self.assertIn("algorithm=IMPLICIT_PRECOMP_GEMM", self.summary)
        self.assertIn("NOISY", self.summary)
        self.assertIn("| pass, noisy |", self.summary)
        self.assertIn("jitter/n:4096: bimodal: 10 of 40 samples near 4.77 ms", self.summary)

    def test_every_plotted_trace_carries_its_plugin_for_the_filter(self):
        plotted = [trace for trace in self.spec["data"] if "hovertext" in trace]
        self.assertTrue(plotted)
        self.assertEqual({trace.get("meta") for trace in plotted}, {"lab"})


class PlacedMemoryRoofTest(unittest.TestCase):
    """The memory roof the host names (roofbench.memory_roof) is the one the report speaks of."""

    def benchmarks(self, entries):
        device = group_by_device([parse_run(document(entries))])[0]
        return device, {b.case: b for b in device.benchmarks.values()}

    def test_the_named_roof_wins_and_results_without_it_keep_the_read_dominated_rule(self):
        _, named = self.benchmarks([
            entry("hot", {"n": "1"}, 1e6, 1e6, 1e-5, memory_roof="cache", memory_roof_Bps=2e11, cache_resident=True),
            entry("add", {"n": "1"}, 1e6, 12e6, 1e-3, memory_roof="dram mixed 67% read", memory_roof_Bps=2.2e10),
            entry("decode", {"n": "1"}, 1e6, 1e6, 1e-4, read_dominated=True),
            entry("copy", {"n": "1"}, 1e6, 1e6, 1e-4)])
        self.assertEqual((named["hot"].memory_roof, named["hot"].roof_note, named["hot"].memory_roof_Bps),
                         ("cache", "cache", 2e11))
        self.assertEqual(named["add"].roof_note, "mixed 67% read")
        self.assertEqual((named["decode"].memory_roof, named["decode"].roof_note), ("dram read", "read"))
        self.assertEqual((named["copy"].memory_roof, named["copy"].roof_note, named["copy"].memory_roof_Bps),
                         ("dram copy", "", None))

    def test_hover_names_the_cache_roof_not_the_dram_one(self):
        device, _ = self.benchmarks([
            entry("hot", {"n": "1"}, 1e6, 1e6, 1e-5, memory_roof="cache", memory_roof_Bps=2e11, cache_resident=True)])
        [point] = plottable_points(device)
        self.assertIn("of roof (the cache roof)", point_hover(point))
        self.assertEqual(roofline_of(device).memory_roofs(), [(BANDWIDTH, "memory"), (READ_BANDWIDTH, "read-streaming"),
                                                              (2e11, "cache")])

    def test_the_cache_roof_is_drawn_only_when_a_point_sits_under_it(self):
        device, _ = self.benchmarks([entry("copy", {"n": "1"}, 1e6, 1e6, 1e-4, memory_roof="dram copy",
                                           memory_roof_Bps=BANDWIDTH)])
        self.assertEqual([kind for _, kind in roofline_of(device).memory_roofs()], ["memory", "read-streaming"])

    def test_a_sweep_in_cache_crosses_the_ridge_of_the_cache_roof(self):
        sweep = [entry("matmul", {"n": str(n)}, 2 * n**3, 12 * n * n, 1e-6 * n, memory_roof="cache",
                       memory_roof_Bps=1e11) for n in (1, 4, 16, 64)]
        device, _ = self.benchmarks(sweep)
        groups = group_points(plottable_points(device))
        [crossing] = ridge_crossings(groups, roofline_of(device).roofs, BANDWIDTH, READ_BANDWIDTH)
        self.assertIn("ridge (1 FLOP/B)", crossing.text)  # 1e11 FLOP/s over 1e11 B/s, not 5 FLOP/B


class MeasuredPointTest(unittest.TestCase):
    """roofbench --counters: each benchmark's point by the hardware's counters beside its modelled one."""

    def test_the_counted_point_is_drawn_beside_the_modelled_one(self):
        folder = TemporaryFolder(self.addCleanup)
        gemv = entry("gemv", {"n": "4096"}, 2 * 4096**2, 2 * 4096**2, 1e-4)  # modelled AI 1; its weights read from L2
        gemv.update({"measured_ai": 10.0, "measured_flops": 2 * 4096**2, "measured_bytes_ratio": 0.1,
                     "measured_flops_ratio": 1.0})
        path = folder.write_json("run.json", document([gemv, entry("add", {"n": "1024"}, 1024, 12288, 1e-6)]))
        out = folder.path / "out"
        report_cli.write_report([str(path)], str(out))
        root = parse_svg(out / "roofline.svg")
        self.assertEqual(len(with_id(root, "measured-point")), 1)  # the add has no counters: no measured point
        self.assertEqual(len(with_id(root, "measured-link")), 1)
        self.assertIn("○ measured (hardware counters)", texts(root))
        [measured] = traces(page_specs(out)[0], "measured (hardware counters)")
        self.assertEqual(measured["x"], [10.0])
        self.assertAlmostEqual(measured["y"][0], 2 * 4096**2 / 1e-4)
        self.assertIn("DRAM bytes 0.1x the model, FLOPs 1x the model", measured["hovertext"][0])


def suite_of(cases, sizes):
    """cases x sizes benchmarks over nine plugins and four precisions."""
    precisions = ("fp32", "bf16", "fp16", "fp8")
    return [entry(f"case{case}", {"n": str(n)}, 2.0 * n**3 * (1 + case % 7), 12.0 * n * n,
                  1e-6 * n * (1 + case % 13), plugin=f"p{case % 9}", precision=precisions[case % 4])
            for case in range(cases) for n in sizes]


class ScaleTest(unittest.TestCase):
    def test_ten_thousand_benchmarks_in_under_ten_seconds(self):
        folder = TemporaryFolder(self.addCleanup)
        entries = suite_of(1000, (1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
        self.assertEqual(len(entries), 10000)
        path = folder.write_json("big.json", document(entries))
        start, cpu_start = time.perf_counter(), sum(os.times()[:2])
        report_cli.write_report([str(path)], str(folder.path / "out"))
        elapsed, cpu = time.perf_counter() - start, sum(os.times()[:2]) - cpu_start
        # The bound on the CPU time the report takes: on a shared machine the wall time also
        # counts everyone else's work, so it gets room for that.
        self.assertLess(cpu, 10.0, f"{cpu:.1f} s of CPU, {elapsed:.1f} s of wall time")
        spec = page_specs(folder.path / "out")[0]
        self.assertEqual(len(plotted_points(spec)), 10000)
        # A thousand cases: one trace per plugin and precision, the legend short.
        self.assertLessEqual(len([t for t in spec["data"] if t.get("meta")]), 9 * 4 + 9)

    def test_the_transformer_suites_size_reads_as_a_legend_of_cases(self):
        folder = TemporaryFolder(self.addCleanup)
        # 200 benchmarks in 54 groups, as the suite has: 38 cases at four sizes, 16 at three.
        entries = [e for e in suite_of(54, (64, 128, 256, 512)) if int(e["roofbench"]["case"][4:]) < 38
                   or e["roofbench"]["params"]["n"] != "512"]
        self.assertEqual(len(entries), 200)
        out = folder.path / "out"
        report_cli.write_report([str(folder.write_json("suite.json", document(entries)))], str(out))
        spec = page_specs(out)[0]
        groups = [trace for trace in spec["data"] if trace.get("meta") and "crosses" not in trace["name"]]
        self.assertEqual(len(groups), 54)
        self.assertEqual(len({trace["name"] for trace in groups}), 54)
        root = parse_svg(out / "roofline.svg")
        self.assertEqual(len(with_id(root, "group")), 54)
        legend = texts(root)
        self.assertTrue(all(f"p{case % 9}/case{case}" in " ".join(legend) for case in range(54)))
        # Roofs only for the precisions used: the fixture's ceilings have fp32 alone.
        self.assertEqual(len(with_id(root, "compute-roof")), 1)


if __name__ == "__main__":
    unittest.main()
