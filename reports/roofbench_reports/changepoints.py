"""Change points in a series of run medians: e-divisive means with a permutation test, gated by the
series' own run-to-run noise.

E-divisive means (Matteson and James, 2014; what MongoDB's signal processing and Apache Otava run on
performance histories) splits a series where the energy distance between the part before and the part
after is largest, asks a permutation test whether a split that good could come from shuffled data, and
repeats inside the parts until the best split left is not significant. It assumes nothing about the
shape of the noise, which for benchmark times is skewed and often bimodal.

A permutation test only says that the two parts differ, and the runs of a benchmark are not exchangeable
in practice: the load on a machine comes and goes in spells, so a few slow runs in a row are common
without any change of code. A change point the test finds is therefore kept only where it moves the
median by more than the noise of the runs between its neighbours (noise_multiple times a robust spread
of the runs about their part's median) and by at least min_effect; the weakest that does not is dropped
first and the rest judged again. The series is analysed in log space, so a step is a ratio and the
spread is relative.
"""

import math
from dataclasses import dataclass

import numpy

# The 10th-90th percentile range of a normal distribution, in standard deviations. The spread is read
# from that range because it sees a second cluster holding a tenth of the runs or more (the MAD misses one
# under half of them, the interquartile range one under a quarter) yet ignores a lone outlier.
_NORMAL_10_90_WIDTH = 2.5631
# Shuffles evaluated together in one numpy pass: a quiet series is usually settled within the first batch.
_PERMUTATION_BATCH = 10


@dataclass(frozen=True)
class ChangePointSettings:
    significance: float = 0.05  # the permutation test's p-value must be at most this (ecp's default)
    max_permutations: int = 99  # p down to 0.01; a split that cannot be significant stops far sooner
    min_segment: int = 3  # runs on each side of a change point, at least
    noise_multiple: float = 4.0  # the median must move by this many run-to-run noise spreads
    min_effect: float = 0.01  # and by this fraction, whatever the noise
    seed: int = 20261204  # the permutations are drawn from a fixed seed: the same history, the same answer


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first run after the change
    p_value: float
    permutations: int
    before_median: float  # of the runs back to the previous change point
    after_median: float  # of the runs up to the next change point
    noise: float  # relative run-to-run spread around the change, what the step was judged against

    @property
    def relative_change(self):
        return self.after_median / self.before_median - 1


def _distance_sums(rows):
    """(to_earlier, to_later): for each row and each i, the sums over j < i and over j > i of
    |row[i] - row[j]|, in O(n log n) per row rather than the O(n^2) of a distance matrix.

    A merge sort: at each level, the sorted left and right halves of every block merge (a stable sort of
    two sorted runs); as they do, each value of the right half meets, in the running count and sum of
    the left half's values below it, all it needs for its distances to the left half."""
    count, n = rows.shape
    size = 1 << max(1, (n - 1).bit_length())
    # Padding goes after the last value, so it is never earlier than a real one.
    values = numpy.zeros((count, size))
    values[:, :n] = rows
    positions = numpy.tile(numpy.arange(size), (count, 1))
    row_of = numpy.arange(count)[:, None]
    to_earlier = numpy.zeros((count, size))
    half = 1
    while half < size:
        blocks = values.reshape(-1, 2 * half)
        order = numpy.argsort(blocks, axis=1, kind="stable")
        merged = numpy.take_along_axis(blocks, order, axis=1)
        from_left = order < half  # ties put the left value first: its distance is 0 either way
        below = numpy.cumsum(from_left, axis=1)
        below_sum = numpy.cumsum(numpy.where(from_left, merged, 0.0), axis=1)
        distances = merged * below - below_sum + (below_sum[:, -1:] - below_sum) - merged * (half - below)
        values = merged.reshape(count, size)
        positions = numpy.take_along_axis(positions.reshape(-1, 2 * half), order, axis=1).reshape(count, size)
        to_earlier[row_of, positions] += numpy.where(from_left, 0.0, distances).reshape(count, size)
        half *= 2
    # values is now each row sorted (padding included); drop the padding for the sums to all values.
    real = positions < n
    ordered = values[real].reshape(count, n)
    ordered_positions = positions[real].reshape(count, n)
    rank = numpy.arange(n)
    prefix = numpy.cumsum(ordered, axis=1)
    to_all = ordered * rank - (prefix - ordered) + (prefix[:, -1:] - prefix) - ordered * (n - 1 - rank)
    result_all = numpy.empty((count, n))
    result_all[row_of, ordered_positions] = to_all
    earlier = to_earlier[:, :n]
    return earlier, result_all - earlier


