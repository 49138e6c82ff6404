"""The ladder waterfall (waterfall.py): declared order, ratios to the neighbour and to the first rung, peak
memory under each bar, negative rungs marked; and PyTorch's ladder (a file recorded in the format
scripts/torch_gpt_ladder.py writes, fixtures/torch_gpt_ladder.json) drawn beside roofbench's in one figure."""

import copy
import importlib.util
import unittest

from roofbench_reports import results, static_plots, waterfall

from .helpers import FIXTURES, GPU_RUN, REPORTS_DIR, TemporaryFolder, load_fixture
from .test_report import page_specs, parse_svg, texts, with_id, write_report

TORCH_RUN = FIXTURES / "torch_gpt_ladder.json"
SCRIPT = REPORTS_DIR.parent / "scripts" / "torch_gpt_ladder.py"

# roofbench's rungs beyond the fixture's R0 and R1: (case, batch, tokens/s, peak GiB). R4 slower than R3.
LATER_RUNGS = [("R2_bf16", 64, 2.0e6, 1.5), ("R3_batch", 512, 3.0e6, 6.0), ("R4_checkpoint", 512, 2.5e6, 2.5)]


def gpt_ladder_run():
    """gpu_run.json with the gpt ladder completed: R2 at batch 64, R3 and R4 at batch 512."""
    document = load_fixture(GPU_RUN)
    template = next(entry for entry in document["benchmarks"] if entry["name"] == "gpt/R1_fused/batch:64")
    for case, batch, rate, gib in LATER_RUNGS:
        entry = copy.deepcopy(template)
        name = f"gpt/{case}/batch:{batch}"
        entry["name"] = entry["run_name"] = name
        entry["tokens/s"] = rate
        entry["peak_mem"] = gib * 2**30
        entry["roofbench"].update(case=case, params={"batch": str(batch)}, precision="bf16")
        document["benchmarks"].append(entry)
    return document


def drawn(groups):
    """The gpt ladder's waterfall as data, and every line its static figure writes."""
    figure = waterfall.waterfall_of("gpt", groups["gpt"], "NVIDIA H200")
    svg = static_plots.svg_text(static_plots.waterfall_figure([figure]))
    return figure, svg


def feet(figure):
    return [line for bar in figure.bars for line in bar.foot]


def over(figure):
    return [line for bar in figure.bars for line in bar.labels]


def device_of(*documents):
    runs = [results.parse_run(document) for document in documents]
    devices = results.group_by_device(runs)
    assert len(devices) == 1, "the PyTorch file shares roofbench's device key"
    return devices[0]


class TorchImportTest(unittest.TestCase):
    def test_recorded_file_reads_as_results_marked_pytorch(self):
        document = load_fixture(TORCH_RUN)
        self.assertEqual(document["context"]["source"], "pytorch")
        run = results.parse_run(document, TORCH_RUN)
        self.assertEqual(run.device.name, "NVIDIA H200")
        device = device_of(document)
        names = list(device.benchmarks)
        self.assertEqual(names[0], "torch/R0_eager/batch:64")
        r2 = device.benchmarks["torch/R2_bf16_reduce_overhead/batch:64"]
        self.assertEqual(waterfall.source_of(r2), "pytorch")
        self.assertAlmostEqual(r2.counter("tokens/s"), 1.699e6, delta=1e3)
        self.assertAlmostEqual(r2.counter("peak_mem") / 2**30, 2.14, places=2)
        # The case study's rungs are on the ladder; reduce-overhead and the fp32 control sit beside it.
        ladder = [b.case for b in device.benchmarks.values() if b.ladder == "gpt"]
        self.assertEqual(ladder, ["R0_eager", "R1_compile", "R2_bf16", "R3_batch", "R4_checkpoint"])

    def test_script_writer_round_trips(self):
        spec = importlib.util.spec_from_file_location("torch_gpt_ladder", SCRIPT)
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)  # needs no PyTorch: torch is imported in main() only
        entry = script.benchmark_entry("R3_batch", "bf16", 512, [0.03, 0.029, 0.031], 9 * 2**30, 10 * 2**30,
                                       {"compile": "default"}, True)
        self.assertAlmostEqual(entry["tokens/s"], 512 * 128 / 0.03)
        self.assertEqual(entry["roofbench"]["facts"]["source"], "pytorch")
        # The plugin's training_step_work count: 3 x (L 24 C^2 + 2 C V + L 4 T C) per token, 118.05 MFLOP.
        self.assertAlmostEqual(script.step_flops(64) / (64 * 128), 3 * (6 * 24 * 512**2 + 2 * 512 * 28 + 6 * 4 * 128 * 512))
        device = {"kind": "cuda", "index": 0, "name": "NVIDIA H200", "key": "k"}
        parsed = results.parse_run(script.results_document(device, [entry], []))
        self.assertEqual(parsed.entries[0]["name"], "torch/R3_batch/batch:512")
        self.assertEqual(bytes([65, 122, 32, 10, 33]).translate(script.token_table()), bytes([0, 25, 26, 26, 27]))
        # The attention-alone entries count FLOPs as gpt/lab_attention_bf16 does (3 x 4 hd per causal pair).
        self.assertAlmostEqual(script.attention_flops(512), 3 * 4 * 512 * 8 * (128 * 129 / 2) * 64)
        attention = script.benchmark_entry("attention_sdpa_cudnn", "bf16", 512, [5e-4, 6e-4, 7e-4], 1, 1, {}, False,
                                           flops=script.attention_flops(512))
        self.assertEqual(attention["name"], "torch/attention_sdpa_cudnn/batch:512")
        self.assertAlmostEqual(attention["FLOP/s"], script.attention_flops(512) / 6e-4)
        self.assertEqual(attention["roofbench"]["ladder"], "")


