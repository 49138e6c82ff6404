import unittest

from roofbench_reports.units import format_number, format_percent, format_si, format_signed_percent, format_time


class FormatSiTest(unittest.TestCase):
    def test_decades_read_as_prefixes(self):
        self.assertEqual(format_si(1e9), "1 G")
        self.assertEqual(format_si(1e12, "FLOP/s"), "1 TFLOP/s")
        self.assertEqual(format_si(1e-2), "10 m")

    def test_three_significant_digits(self):
        self.assertEqual(format_si(1.29e9, "B/s"), "1.29 GB/s")
        self.assertEqual(format_si(1.5e10), "15 G")

    def test_rounding_moves_to_the_next_prefix(self):
        self.assertEqual(format_si(999.7), "1 k")

    def test_missing_and_zero(self):
        self.assertEqual(format_si(None), "—")
        self.assertEqual(format_si(0, "B/s"), "0 B/s")


class OtherFormatsTest(unittest.TestCase):
    def test_time(self):
        self.assertEqual(format_time(8.125e-4), "812 µs")
        self.assertEqual(format_time(1.5), "1.5 s")

    def test_plain_numbers_for_everyday_magnitudes(self):
        self.assertEqual(format_number(0.0833333), "0.0833")
        self.assertEqual(format_number(4096), "4096")
        self.assertEqual(format_number(0.1), "0.1")
        self.assertEqual(format_number(1e4), "10 k")

    def test_percent(self):
        self.assertEqual(format_percent(71.24), "71.2 %")
        self.assertEqual(format_signed_percent(20.04), "+20.0 %")
        self.assertEqual(format_signed_percent(-3.0), "-3.0 %")


if __name__ == "__main__":
    unittest.main()
