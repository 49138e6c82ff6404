import contextlib
import io
import json
import re
import unittest
import xml.etree.ElementTree as ElementTree

from roofbench_reports import report_cli

from .helpers import CPU_RUN, GPU_RUN, TemporaryFolder, load_fixture

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
CPU_TIMED_BENCHMARKS = 11  # 12 in the fixture, one failed its gate and has no counters


def write_report(test_case, *paths):
    folder = TemporaryFolder(test_case.addCleanup)
    with contextlib.redirect_stdout(io.StringIO()):
        code = report_cli.main([str(path) for path in paths] + ["-o", str(folder.path / "out")])
    test_case.assertEqual(code, 0)
    return folder.path / "out"


def parse_svg(path):
    return ElementTree.parse(path).getroot()


def with_id(root, gid):
    """The elements matplotlib wrote for the artists given this gid."""
    return [e for e in root.iter() if e.get("id") == gid]


def texts(root):
    """Every text of the SVG, a line each."""
    return [line for e in root.iter(f"{{{SVG_NAMESPACE}}}text") for line in "".join(e.itertext()).splitlines()]


def page_specs(out):
    """The Plotly figure specs index.html draws, in page order."""
    page = (out / "index.html").read_text(encoding="utf-8")
    blocks = re.findall(r'<script type="application/json" id="figure-spec-\d+">(.*?)</script>', page, flags=re.S)
    return [json.loads(block) for block in blocks]


def plotted_points(spec):
    """(trace name, hover text) of every benchmark point in a roofline spec."""
    return [(trace["name"], hover) for trace in spec["data"] if trace.get("meta") and "sweep crosses" not in trace["name"]
            for hover in trace["hovertext"]]


class ReportFilesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = TemporaryFolder(cls.addClassCleanup)
        with contextlib.redirect_stdout(io.StringIO()):
            report_cli.main([str(GPU_RUN), "-o", str(cls.folder.path)])
        cls.out = cls.folder.path

    def test_all_four_files(self):
        for name in ("summary.md", "roofline.svg", "waterfall.svg", "index.html"):
            self.assertGreater((self.out / name).stat().st_size, 500, name)

    def test_roofline_elements(self):
        root = parse_svg(self.out / "roofline.svg")
        # Only the precisions the points use: fp32, tf32, bf16 = fp16 (merged), fp8; not fp64.
        self.assertEqual(len(with_id(root, "compute-roof")), 4)
        self.assertEqual(len(with_id(root, "ridge")), 4)
        self.assertEqual(len(with_id(root, "memory-roof")), 1)
        self.assertEqual(len(with_id(root, "group")), 7)  # 8 cases, copy has no FLOPs
        labels = texts(root)
        self.assertIn("arithmetic intensity (FLOP/byte)", labels)
        self.assertIn("performance (FLOP/s)", labels)
        for tick in ("1 T", "1 P", "0.1", "1", "10", "1000"):
            self.assertIn(tick, labels)
        self.assertIn("bf16, fp16 750 TFLOP/s, ridge 183 FLOP/B", labels)
        self.assertIn("memory roof 4.1 TB/s", labels)
        self.assertFalse([label for label in labels if "fp64" in label], labels)
        self.assertIn("gpt/R1_fused (batch:64)", labels)  # the legend names every case

    def test_the_page_plots_the_same_with_hover(self):
        roofline = page_specs(self.out)[0]
        points = plotted_points(roofline)
        self.assertEqual(len(points), 7)
        names = [trace["name"] for trace in roofline["data"]]
        self.assertIn("memory roof 4.1 TB/s", names)
        self.assertIn("bf16, fp16 750 TFLOP/s, ridge 183 FLOP/B", names)
        self.assertFalse([name for name in names if "fp64" in name])
        hover = next(text for name, text in points if name.startswith("gpt/R1_fused"))
        self.assertTrue(hover.startswith("gpt/R1_fused/batch:64<br>time 172 ms"), hover)

    def test_waterfall_elements(self):
        root = parse_svg(self.out / "waterfall.svg")
        self.assertEqual(len(with_id(root, "bar")), 2)
        labels = texts(root)
        self.assertIn("tokens/s", labels)
        self.assertIn("baseline", labels)
        ratios = [label for label in labels if label.startswith("×")]
        self.assertEqual(len(ratios), 2)
        self.assertEqual(ratios[0], ratios[1].replace("first", "prev"))  # second rung: prev is the first
        [bars] = page_specs(self.out)[1]["data"]
        self.assertEqual(bars["text"][0], "160 k<br>baseline")

    def test_summary_tables(self):
        summary = (self.out / "summary.md").read_text(encoding="utf-8")
        self.assertIn("## NVIDIA H200 (cuda)", summary)
        self.assertIn("| memory bandwidth | 4.1 TB/s | 4.8 TB/s | 85.4 % |", summary)
        self.assertIn("### Plugin micro", summary)
        self.assertIn("### Plugin gpt", summary)
        self.assertIn("| benchmark | time | rate | noise | FLOP/s | B/s | AI | % of roof | bound | gate |", summary)
        # The headline rate, as the console shows it.
        self.assertRegex(summary, r"\| R0_eager/batch:64 \| \d+ ms \| 160 ktokens/s \|")

    def test_html_is_self_contained(self):
        page = (self.out / "index.html").read_text(encoding="utf-8")
        self.assertEqual(len(page_specs(self.out)), 2)  # the roofline and the waterfall
        self.assertNotRegex(page, r"<(script|img|link|iframe)[^>]*\s(src|href)\s*=")
        self.assertEqual(page.count("<script>"), 2)  # plotly.js and the page's own, both inline
        self.assertIn("plotly.js v", page)
        self.assertIn("<table>", page)


