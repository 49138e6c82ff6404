"""scripts/like_for_like.py's table without a GPU: which roofbench benchmark each row reads, a column per
timer, roofbench's event time over its CUPTI time in %, the cold run's mode, the kernel versions the Python
timers take from the hot run's facts, and a dash where a timer gave nothing.
Run from this folder: python3 -B -m unittest -v test_like_for_like"""
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import like_for_like  # noqa: E402


def row(benchmark):
    return next(r for r in like_for_like.ROWS if r.benchmark == benchmark)


class Table(unittest.TestCase):
    def test_rows_name_the_benchmarks_the_issue_lists(self):
        names = [r.benchmark for r in like_for_like.ROWS]
        self.assertIn("micro/add_fp32_vec16/n:1048576/", names)
        self.assertIn("micro/add_fp32_scalar/n:16777216/", names)
        self.assertIn("micro/copy/bytes:67108864/", names)
        self.assertIn("transformer/linear_bf16/layer:768x3072/tokens:1/impl:gemv/", names)
        self.assertIn("transformer/attention_decode_bf16/impl:split_kv/batch:8/kv:4096/", names)
        self.assertIn("conv/conv_bf16/layer:conv2_3x3_64/pass:fwd/layout:nhwc/impl:cudnn/n:32/", names)
        self.assertEqual(len(names), 11)
        self.assertEqual(len(set(r.python for r in like_for_like.ROWS)), 11)

    def test_a_row_has_every_timer_and_the_event_over_cupti(self):
        vec16 = row("micro/add_fp32_vec16/n:1048576/")
        hot = {vec16.benchmark: {"time_median": 2.36e-6, "kernel_time": 2.30e-6}}
        cold = {vec16.benchmark: {"time_median": 5.8e-6, "kernel_time": 3.1e-6,
                                  "roofbench": {"facts": {"cold_mode": "rotate"}}}}
        python = {vec16: {"do_bench": 5.1e-6, "do_bench_cudagraph": 2.55e-6, "cudagraph 1 ms": 2.5e-6,
                          "torch.profiler CUPTI": 2.4e-6, "graph events": 2.35e-6, "graph events traced": 2.45e-6}}
        lines = like_for_like.table(like_for_like.ROWS, hot, cold, python).splitlines()
        self.assertEqual(lines[0].count("|"), len(like_for_like.COLUMNS) + 3)
        self.assertEqual(lines[2], "| add_fp32_vec16 | 1M | 2.360 | 2.300 | +2.6% | 5.800 | 3.100 | rotate | 5.100 | "
                                   "2.550 | 2.500 | 2.400 | 2.350 | 2.450 |")
        self.assertEqual(lines[3], "| add_fp32_vec16 | 4M | - | - | - | - | - | - | - | - | - | - | - | - |")
        self.assertTrue(lines[8].startswith("| copy | 16M |"))
        self.assertTrue(lines[12].startswith("| conv2_3x3_64 fwd | n32 |"))
        self.assertEqual(lines[-1], "Times in microseconds per launch.")
        with_versions = like_for_like.table(like_for_like.ROWS, hot, cold, python, "torch 2.11.0, triton 3.6.0")
        self.assertEqual(with_versions.splitlines()[-1],
                         "Times in microseconds per launch; the Python columns on torch 2.11.0, triton 3.6.0.")

    def test_the_python_timers_take_the_kernel_version_roofbench_ran(self):
        decode = {"roofbench": {"facts": {"kernel": "split_kv_v9", "splits": "16 of 256 keys"}}}
        gemv = {"roofbench": {"facts": {"kernel": "gemv_v2: about 36 KB of rows of W per block"}}}
        self.assertEqual(like_for_like.kernel_version(decode, "split_kv_", "v3"), "v9")
        self.assertEqual(like_for_like.kernel_version(gemv, "gemv_", "v1"), "v2")
        self.assertEqual(like_for_like.kernel_version(None, "gemv_", "v1"), "v1")


if __name__ == "__main__":
    unittest.main()