def energy_split_statistics(rows):
    """Matteson and James's q-hat for every split of each row x into x[:t] and x[t:], as an array of the
    rows' shape plus one column, indexed by t (0 for t < 2 and t > n - 2: a part needs two values for
    its own spread). A single series gives a single array.

    q(t) = t (n - t) / n * (2/(t (n-t)) sum|x_i - y_j| - 1/C(t,2) sum|x_i - x_k| - 1/C(n-t,2) sum|y_j - y_k|)
    """
    rows = numpy.asarray(rows, dtype=float)
    single = rows.ndim == 1
    rows = numpy.atleast_2d(rows)
    count, n = rows.shape
    statistics = numpy.zeros((count, n + 1))
    if n >= 4:
        to_earlier, to_later = _distance_sums(rows)
        zeros = numpy.zeros((count, 1))
        within_left = numpy.concatenate((zeros, numpy.cumsum(to_earlier, axis=1)), axis=1)  # pairs in [0, t)
        within_right = numpy.concatenate((numpy.cumsum(to_later[:, ::-1], axis=1)[:, ::-1], zeros), axis=1)
        between = within_left[:, -1:] - within_left - within_right
        t = numpy.arange(2, n - 1)
        left_pairs, right_pairs = t * (t - 1) / 2, (n - t) * (n - t - 1) / 2
        energy = (2 * between[:, t] / (t * (n - t)) - within_left[:, t] / left_pairs
                  - within_right[:, t] / right_pairs)
        statistics[:, 2:n - 1] = t * (n - t) / n * energy
    return statistics[0] if single else statistics


def _split_range(length, min_segment):
    """The splits t of a segment that leave min_segment values (and at least two) on each side."""
    side = max(min_segment, 2)
    return side, length - side


def _best_split(values, min_segment):
    """(t, q) of the best split of one segment; None if it is too short to split."""
    low, high = _split_range(len(values), min_segment)
    if high < low:
        return None
    statistics = energy_split_statistics(values)
    t = low + int(numpy.argmax(statistics[low:high + 1]))
    return t, float(statistics[t])


def _best_statistics(rows, min_segment):
    """The best split's q of each row (rows of one length); None if the rows are too short to split."""
    low, high = _split_range(rows.shape[1], min_segment)
    if high < low:
        return None
    return energy_split_statistics(rows)[:, low:high + 1].max(axis=1)


def relative_spread(residuals):
    """The run-to-run noise of runs, from their log distances to their segment's median: a relative
    standard deviation read from the 10th-90th percentile range."""
    low, high = numpy.percentile(residuals, [10, 90])
    return float(high - low) / _NORMAL_10_90_WIDTH


def _split_effect(left, right):
    """(log shift of the median, pooled log spread) of two adjacent parts."""
    left_center, right_center = float(numpy.median(left)), float(numpy.median(right))
    residuals = numpy.concatenate((left - left_center, right - right_center))
    return right_center - left_center, relative_spread(residuals)


