"""Medians and the two-sided Mann-Whitney U test, computed the way scipy.stats.mannwhitneyu does.

Benchmark times are skewed and heavy-tailed, so a rank test is the honest choice: it asks whether one
sample tends to be larger than the other without assuming normality.
"""

import math
from dataclasses import dataclass

# scipy's rule for method='auto': the exact null distribution while one sample is small and nothing is
# tied (ties break the exact distribution); the tie-corrected normal approximation otherwise.
_EXACT_MAX_SMALLER_SIZE = 8


def median(values):
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of no values")
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True)
class MannWhitneyResult:
    u_statistic: float  # U of the first sample (scipy's 'statistic')
    p_value: float  # two-sided
    method: str  # 'exact' or 'asymptotic'


def _midranks(values):
    """Ranks 1..n with tied values sharing the mean of their ranks; also the sizes of tie groups."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    tie_sizes = []
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared_rank = (start + end) / 2 + 1
        for position in range(start, end + 1):
            ranks[order[position]] = shared_rank
        tie_sizes.append(end - start + 1)
        start = end + 1
    return ranks, tie_sizes


def _u_distribution_counts(n1, n2):
    """How many of the C(n1+n2, n1) orderings give each U = 0..n1*n2 (no ties).

    The counts are the coefficients of the Gaussian binomial coefficient
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), with m the smaller size, built one factor at a time.
    """
    m, n = sorted((n1, n2))
    degree = m * n
    counts = [1] + [0] * degree
    for i in range(1, m + 1):
        for k in range(degree, n + i - 1, -1):  # multiply by (1 - q^(n+i))
            counts[k] -= counts[k - (n + i)]
        for k in range(i, degree + 1):  # divide by (1 - q^i): a running sum with stride i
            counts[k] += counts[k - i]
    return counts


def _exact_upper_tail(u, n1, n2):
    counts = _u_distribution_counts(n1, n2)
    return sum(counts[math.ceil(u):]) / math.comb(n1 + n2, n1)


def _normal_upper_tail(u, n1, n2, tie_sizes):
    n = n1 + n2
    tie_term = sum(t**3 - t for t in tie_sizes)
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value tied: no evidence either way
        return 0.5
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(variance)  # 0.5: continuity correction
    return 0.5 * math.erfc(z / math.sqrt(2))


def mann_whitney_u(first, second, method="auto"):
    """Two-sided Mann-Whitney U test of two samples (each needs at least one value).

    method: 'auto' (scipy's choice), 'exact' or 'asymptotic'.
    """
    if method not in ("auto", "exact", "asymptotic"):
        raise ValueError(f"unknown method {method!r}")
    n1, n2 = len(first), len(second)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs at least one value in each sample")
    ranks, tie_sizes = _midranks(list(first) + list(second))
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    u_larger = max(u1, n1 * n2 - u1)
    has_ties = any(size > 1 for size in tie_sizes)
    if method == "auto":
        exact_is_valid = min(n1, n2) <= _EXACT_MAX_SMALLER_SIZE and not has_ties
        method = "exact" if exact_is_valid else "asymptotic"
    if method == "exact":
        upper_tail = _exact_upper_tail(u_larger, n1, n2)
    else:
        upper_tail = _normal_upper_tail(u_larger, n1, n2, tie_sizes)
    return MannWhitneyResult(u1, min(1.0, 2 * upper_tail), method)
