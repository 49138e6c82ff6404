import unittest

from roofbench_reports.stats import mann_whitney_u, median


class MedianTest(unittest.TestCase):
    def test_odd_and_even_counts(self):
        self.assertEqual(median([3, 1, 2]), 2)
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_no_values_is_an_error(self):
        with self.assertRaises(ValueError):
            median([])


class MannWhitneyUTest(unittest.TestCase):
    """Expected values computed with scipy 1.10.1, scipy.stats.mannwhitneyu(x, y, method=...)."""

    def assertMatchesScipy(self, first, second, statistic, p_value, method="auto", expected_method=None):
        result = mann_whitney_u(first, second, method=method)
        self.assertEqual(result.u_statistic, statistic)
        self.assertAlmostEqual(result.p_value, p_value, places=12)
        if expected_method:
            self.assertEqual(result.method, expected_method)

    def test_scipy_documentation_example_exact(self):
        self.assertMatchesScipy([19, 22, 16, 29, 24], [20, 11, 17, 12], 17.0, 0.1111111111111111,
                                expected_method="exact")

    def test_scipy_documentation_example_asymptotic(self):
        self.assertMatchesScipy([19, 22, 16, 29, 24], [20, 11, 17, 12], 17.0, 0.11134688653314041,
                                method="asymptotic")

    def test_completely_separated_small_samples(self):
        self.assertMatchesScipy([1, 2, 3], [4, 5, 6], 0.0, 0.1, expected_method="exact")

    def test_exact_with_unequal_sizes(self):
        self.assertMatchesScipy([1.5, 3.2, 0.7], [2.1, 4.4, 5.0, 6.3, 2.9, 8.8, 7.7, 9.1, 10.2, 3.3],
                                2.0, 0.027972027972027972, expected_method="exact")

    def test_ties_use_the_tie_corrected_normal_approximation(self):
        self.assertMatchesScipy([1, 2, 2, 3, 5], [2, 3, 3, 4, 6, 7], 7.0, 0.16304505585423734,
                                expected_method="asymptotic")
        self.assertMatchesScipy([1, 1, 1, 2], [1, 2, 2, 2], 4.0, 0.24706152509165802)

    def test_large_samples(self):
        first = [i * 0.37 % 5 for i in range(1, 41)]
        second = [i * 0.53 % 5 + 0.4 for i in range(1, 31)]
        self.assertMatchesScipy(first, second, 553.0, 0.5810487490364564, expected_method="asymptotic")
        result = mann_whitney_u(list(range(20)), list(range(100, 120)))
        self.assertEqual(result.u_statistic, 0.0)
        self.assertAlmostEqual(result.p_value / 6.795615128173358e-08, 1.0, places=9)

    def test_symmetric_in_its_arguments(self):
        first, second = [0.9, 1.3, 1.1, 1.7], [1.2, 1.6, 2.0, 1.9, 2.2]
        forward, backward = mann_whitney_u(first, second), mann_whitney_u(second, first)
        self.assertAlmostEqual(forward.p_value, backward.p_value, places=15)
        self.assertEqual(forward.u_statistic + backward.u_statistic, len(first) * len(second))

    def test_all_values_tied_is_no_evidence(self):
        self.assertEqual(mann_whitney_u([1.0] * 10, [1.0] * 12).p_value, 1.0)

    def test_empty_sample_is_an_error(self):
        with self.assertRaises(ValueError):
            mann_whitney_u([], [1.0])

    def test_exact_p_value_never_exceeds_one(self):
        self.assertEqual(mann_whitney_u([1, 4], [2, 3]).p_value, 1.0)


if __name__ == "__main__":
    unittest.main()