class _Search:
    """The state of one divisive search: the series (log values) and the change points found so far."""

    def __init__(self, log_values, settings):
        self.x = log_values
        self.settings = settings
        self.bounds = [0, len(log_values)]
        self.random = numpy.random.default_rng(settings.seed)

    def segments(self):
        return list(zip(self.bounds, self.bounds[1:]))

    def candidate(self):
        """(q, t) of the best split over all segments, or None when no segment can be split."""
        best = None
        for a, b in self.segments():
            split = _best_split(self.x[a:b], self.settings.min_segment)
            if split is not None and (best is None or split[1] > best[0]):
                best = (split[1], a + split[0])
        return best

    def _shuffled_best(self, count):
        """The best split's q of count shuffles of the series, each segment shuffled within itself."""
        best = numpy.full(count, -math.inf)
        for a, b in self.segments():
            shuffles = self.random.permuted(numpy.tile(self.x[a:b], (count, 1)), axis=1)
            statistics = _best_statistics(shuffles, self.settings.min_segment)
            if statistics is not None:
                best = numpy.maximum(best, statistics)
        return best

    def permutation_p_value(self, observed):
        """(p, permutations drawn): the share of shuffles within the segments whose best split is at least
        as good, counting the observed order as one. Shuffles are drawn in batches; the test stops once
        the answer cannot be significant."""
        settings = self.settings
        allowed = math.floor(settings.significance * (settings.max_permutations + 1)) - 1
        at_least, drawn = 0, 0
        while drawn < settings.max_permutations and at_least <= allowed:
            count = min(_PERMUTATION_BATCH, settings.max_permutations - drawn)
            at_least += int(numpy.count_nonzero(self._shuffled_best(count) >= observed))
            drawn += count
        return (at_least + 1) / (drawn + 1), drawn

    def split(self, t):
        self.bounds = sorted(self.bounds + [t])


def _margin(log_values, start, t, end, settings):
    """How far a change point at t clears the noise gate between its neighbours start and end: its median
    shift over the shift it needs (at least 1 to be kept)."""
    shift, spread = _split_effect(log_values[start:t], log_values[t:end])
    needed = max(math.log1p(settings.min_effect), settings.noise_multiple * spread)
    return abs(shift) / needed if needed > 0 else math.inf


def _within_noise_removed(log_values, indices, settings):
    """Drops, weakest first, the change points that do not move the median beyond the noise of the runs
    between their neighbours; each removal merges two segments, so the rest are judged again."""
    kept = list(indices)
    while kept:
        edges = [0] + kept + [len(log_values)]
        margins = [_margin(log_values, edges[i - 1], edges[i], edges[i + 1], settings)
                   for i in range(1, len(edges) - 1)]
        weakest = min(range(len(kept)), key=margins.__getitem__)
        if margins[weakest] >= 1:
            break
        del kept[weakest]
    return kept


def find_change_points(values, settings=ChangePointSettings()):
    """Change points of a series of positive values (run medians, oldest first), in order of index."""
    if any(not (value > 0 and math.isfinite(value)) for value in values):
        raise ValueError("change points need positive finite values")
    logs = numpy.log(numpy.asarray(values, dtype=float))
    search = _Search(logs, settings)
    tested = {}
    while True:
        candidate = search.candidate()
        if candidate is None:
            break
        q, t = candidate
        p_value, drawn = search.permutation_p_value(q)
        if p_value > settings.significance:
            break
        tested[t] = (p_value, drawn)
        search.split(t)
    kept = _within_noise_removed(logs, sorted(tested), settings)
    return _described(values, [(t, tested[t]) for t in kept])


def _described(values, accepted):
    """ChangePoints with the medians of the runs between their neighbours."""
    logs = numpy.log(numpy.asarray(values, dtype=float))
    edges = [0] + [t for t, _ in accepted] + [len(values)]
    points = []
    for number, (t, (p_value, drawn)) in enumerate(accepted, start=1):
        left, right = logs[edges[number - 1]:t], logs[t:edges[number + 1]]
        _, spread = _split_effect(left, right)
        points.append(ChangePoint(index=t, p_value=p_value, permutations=drawn,
                                  before_median=math.exp(float(numpy.median(left))),
                                  after_median=math.exp(float(numpy.median(right))),
                                  noise=math.expm1(spread)))
    return points


def series_noise(values, change_points):
    """The relative run-to-run noise of a series: the spread of its runs about the median of the segment
    between change points they belong to; None for fewer than two values."""
    if len(values) < 2:
        return None
    logs = numpy.log(numpy.asarray(values, dtype=float))
    edges = [0] + [point.index for point in change_points] + [len(values)]
    residuals = numpy.concatenate([logs[a:b] - numpy.median(logs[a:b]) for a, b in zip(edges, edges[1:])])
    return math.expm1(relative_spread(residuals))
