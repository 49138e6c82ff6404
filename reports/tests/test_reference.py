import contextlib
import io
import shutil
import unittest

from roofbench_reports import reference

from .helpers import CPU_RUN, FIXTURES, GPU_RUN, TemporaryFolder, load_fixture

TORCH_LADDER = FIXTURES / "torch_gpt_ladder.json"


def run_main(arguments):
    """reference.main's exit code and what it wrote on stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = reference.main([str(argument) for argument in arguments])
    return code, stdout.getvalue(), stderr.getvalue()


class PageTest(unittest.TestCase):
    def setUp(self):
        self.folder = TemporaryFolder(self.addCleanup)
        for path in (TORCH_LADDER, GPU_RUN, CPU_RUN):  # PyTorch's file first: the page orders them itself
            shutil.copy(path, self.folder.path / path.name)
        self.page = reference.reference_page([str(self.folder.path)])

    def test_one_table_per_file_each_headed_by_date_commit_device_and_driver(self):
        sections = self.page.split("\n## ")[1:]
        self.assertEqual(len(sections), 3)
        for section in sections:
            for fact in ("date ", "commit ", "device ", "driver ", "| benchmark | time | rate | % of roof | gate |"):
                self.assertIn(fact, section)

    def test_pytorch_follows_roofbench_of_the_same_device(self):
        roofbench = self.page.index("NVIDIA H200: suite gpu-smoke, roofbench")
        pytorch = self.page.index("NVIDIA H200: suite torch_gpt_ladder, PyTorch 2.11, CUDA 13.0")
        self.assertLess(roofbench, pytorch)
        self.assertNotIn("\n## NVIDIA H200", self.page[pytorch:])

    def test_ladder_rungs_side_by_side(self):
        ladder = self.page[self.page.index("### NVIDIA H200: the gpt ladder, every series"):]
        self.assertIn("| rung | roofbench | PyTorch | roofbench / best other |", ladder)
        self.assertIn("| R1 | 382 ktokens/s (R1_fused, batch:64) | 749 ktokens/s (R1_compile, batch:64) | 0.51x |",
                      ladder)
        self.assertIn("| R3 | — | 2.26 Mtokens/s (R3_batch, batch:512) | — |", ladder)

    def test_a_rung_shows_its_mean_clock_where_recorded(self):
        document = load_fixture(TORCH_LADDER)
        for entry in document["benchmarks"]:
            if entry["name"].startswith("torch/R3_batch/"):
                entry["sm_clock_mhz"] = 1793.4
        (self.folder.path / TORCH_LADDER.name).unlink()
        self.folder.write_json("torch_clocked.json", document)
        page = reference.reference_page([str(self.folder.path)])
        ladder = page[page.index("### NVIDIA H200: the gpt ladder, every series"):]
        self.assertIn("| R3 | — | 2.26 Mtokens/s (R3_batch, batch:512, 1793 MHz) | — |", ladder)
        self.assertIn("| R1 | 382 ktokens/s (R1_fused, batch:64) |", ladder)  # none recorded: none shown

    def test_a_named_series_is_a_column_and_the_ratio_is_to_the_fastest_other(self):
        document = load_fixture(TORCH_LADDER)
        for entry in document["benchmarks"]:
            if "reduce_overhead" in entry["name"]:
                entry["roofbench"].update(ladder="gpt", series="reduce-overhead")
        (self.folder.path / TORCH_LADDER.name).unlink()
        self.folder.write_json("torch_named_series.json", document)
        page = reference.reference_page([str(self.folder.path)])
        ladder = page[page.index("### NVIDIA H200: the gpt ladder, every series"):]
        self.assertIn("| rung | roofbench | PyTorch | PyTorch reduce-overhead | roofbench / best other |", ladder)
        # 382k against reduce-overhead's 967k, the faster of PyTorch's two R1s.
        self.assertIn("| R1 | 382 ktokens/s (R1_fused, batch:64) | 749 ktokens/s (R1_compile, batch:64) | "
                      "967 ktokens/s (R1_compile_reduce_overhead, batch:64) | 0.39x |", ladder)

    def test_headline_figures(self):
        self.assertIn("| micro/matmul/n:8192/dtype:bf16 | 1.63 ms | 675 TFLOP/s | 90.1 % | pass |", self.page)
        self.assertIn("| torch/R3_batch/batch:512 | 29 ms | 2.26 Mtokens/s | — | off |", self.page)

    def test_what_the_file_does_not_record_is_said(self):
        self.assertIn("commit not recorded", self.page)
        self.assertIn("driver not recorded", self.page)

    def test_commit_and_driver_when_recorded(self):
        document = load_fixture(GPU_RUN)
        document["context"]["roofbench"].update(commit="v0.1-12-gabc1234")
        document["context"]["roofbench"]["device"]["driver"] = "580.159.04"
        path = self.folder.write_json("recorded.json", document)
        page = reference.reference_page([str(path)])
        self.assertIn("commit v0.1-12-gabc1234", page)
        self.assertIn("driver 580.159.04", page)

    def test_no_files(self):
        empty = TemporaryFolder(self.addCleanup)
        self.assertIn("No results files yet.", reference.reference_page([str(empty.path)]))


class CommandTest(unittest.TestCase):
    def setUp(self):
        self.folder = TemporaryFolder(self.addCleanup)
        self.page = self.folder.path / "page.md"

    def test_written_page_passes_its_check_and_an_edited_one_fails(self):
        self.assertEqual(run_main([GPU_RUN, "-o", self.page])[0], 0)
        self.assertEqual(run_main([GPU_RUN, "--check", self.page])[0], 0)
        self.page.write_text(self.page.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
        code, _, error = run_main([GPU_RUN, "--check", self.page])
        self.assertEqual(code, 1)
        self.assertIn("differs", error)
        self.assertIn(reference.REGENERATE_COMMAND, error)

    def test_a_missing_page_differs(self):
        self.assertEqual(run_main([GPU_RUN, "--check", self.folder.path / "none.md"])[0], 1)

    def test_bad_inputs_exit_2_with_one_line(self):
        (self.folder.path / "broken.json").write_text("{not json", encoding="utf-8")
        for arguments in ([self.folder.path / "missing"], [self.folder.path / "broken.json"],
                          [GPU_RUN, "-o", self.folder.path / "no" / "such" / "page.md"]):
            with self.subTest(arguments=arguments):
                code, _, error = run_main(arguments)
                self.assertEqual(code, 2)
                self.assertEqual(len(error.strip().splitlines()), 1)
                self.assertNotIn("Traceback", error)


if __name__ == "__main__":
    unittest.main()
