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


def quantile(values, q):
    """Linear interpolation between order statistics (numpy's default), of sorted or unsorted values."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


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


def _incomplete_beta_fraction(a, b, x):
    """Continued fraction of the regularized incomplete beta function (modified Lentz's method)."""
    tiny, epsilon = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < epsilon:
            break
    return result


def regularized_incomplete_beta(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1 - x) / b


def student_t_two_sided_p(t, degrees_of_freedom):
    """P(|T| >= |t|) for Student's t with the given (possibly fractional) degrees of freedom."""
    if not math.isfinite(t):
        return 0.0
    nu = degrees_of_freedom
    return regularized_incomplete_beta(nu / 2, 0.5, nu / (nu + t * t))


def student_t_quantile(p_two_sided, degrees_of_freedom):
    """The t with P(|T| >= t) = p_two_sided, by bisection (monotone in t)."""
    low, high = 0.0, 1.0
    while student_t_two_sided_p(high, degrees_of_freedom) > p_two_sided:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        if student_t_two_sided_p(middle, degrees_of_freedom) > p_two_sided:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def mean_and_variance(values):
    count = len(values)
    mean = sum(values) / count
    variance = sum((v - mean) ** 2 for v in values) / (count - 1) if count > 1 else 0.0
    return mean, variance


@dataclass(frozen=True)
class WelchResult:
    t_statistic: float  # positive when the second sample's mean is larger
    degrees_of_freedom: float
    standard_error: float
    p_value: float  # two-sided


def welch_t_test(first, second):
    """Welch's unequal-variance t test of two samples of at least two values each (scipy's
    ttest_ind(equal_var=False)). Two identical constant samples give p = 1."""
    if len(first) < 2 or len(second) < 2:
        raise ValueError("Welch's t test needs at least two values in each sample")
    mean1, variance1 = mean_and_variance(first)
    mean2, variance2 = mean_and_variance(second)
    share1, share2 = variance1 / len(first), variance2 / len(second)
    standard_error = math.sqrt(share1 + share2)
    difference = mean2 - mean1
    if standard_error == 0:
        return WelchResult(math.copysign(math.inf, difference) if difference else 0.0, math.inf, 0.0,
                           0.0 if difference else 1.0)
    degrees = (share1 + share2) ** 2 / (share1**2 / (len(first) - 1) + share2**2 / (len(second) - 1))
    t = difference / standard_error
    return WelchResult(t, degrees, standard_error, student_t_two_sided_p(t, degrees))


def holm_adjusted(p_values):
    """Holm-Bonferroni adjusted p-values, in the input order: comparing each with alpha keeps the chance
    of any false call among all of them under alpha."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