class WaterfallTest(unittest.TestCase):
    def test_one_waterfall_across_points_in_declared_order(self):
        device = device_of(gpt_ladder_run())
        groups = waterfall.ladder_groups(device)
        self.assertEqual(list(groups), ["gpt"])
        self.assertEqual([b.case for b in groups["gpt"]],
                         ["R0_eager", "R1_fused", "R2_bf16", "R3_batch", "R4_checkpoint"])

    def test_ratios_memory_and_the_negative_rung(self):
        device = device_of(gpt_ladder_run())
        rungs = waterfall.rungs_of(waterfall.ladder_groups(device)["gpt"])
        labels = waterfall.ratio_labels(rungs)
        self.assertEqual(labels[0], ["baseline"])
        r0 = rungs[0].rate
        self.assertEqual(labels[3], [f"×{3.0e6 / 2.0e6:.2f} vs prev", f"×{3.0e6 / r0:.2f} vs first"])
        self.assertEqual(waterfall.negative_rungs(rungs), [False, False, False, False, True])
        figure, svg = drawn(waterfall.ladder_groups(device))
        self.assertEqual(len(figure.bars), 5)
        self.assertEqual(svg.count('id="bar"'), 5)
        self.assertEqual(over(figure).count("negative rung"), 1)
        self.assertEqual(svg.count("negative rung"), 1)
        for gib in ("1.50 GiB", "6.00 GiB", "2.50 GiB"):
            self.assertIn(gib, feet(figure))
            self.assertIn(gib, svg)

    def test_per_point_waterfalls_stay_when_a_rung_has_several_points(self):
        document = gpt_ladder_run()
        extra = copy.deepcopy(next(e for e in document["benchmarks"] if e["name"] == "gpt/R0_eager/batch:64"))
        extra["name"] = extra["run_name"] = "gpt/R0_eager/batch:512"
        extra["roofbench"]["params"] = {"batch": "512"}
        document["benchmarks"].append(extra)
        groups = waterfall.ladder_groups(device_of(document))
        self.assertEqual(set(groups), {"gpt (batch:64)", "gpt (batch:512)"})

    def test_both_ladders_in_one_waterfall(self):
        device = device_of(gpt_ladder_run(), load_fixture(TORCH_RUN))
        groups = waterfall.ladder_groups(device)
        self.assertEqual(list(groups), ["gpt"])
        series = waterfall.split_series(groups["gpt"])
        self.assertEqual([source for source, _ in series], ["", "pytorch"])
        self.assertEqual([rung.key for rung in series[1][1]], ["R0", "R1", "R2", "R3", "R4"])
        # PyTorch's R4 (checkpointing) is slower than its R3: negative in its own series too.
        self.assertEqual(waterfall.negative_rungs(series[1][1]), [False, False, False, False, True])
        figure, svg = drawn(groups)
        self.assertEqual(svg.count('id="bar"'), 10)
        self.assertEqual(over(figure).count("negative rung"), 2)
        self.assertIn("roofbench and PyTorch", figure.title)
        self.assertIn("roofbench and PyTorch", svg)
        self.assertIn("3.67 GiB", feet(figure))

    def test_a_named_series_is_a_third_set_of_bars(self):
        # What the script writes now: the reduce-overhead rungs on the ladder, in a series of
        # their own (the recorded fixture has them off the ladder).
        torch = load_fixture(TORCH_RUN)
        for entry in torch["benchmarks"]:
            if entry["name"].startswith("torch/R") and "_reduce_overhead/" in entry["name"]:
                entry["roofbench"].update(ladder="gpt", series="reduce-overhead")
        groups = waterfall.ladder_groups(device_of(gpt_ladder_run(), torch))
        self.assertEqual(list(groups), ["gpt"])
        series = waterfall.split_series(groups["gpt"])
        self.assertEqual([name for name, _ in series], ["", "pytorch", "pytorch/reduce-overhead"])
        self.assertEqual(waterfall.series_name(series[2][0]), "PyTorch reduce-overhead")
        reduce_overhead = series[2][1]
        self.assertEqual([rung.key for rung in reduce_overhead], ["R1", "R2"])  # the fixture has no R3 one
        # It has no eager rung: its ratios run from PyTorch's own R0, and none of its bars is the baseline.
        anchor = waterfall.series_anchor(series, "pytorch/reduce-overhead")
        self.assertEqual(anchor, series[1][1][0].rate)
        r1, r2 = (rung.rate for rung in reduce_overhead)
        labels = waterfall.ratio_labels(reduce_overhead, anchor)
        self.assertEqual(labels[0], [f"×{r1 / anchor:.2f} vs prev", f"×{r1 / anchor:.2f} vs first"])
        self.assertEqual(labels[1], [f"×{r2 / r1:.2f} vs prev", f"×{r2 / anchor:.2f} vs first"])
        self.assertIsNone(waterfall.series_anchor(series, "pytorch"))
        ro_count = len(reduce_overhead)
        figure, svg = drawn(groups)
        self.assertEqual(svg.count('id="bar"'), 10 + ro_count)
        self.assertIn("roofbench, PyTorch and PyTorch reduce-overhead", figure.title)
        self.assertEqual(feet(figure).count("PyTorch reduce-overhead"), ro_count)
        self.assertEqual(over(figure).count("baseline"), 2)  # roofbench's R0 and PyTorch's
        self.assertEqual(sum(bar.baseline for bar in figure.bars), 2)

    def test_energy_per_run_goes_under_the_bars_that_have_it(self):
        mine, torch = gpt_ladder_run(), load_fixture(TORCH_RUN)
        for entry in mine["benchmarks"]:
            if entry["name"].startswith("gpt/R3_batch/"):
                entry["energy_per_run"] = 15.07
        for entry in torch["benchmarks"]:
            if "R3_batch" in entry["name"]:
                entry["energy_per_run"] = 17.88
        groups = waterfall.ladder_groups(device_of(mine, torch))
        figure, svg = drawn(groups)
        self.assertEqual(len([line for line in feet(figure) if line.endswith("J/run")]), 2)
        self.assertIn("15.1 J/run", feet(figure))
        self.assertIn("17.9 J/run", feet(figure))
        self.assertIn("15.1 J/run", svg)
        self.assertIn("and energy per run", figure.subtitle)
        self.assertEqual(len([line for line in feet(figure) if line.endswith("GiB")]), 10)
        plain, plain_svg = drawn(waterfall.ladder_groups(device_of(gpt_ladder_run())))
        self.assertNotIn("energy", plain.subtitle)
        self.assertNotIn("J/run", plain_svg)

    def test_a_bars_hover_names_its_mean_clock_where_recorded(self):
        mine, torch = gpt_ladder_run(), load_fixture(TORCH_RUN)
        for entry in mine["benchmarks"]:
            if entry["name"].startswith("gpt/R3_batch/"):
                entry["sm_clock_mhz"] = 1495.2
        figure, _ = drawn(waterfall.ladder_groups(device_of(mine, torch)))
        hovers = [bar.hover(figure.counter) for bar in figure.bars]
        self.assertEqual([text for text in hovers if "MHz" in text and "gpt/R3_batch/" not in text], [])
        self.assertTrue(any(text.endswith("mean SM clock 1495 MHz") for text in hovers), hovers)

    def test_the_other_series_follows_the_declared_order_whatever_order_it_ran_in(self):
        torch = load_fixture(TORCH_RUN)
        torch["benchmarks"].reverse()  # as when the script is given --rungs R4_checkpoint,...,R0_eager
        groups = waterfall.ladder_groups(device_of(gpt_ladder_run(), torch))
        series = waterfall.split_series(groups["gpt"])
        self.assertEqual([rung.key for rung in series[1][1]], ["R0", "R1", "R2", "R3", "R4"])
        self.assertEqual(waterfall.ratio_labels(series[1][1])[0], ["baseline"])

    def test_report_draws_both_ladders(self):
        folder = TemporaryFolder(self.addCleanup)
        ours = folder.write_json("gpt.json", gpt_ladder_run())
        torch = folder.write_json("torch.json", load_fixture(TORCH_RUN))
        out = write_report(self, ours, torch)
        root = parse_svg(out / "waterfall.svg")
        self.assertEqual(len(with_id(root, "bar")), 10)
        labels = texts(root)
        self.assertIn("baseline", labels)
        self.assertIn("R4_checkpoint", labels)
        # The page's waterfall: a trace per series, each bar's foot under it and its ratios over it.
        roofbench, pytorch = page_specs(out)[1]["data"]
        self.assertEqual((roofbench["name"], pytorch["name"]), ("roofbench", "PyTorch"))
        self.assertEqual(len(roofbench["y"]) + len(pytorch["y"]), 10)
        self.assertTrue(roofbench["x"][1][0].startswith("roofbench<br>"))
        self.assertIn("vs prev", roofbench["text"][1])


if __name__ == "__main__":
    unittest.main()
