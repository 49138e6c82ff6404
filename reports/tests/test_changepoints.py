import itertools
import unittest

from roofbench_reports.changepoints import (ChangePointSettings, energy_split_statistics, find_change_points,
                                            series_noise)
from roofbench_reports.results import group_by_device, load_run_file

from .helpers import IDENTICAL_RUNS
from .history_synthetic import noisy_series


def energy_statistic_by_definition(values, t):
    """Matteson and James's q-hat of one split, straight from its definition."""
    left, right = values[:t], values[t:]
    m, k, n = len(left), len(right), len(values)
    between = sum(abs(x - y) for x in left for y in right)
    within_left = sum(abs(x - y) for x, y in itertools.combinations(left, 2))
    within_right = sum(abs(x - y) for x, y in itertools.combinations(right, 2))
    energy = 2 * between / (m * k) - within_left / (m * (m - 1) / 2) - within_right / (k * (k - 1) / 2)
    return m * k / n * energy


def identical_run_medians():
    """{benchmark: [median of each recorded run]} over the 20 runs of one binary, in order."""
    series = {}
    for path in IDENTICAL_RUNS:
        for device in group_by_device([load_run_file(path)]):
            for name, benchmark in device.benchmarks.items():
                series.setdefault(name, []).append(benchmark.median_seconds)
    return series


class EnergyStatisticTest(unittest.TestCase):
    def test_matches_the_definition_at_every_split(self):
        for length in (4, 5, 17, 40, 70):  # 70: more than one block of the fast path
            values = noisy_series(length, 1.0, 0.3, seed=length)
            statistics = energy_split_statistics(values)
            for t in range(2, length - 1):
                self.assertAlmostEqual(statistics[t], energy_statistic_by_definition(values, t), places=9)

    def test_largest_at_a_step(self):
        values = [1.0] * 10 + [2.0] * 10
        statistics = energy_split_statistics(values)
        self.assertEqual(int(statistics.argmax()), 10)


class FindChangePointsTest(unittest.TestCase):
    def test_a_ten_percent_step_after_run_12_of_30(self):
        values = noisy_series(30, 1e-3, 0.01, seed=1, step_after=12, step=0.10)
        [point] = find_change_points(values)
        self.assertEqual(point.index, 12)  # the 13th run is the first after the change
        self.assertAlmostEqual(point.relative_change, 0.10, delta=0.015)
        self.assertLessEqual(point.p_value, ChangePointSettings().significance)

    def test_a_three_percent_step_in_half_a_percent_of_noise(self):
        values = noisy_series(30, 2e-6, 0.005, seed=2, step_after=12, step=0.03)
        [point] = find_change_points(values)
        self.assertEqual(point.index, 12)
        self.assertAlmostEqual(point.noise, 0.005, delta=0.003)

    def test_a_step_up_and_a_step_back(self):
        values = noisy_series(45, 1.0, 0.01, seed=3, step_after=15, step=0.2)[:30]
        values += noisy_series(15, 1.0, 0.01, seed=4)
        self.assertEqual([point.index for point in find_change_points(values)], [15, 30])

    def test_quiet_series_give_no_change_point(self):
        calls = sum(len(find_change_points(noisy_series(30, 1.0, noise, seed=seed)))
                    for seed in range(40) for noise in (0.005, 0.03))
        self.assertEqual(calls, 0)

    def test_a_lone_outlier_is_not_a_change(self):
        values = noisy_series(30, 1.0, 0.01, seed=5)
        values[20] *= 3
        self.assertEqual(find_change_points(values), [])

    def test_a_step_in_the_last_run_waits_for_more_runs(self):
        values = noisy_series(30, 1.0, 0.005, seed=6, step_after=29, step=0.2)
        self.assertEqual(find_change_points(values), [])
        values = noisy_series(30, 1.0, 0.005, seed=6, step_after=27, step=0.2)
        self.assertEqual([point.index for point in find_change_points(values)], [27])

    def test_the_same_series_gives_the_same_answer(self):
        values = noisy_series(60, 1.0, 0.02, seed=7, step_after=30, step=0.06)
        self.assertEqual(find_change_points(values), find_change_points(values))

    def test_refuses_times_that_are_not_positive(self):
        for bad in (0.0, -1.0, float("nan")):
            with self.assertRaises(ValueError):
                find_change_points([1.0, 1.0, bad, 1.0])

    def test_too_short_a_series_has_no_change_point(self):
        self.assertEqual(find_change_points([1.0, 2.0, 3.0]), [])


class IdenticalRunsTest(unittest.TestCase):
    """Twenty recorded runs of one binary: whatever the machine did between them, no change of code."""

    def test_no_change_point_in_any_benchmark(self):
        for name, medians in identical_run_medians().items():
            with self.subTest(benchmark=name):
                self.assertEqual(find_change_points(medians), [])

    def test_the_noise_gate_is_what_refuses_the_slow_spell(self):
        # The last four runs of the large copy were 3.5x slower (a busy machine): the permutation test
        # alone calls that a change; its runs scatter over a factor of 3 before it, which the gate sees.
        medians = identical_run_medians()["cpu/stream_copy/n:4194304"]
        ungated = ChangePointSettings(noise_multiple=1e-9, min_effect=0.0)
        self.assertEqual([point.index for point in find_change_points(medians, ungated)], [16])
        self.assertGreater(series_noise(medians, []), 0.3)


class SeriesNoiseTest(unittest.TestCase):
    def test_reads_the_noise_between_change_points(self):
        values = noisy_series(200, 1.0, 0.01, seed=8, step_after=100, step=0.5)
        points = find_change_points(values)
        self.assertAlmostEqual(series_noise(values, points), 0.01, delta=0.002)
        self.assertGreater(series_noise(values, []), 0.1)  # the step itself, counted as noise

    def test_needs_two_values(self):
        self.assertIsNone(series_noise([1.0], []))


if __name__ == "__main__":
    unittest.main()