class ReportContentTest(unittest.TestCase):
    def test_no_ladder_no_waterfall(self):
        out = write_report(self, CPU_RUN)
        self.assertFalse((out / "waterfall.svg").exists())
        self.assertTrue((out / "index.html").exists())
        self.assertEqual(len(with_id(parse_svg(out / "roofline.svg"), "group")), 10)  # one per case and point
        self.assertEqual(len(plotted_points(page_specs(out)[0])), CPU_TIMED_BENCHMARKS)

    def test_errors_load_failures_and_not_run_are_listed(self):
        summary = (write_report(self, CPU_RUN) / "summary.md").read_text(encoding="utf-8")
        self.assertRegex(summary, r"\| layernorm/rows:4096/cols:1024 \| — \|.*\| FAIL \|")
        self.assertIn("- layernorm/rows:4096/cols:1024 (fail): gate failed: relative L2 error", summary)
        self.assertLess(summary.index("## Load failures"), summary.index("roofbench-broken.so"))
        self.assertIn("micro/matmul_bf16: needs a CUDA GPU; none found", summary)

    def test_several_devices_get_one_section_and_one_plot_each(self):
        out = write_report(self, CPU_RUN, GPU_RUN, CPU_RUN)
        summary = (out / "summary.md").read_text(encoding="utf-8")
        self.assertEqual(len(re.findall(r"^## .* \((cpu|cuda)\)$", summary, flags=re.M)), 2)
        self.assertIn("(median of 2 runs)", summary)
        root = parse_svg(out / "roofline.svg")
        self.assertEqual(len(with_id(root, "memory-roof")), 2)  # a panel each
        self.assertEqual(sum(len(plotted_points(spec)) for spec in page_specs(out) if "Roofline" in
                             spec["layout"]["title"]["text"]), CPU_TIMED_BENCHMARKS + 7)

    def test_incomplete_run_is_flagged(self):
        folder = TemporaryFolder(self.addCleanup)
        document = load_fixture(CPU_RUN)
        document["context"]["roofbench"]["complete"] = False
        summary = (write_report(self, folder.write_json("partial.json", document)) / "summary.md").read_text(
            encoding="utf-8")
        self.assertIn("partial.json is incomplete", summary)

    def test_energy_gets_a_column_where_a_plugin_has_it(self):
        folder = TemporaryFolder(self.addCleanup)
        document = load_fixture(GPU_RUN)
        for entry in document["benchmarks"]:
            if entry["name"].startswith("gpt/R1_fused"):
                entry.update({"energy_per_run": 4.2, "power": 688.4, "energy_window_s": 0.9})
        summary = (write_report(self, folder.write_json("energy.json", document)) / "summary.md").read_text(
            encoding="utf-8")
        gpt = summary[summary.index("### Plugin gpt"):]
        self.assertIn("| gate | energy / run |", gpt)
        self.assertRegex(gpt, r"\| R1_fused/batch:64 \|.*\| 4\.2 J at 688 W \|")
        micro = summary[summary.index("### Plugin micro"):summary.index("### Plugin gpt")]
        self.assertNotIn("energy / run", micro)

    def test_long_facts_fold_on_the_page(self):
        folder = TemporaryFolder(self.addCleanup)
        document = load_fixture(GPU_RUN)
        shapes = "; ".join(f"m {m} n 65536 k 512 TN bf16->bf16: algo 66, tile 29" for m in (512, 1536, 2048))
        for entry in document["benchmarks"]:
            if entry["name"].startswith("gpt/R1_fused"):
                entry["roofbench"]["facts"] = {"matmul_algorithms": shapes}
        out = write_report(self, folder.write_json("facts.json", document))
        page = (out / "index.html").read_text(encoding="utf-8")
        self.assertIn("<td><details><summary>matmul_algorithms=m 512 n 65536", page)
        self.assertIn("<br>m 1536 n 65536 k 512 TN bf16-&gt;bf16: algo 66, tile 29<br>", page)
        self.assertIn(shapes, (out / "summary.md").read_text(encoding="utf-8"))  # Markdown keeps it whole

    def test_data_in_cache_names_the_cache_the_device_has(self):
        folder = TemporaryFolder(self.addCleanup)
        for fixture, level, expected in ((CPU_RUN, None, "last-level cache"), (CPU_RUN, 3, "L3"),
                                         (GPU_RUN, None, "L2")):
            document = load_fixture(fixture)
            if level:
                document["context"]["roofbench"]["device"]["llc_level"] = level
            entry = next(e for e in document["benchmarks"] if not e.get("error_occurred"))
            entry["roofbench"]["cache_resident"] = True
            summary = (write_report(self, folder.write_json("cache.json", document)) / "summary.md").read_text(
                encoding="utf-8")
            with self.subTest(fixture=fixture.name, level=level):
                self.assertIn(f"(data in {expected})", summary)
                self.assertEqual(summary.count("(data in "), 1)

    def test_a_corrupt_counter_leaves_its_point_out(self):
        folder = TemporaryFolder(self.addCleanup)
        document = load_fixture(GPU_RUN)
        document["benchmarks"][5]["AI"] = 1e308
        out = write_report(self, folder.write_json("corrupt.json", document))
        [roofline] = [spec for spec in page_specs(out) if "Roofline" in spec["layout"]["title"]["text"]]
        self.assertEqual(len(plotted_points(roofline)), 6)
        self.assertIn("2 without a plottable FLOP/s or intensity left out", roofline["layout"]["title"]["text"])

    def test_bad_input_exits_2_with_one_line(self):
        folder = TemporaryFolder(self.addCleanup)
        nameless, negative, zero, huge = (load_fixture(GPU_RUN) for _ in range(4))
        del nameless["benchmarks"][1]["name"]
        negative["benchmarks"][1]["real_time"] = -1
        zero["benchmarks"][1].update(real_time=0, time_median=0)
        huge["context"]["roofbench"]["ceilings"]["measured"]["flops"]["fp32"] = 1e308
        (folder.path / "empty.json").write_text("", encoding="utf-8")
        cases = {
            "missing": (folder.path / "missing.json", "no such file"),
            "empty": (folder.path / "empty.json", "not JSON"),
            "nameless": (folder.write_json("nameless.json", nameless), "benchmark entry 1 has no name"),
            "negative": (folder.write_json("negative.json", negative), "micro/scale/n:268435456: real_time is -1"),
            "zero": (folder.write_json("zero.json", zero), "micro/scale/n:268435456: real_time is 0"),
            "huge ceiling": (folder.write_json("huge.json", huge), "ceiling flops.fp32 is 1e+308"),
        }
        for label, (path, message) in cases.items():
            with self.subTest(label):
                error = io.StringIO()
                with contextlib.redirect_stderr(error):
                    code = report_cli.main([str(path), "-o", str(folder.path / "out")])
                self.assertEqual(code, 2)
                self.assertIn(message, error.getvalue())
                self.assertIn(str(path), error.getvalue())
                self.assertEqual(error.getvalue().count("\n"), 1)


if __name__ == "__main__":
    unittest.main()
