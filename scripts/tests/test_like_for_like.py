"""scripts/like_for_like.py's table without a GPU: which roofbench benchmark each row reads, a column per
timer, roofbench's event time over its CUPTI time in %, and a dash where a timer gave nothing.
Run from this folder: python3 -B -m unittest -v test_like_for_like"""
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import like_for_like  # noqa: E402


class Table(unittest.TestCase):
    def test_rows_name_the_micro_benchmarks(self):
        names = [like_for_like.benchmark_name(v, n) for v, n in like_for_like.ROWS]
        self.assertIn("micro/add_fp32_vec16/n:1048576/", names)
        self.assertIn("micro/add_fp32_scalar/n:16777216/", names)
        self.assertIn("micro/copy/bytes:67108864/", names)
        self.assertEqual(len(names), 7)

    def test_a_row_has_every_timer_and_the_event_over_cupti(self):
        name = like_for_like.benchmark_name("vec16", 1 << 20)
        hot = {name: {"time_median": 2.36e-6, "kernel_time": 2.30e-6}}
        cold = {name: {"time_median": 5.8e-6}}
        python = {("vec16", 1 << 20): {"do_bench": 5.1e-6, "do_bench_cudagraph": 2.55e-6, "torch.profiler CUPTI": 2.4e-6}}
        lines = like_for_like.table(like_for_like.ROWS, hot, cold, python).splitlines()
        self.assertEqual(lines[0].count("|"), len(like_for_like.COLUMNS) + 3)
        self.assertEqual(lines[2], "| add_fp32_vec16 | 1M | 2.360 | 2.300 | +2.6% | 5.800 | 5.100 | 2.550 | 2.400 |")
        self.assertEqual(lines[3], "| add_fp32_vec16 | 4M | - | - | - | - | - | - | - |")
        self.assertTrue(lines[8].startswith("| copy | 16M |"))


if __name__ == "__main__":
    unittest.main()
