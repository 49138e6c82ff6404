"""Scales, tick choice and label placement: the parts that keep plots readable."""

import unittest

from roofbench_reports.labels import Box, LabelPlacer, around_point, spread, text_box, truncate, truncate_middle
from roofbench_reports.scales import LinearScale, LogScale, nice_step, nice_ticks_from_zero


class LogScaleTest(unittest.TestCase):
    def test_covers_whole_decades(self):
        scale = LogScale.covering([0.083, 171, None, -1], 0, 500)
        self.assertEqual((scale.lowest, scale.highest), (0.01, 1000))
        self.assertEqual(scale.decades(), [0.01, 0.1, 1, 10, 100, 1000])
        self.assertAlmostEqual(scale(0.01), 0)
        self.assertAlmostEqual(scale(1), 200)
        self.assertAlmostEqual(scale(1000), 500)

    def test_exact_decades_are_not_widened(self):
        scale = LogScale.covering([1e9, 1e12], 0, 1)
        self.assertEqual((scale.lowest_exponent, scale.highest_exponent), (9, 12))

    def test_single_value_still_spans_a_decade(self):
        scale = LogScale.covering([5.0], 0, 1)
        self.assertEqual((scale.lowest, scale.highest), (1, 10))

    def test_minor_ticks(self):
        self.assertEqual(LogScale(0, 1, 0, 1).minor_ticks(), [2, 3, 4, 5, 6, 7, 8, 9])


class LinearScaleTest(unittest.TestCase):
    def test_inverted_pixels(self):
        scale = LinearScale(0, 100, 300, 100)
        self.assertEqual(scale(0), 300)
        self.assertEqual(scale(50), 200)

    def test_nice_ticks(self):
        self.assertEqual(nice_step(470), 100)
        self.assertEqual(nice_ticks_from_zero(470), [0, 100, 200, 300, 400, 500])
        self.assertEqual([round(t, 9) for t in nice_ticks_from_zero(0.9)], [0, 0.2, 0.4, 0.6, 0.8, 1.0])


class LabelTest(unittest.TestCase):
    def test_text_box_anchors(self):
        start = text_box(100, 50, "abcd", 10, "start")
        end = text_box(100, 50, "abcd", 10, "end")
        self.assertEqual(start.left, 100)
        self.assertEqual(end.right, 100)
        self.assertLess(start.top, 50)

    def test_placer_avoids_taken_space(self):
        placer = LabelPlacer(Box(0, 0, 500, 500))
        candidates = around_point(5, 10)
        first = placer.place(100, 100, "12", 10, candidates)
        second = placer.place(100, 100, "13", 10, candidates)
        self.assertNotEqual((first.x, first.y, first.anchor), (second.x, second.y, second.anchor))

    def test_placer_stays_inside_its_bounds(self):
        placer = LabelPlacer(Box(0, 0, 500, 500))
        placement = placer.place(498, 250, "label", 10, around_point(5, 10))
        self.assertEqual(placement.anchor, "end")

    def test_spread_keeps_order_and_gap(self):
        self.assertEqual(spread([10, 12, 50], 5, 0, 100), [10, 15, 50])
        self.assertEqual(spread([98, 99], 5, 0, 100), [95, 100])
        self.assertEqual(spread([12, 10], 5, 0, 100), [15, 10])

    def test_truncate(self):
        self.assertEqual(truncate("abcdef", 4), "abc…")
        self.assertEqual(truncate("abc", 4), "abc")
        self.assertEqual(truncate_middle("micro/matmul/n:8192/variant:12", 16), "micro/m…riant:12")
        self.assertEqual(len(truncate_middle("x" * 50, 21)), 21)


if __name__ == "__main__":
    unittest.main()
