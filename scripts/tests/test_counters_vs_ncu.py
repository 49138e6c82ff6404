"""scripts/counters_vs_ncu.py's bookkeeping, on made-up files: the metric list read from the host's source,
kernel names matched across the demangler's and ncu's spellings, ncu's CSV averaged per launch, and both
sides weighted per run. No GPU or Nsight Compute needed.
Run from this folder: python3 -B -m unittest -v test_counters_vs_ncu"""
import json
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import counters_vs_ncu as cv  # noqa: E402


class CountersVsNcuTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.addCleanup(self.folder.cleanup)
        self.path = pathlib.Path(self.folder.name)

    def test_the_metrics_are_the_hosts_with_fma_counted_twice(self):
        fields = cv.metrics()
        names = [m for m, _, _ in fields]
        self.assertIn("dram__bytes_read.sum", names)
        self.assertIn("sm__ops_path_tensor_src_bf16_dst_fp32.sum", names)
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual({w for m, _, w in fields if "fma_pred_on" in m}, {2.0})
        self.assertEqual({w for m, _, w in fields if "fma_pred_on" not in m}, {1.0})

    def test_base_names_match_across_spellings(self):
        self.assertEqual(cv.base_name("void copy_kernel<float>(float const*, float*, unsigned long)"), "copy_kernel")
        self.assertEqual(cv.base_name("void copy_kernel<float>(const float *, float *, unsigned long)"), "copy_kernel")
        self.assertEqual(cv.base_name("void (anonymous namespace)::gemv<128>(const bf16 *)"), "gemv")
        self.assertEqual(cv.base_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel"), "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel")

    def test_both_sides_per_run_over_the_kernels_both_saw(self):
        results = self.path / "latest.json"
        results.write_text(json.dumps({"benchmarks": [{"name": "lab/step", "run_type": "iteration", "roofbench": {"counters": {
            "kernels": [{"name": "void gemm<1>(float*)", "launches_per_run": 2, "dram_read": 150, "dram_write": 50, "flops": 1000},
                        {"name": "void gemm<2>(float*)", "launches_per_run": 2, "dram_read": 200, "dram_write": 0, "flops": 1000},
                        {"name": "norm(float*)", "launches_per_run": 1, "dram_read": 10, "dram_write": 10, "flops": 0}]}}}]}))
        ours = cv.roofbench_kernels(str(results))
        self.assertEqual(ours["gemm"], ({"dram": 100, "written": 12.5, "flops": 500}, 4))  # per launch, both templates
        ncu = self.path / "ncu.csv"
        rows = ['"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
        for launch, read in ((0, 80), (1, 100)):
            rows += [f'"{launch}","gemm<1>","dram__bytes_read.sum","byte","{read}"',
                     f'"{launch}","gemm<1>","dram__bytes_write.sum","byte","10"',
                     f'"{launch}","gemm<1>","sm__sass_thread_inst_executed_op_ffma_pred_on.sum","inst","250"']
        rows.append('"2","other","dram__bytes_read.sum","byte","1,000"')
        ncu.write_text("==PROF== Connected to process\n" + "\n".join(rows) + "\n")
        theirs = cv.ncu_kernels(str(ncu), cv.metrics())
        self.assertEqual(theirs["gemm"], {"dram": 100, "written": 10, "flops": 500})
        self.assertEqual(theirs["other"]["dram"], 1000)
        rb, nc, shared = cv.per_run(ours, theirs)
        self.assertEqual(shared, 1)  # norm was not profiled by ncu: left out of both sides
        self.assertEqual(rb, {"dram": 400, "written": 50, "flops": 2000})
        self.assertEqual(nc, {"dram": 400, "written": 40, "flops": 2000})
        # A folder of an older run, one file of both kinds, is read as it is.
        self.assertEqual(cv.ncu_files(str(self.path)), [str(ncu)])
        self.assertEqual(cv.percent(101, 100), "+1.00%")

    def test_the_writes_of_every_process_are_one_line(self):
        self.assertEqual(cv.writes_line([7.63e6, 9.9e6], [10.38e6, 10.12e6]),
                         "  written by process, MB: roofbench 7.63 9.90, ncu 10.38 10.12")

    def test_the_rows_span_every_family_and_the_near_l2_rows_are_other_sizes_of_theirs(self):
        families = {name.split("/")[1].split("_")[0] for name in cv.BENCHMARKS}
        self.assertTrue({"add", "copy", "matmul", "attention", "linear", "conv", "R3"} <= families, families)
        self.assertGreaterEqual(len(cv.BENCHMARKS), 10)

        def axes(name):
            return dict(part.split(":", 1) for part in name.split("/")[2:])
        for near in cv.NEAR_L2:
            twins = [b for b in cv.BENCHMARKS
                     if b.split("/")[:2] == near.split("/")[:2] and axes(b).keys() == axes(near).keys()]
            self.assertTrue(twins, near)  # the same case, the same axes
            self.assertNotIn(near, cv.BENCHMARKS)

    def test_a_filter_that_keeps_only_near_l2_rows_still_prints_their_heading(self):
        import contextlib
        import io
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cv.main(None, str(self.path), r"conv.*n:32$")  # --table over a folder without files: "no counters"
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 3, lines)  # the columns, the heading, the row
        self.assertTrue(lines[1].startswith("near the L2"), lines)
        self.assertIn("n:32", lines[2])
        self.assertEqual(cv.folder_of("micro/copy_kernel/bytes:1073741824"), "micro_copy_kernel_bytes_1073741824")

    def test_a_benchmark_without_counters_says_why(self):
        results = self.path / "latest.json"
        results.write_text(json.dumps({"benchmarks": [{"name": "lab/x", "roofbench": {"counters": {
            "error": "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", "kernels": []}}}]}))
        self.assertEqual(cv.roofbench_kernels(str(results)), "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")
        self.assertIn("no results", cv.roofbench_kernels(str(self.path / "missing.json")))


if __name__ == "__main__":
    unittest.main()
