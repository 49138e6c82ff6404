"""Compares two sets of runs benchmark by benchmark, judging on runs, not on samples.

The unit of evidence is one independent run: one results file, one process, its median the median of its
repetitions. Samples and repetitions inside one process share its placement, clocks and neighbours, so
two processes of one binary differ by more than their spread suggests: a test that took one process's
repetitions as runs called one binary 1.23x faster than itself (p = 0.039). The rule:

- at least MIN_RUNS runs on each side: Welch's t test on the logarithms of the run medians, its
  p-values Holm-adjusted over every benchmark judged (so the chance of any false call in the whole
  comparison stays under alpha), and a change beyond the threshold. Not significant is "unchanged" only
  when a change of the threshold's size would have been significant (the runs were quiet enough to see
  it); otherwise "cannot judge".
- fewer runs: "cannot judge", except a change beyond OBVIOUS_FACTOR (2x), which no run-to-run noise
  seen on any of roofbench's devices explains.
- with fewer runs, a result whose runs were unsettled (fast samples far below the median: contention slowed
  most of the run, UNSETTLED_FAST_EDGE) is not judged even beyond 2x: on a busy machine such medians flip
  by 2x between identical runs. With 3+ runs a side the spread of the run medians shows that, and the
  test weighs it.
- a result the host flagged noisy (roofbench.quality) is judged on its run medians with 3+ runs a side
  and noted; with fewer, it is not judged at all.
"""

import math
from dataclasses import dataclass, field

from .document import BulletList, Column, Details, Document, Heading, Paragraph, Table
from .stats import holm_adjusted, mean_and_variance, median, student_t_quantile, welch_t_test
from .units import format_percent, format_si, format_time

MIN_RUNS = 3
OBVIOUS_FACTOR = 2.0
# A run whose 5th-percentile sample is under this fraction of its median was slowed for most of it by
# something outside the binary (results.Benchmark.fast_edge_ratios): its median need not repeat.
# Recorded on a busy 2-core machine: memory-bound runs at 0.27-0.6 flipped 1.8-2.3x between identical
# runs; preempted but otherwise steady runs (matmuls, small adds) stayed at 0.92-1.0.
UNSETTLED_FAST_EDGE = 0.8
FAILED_GATES = ("fail", "error")
# Mean SM clocks of the two sides further apart than this are noted on the row: under a power limit a GPU's time
# follows the clock the limit leaves, which moves with how long and how hard the GPU drew power before and during
# the samples (a training step at 700 W: 19.5 ms at 1545 MHz in short ungated runs, 20.4 ms at 1472 MHz in a gated
# 5 s run), so a change of about the clocks' size may be theirs.
CLOCK_NOTE_FRACTION = 0.01

SLOWER, FASTER, SAME, CANNOT_JUDGE, NO_TIMING, NOT_COMPARABLE = (
    "slower", "faster", "unchanged", "cannot judge", "no timing", "not comparable")


@dataclass(frozen=True)
class SideSummary:
    """One benchmark on one side of the comparison."""

    median: float
    runs: int
    noise: float  # relative: the spread of the run medians with 2+ runs, else the run's sample noise
    noise_is_run_to_run: bool
    noisy: bool
    log_medians: tuple
    fast_edge: float  # the lowest fast-edge ratio of its runs (1 when unknown)

    @staticmethod
    def of(benchmark):
        medians = benchmark.run_medians()
        if not medians:
            return None
        logs = tuple(math.log(m) for m in medians if m > 0)
        if len(logs) >= 2:
            noise, across_runs = math.sqrt(mean_and_variance(logs)[1]), True
        else:
            noise, across_runs = benchmark.counter("noise"), False
        return SideSummary(median(medians), len(medians), noise, across_runs, benchmark.noisy, logs,
                           min(benchmark.fast_edge_ratios(), default=1.0))

    @property
    def unsettled(self):
        return self.fast_edge < UNSETTLED_FAST_EDGE

    def text(self):
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.noise is None:
            return f"{format_time(self.median)} ({runs})"
        what = "run to run" if self.noise_is_run_to_run else "in the run"
        return f"{format_time(self.median)} ±{format_percent(100 * self.noise, 2).replace(' ', '')} {what} ({runs})"


@dataclass
class Comparison:
    name: str
    base: SideSummary
    new: SideSummary
    base_gate: str
    new_gate: str
    verdict: str = CANNOT_JUDGE
    p_value: float = None  # Holm-adjusted, when a test was made
    notes: list = field(default_factory=list)

    @property
    def ratio(self):
        """new / base median time: 1.31 is 1.31x slower."""
        if self.base is None or self.new is None or not self.base.median:
            return None
        return self.new.median / self.base.median

    @property
    def gate_regressed(self):
        return self.base_gate == "pass" and self.new_gate in FAILED_GATES

    @property
    def regressed(self):
        return self.verdict == SLOWER or self.gate_regressed

    @property
    def changed(self):
        return self.verdict in (SLOWER, FASTER) or self.gate_regressed


def format_ratio(ratio):
    """'1.31x slower', '5850x faster', '1.00x' (no direction when it rounds to no change)."""
    if ratio is None or ratio <= 0:
        return "—"
    factor = ratio if ratio >= 1 else 1 / ratio
    text = f"{factor:.2f}" if factor < 10 else f"{factor:.1f}" if factor < 100 else f"{factor:.0f}"
    if text == "1.00":
        return "1.00x"
    return f"{text}x {'slower' if ratio > 1 else 'faster'}"


def _mode_mismatch(base, new, ignored_facts=()):
    """Why two results of one name measured different things (timing path, the case's facts but those
    ignored), or '', and what the ignored facts that differ say."""
    reasons, ignored = [], []
    if base.timing and new.timing and base.timing != new.timing:
        reasons.append(f"timing {base.timing} vs {new.timing}")
    base_facts, new_facts = base.facts, new.facts
    for key in sorted(set(base_facts) | set(new_facts)):
        if base_facts.get(key) != new_facts.get(key):
            difference = _fact_difference(key, base_facts.get(key), new_facts.get(key))
            (ignored if key in ignored_facts else reasons).append(difference)
    return "; ".join(reasons), "; ".join(ignored)


def _fact_difference(key, base, new):
    """'key BASE vs NEW'; for a fact that lists parts joined by '; ' on both sides (the gpt plugin's
    matmul_algorithms, a line per shape), only the parts that differ, so one changed choice among fifteen
    does not print thirty lines."""
    base_parts = base.split("; ") if isinstance(base, str) else []
    new_parts = new.split("; ") if isinstance(new, str) else []
    if len(base_parts) > 1 and len(new_parts) > 1:
        only_base = [part for part in base_parts if part not in new_parts]
        only_new = [part for part in new_parts if part not in base_parts]
        if only_base or only_new:  # else the same parts in another order: the whole values say it
            return f"{key} {' / '.join(only_base) or '—'} vs {' / '.join(only_new) or '—'}"
    return f"{key} {'—' if base is None else base} vs {'—' if new is None else new}"


def _noisy_sides(comparison):
    return " and ".join(side for side, summary in (("base", comparison.base), ("new", comparison.new)) if summary.noisy)


def _obvious(ratio):
    return ratio >= OBVIOUS_FACTOR or ratio <= 1 / OBVIOUS_FACTOR


def _direction(ratio):
    return SLOWER if ratio > 1 else FASTER


def _judge_without_test(comparison, reason):
    ratio = comparison.ratio
    if _obvious(ratio):
        comparison.verdict = _direction(ratio)
        comparison.notes.append(f"beyond {OBVIOUS_FACTOR:g}x ({reason})")
    else:
        comparison.verdict = CANNOT_JUDGE
        comparison.notes.append(reason)


def compare_benchmarks(base_benchmarks, new_benchmarks, threshold, alpha, ignored_facts=()):
    """Comparisons of the benchmarks in both, plus the names only in base (removed) and only in new (added).
    A fact named in ignored_facts that differs is noted but does not make a row not comparable."""
    comparisons, tested = [], []
    for name, base in base_benchmarks.items():
        new = new_benchmarks.get(name)
        if new is None:
            continue
        comparison = Comparison(name, SideSummary.of(base), SideSummary.of(new), base.gate, new.gate)
        comparisons.append(comparison)
        mismatch, ignored = _mode_mismatch(base, new, ignored_facts)
        few_runs = comparison.base is not None and comparison.new is not None and min(
            comparison.base.runs, comparison.new.runs) < MIN_RUNS
        base_energy, new_energy = base.counter("energy_per_run"), new.counter("energy_per_run")
        if base_energy and new_energy:  # --energy on both sides: at the power limit, what sets the time
            comparison.notes.append(f"energy {format_si(base_energy, 'J')} -> {format_si(new_energy, 'J')} per run "
                                    f"(×{new_energy / base_energy:.2f})")
        base_clock, new_clock = base.counter("sm_clock_mhz"), new.counter("sm_clock_mhz")
        if base_clock and new_clock and abs(new_clock / base_clock - 1) > CLOCK_NOTE_FRACTION:
            change = 100 * (new_clock / base_clock - 1)
            comparison.notes.append(f"mean SM clock {base_clock:.0f} -> {new_clock:.0f} MHz ({change:+.1f}%): "
                                    "the time follows it at a power limit")
        if ignored:
            comparison.notes.append(f"differs, ignored: {ignored}")
        if comparison.base is None or comparison.new is None:
            comparison.verdict = NO_TIMING
        elif mismatch:
            comparison.verdict = NOT_COMPARABLE
            comparison.notes.append(mismatch)
        elif few_runs and (comparison.base.unsettled or comparison.new.unsettled):
            worst = min(comparison.base.fast_edge, comparison.new.fast_edge)
            comparison.verdict = CANNOT_JUDGE
            comparison.notes.append(f"unsettled: a run's fast samples are {100 * (1 - worst):.0f}% under its median, "
                                    "so its median need not repeat")
        elif few_runs and (comparison.base.noisy or comparison.new.noisy):
            comparison.verdict = CANNOT_JUDGE
            comparison.notes.append(f"noisy in {_noisy_sides(comparison)}, {comparison.base.runs} vs "
                                    f"{comparison.new.runs} runs")
        elif few_runs:
            _judge_without_test(comparison, f"{comparison.base.runs} vs {comparison.new.runs} runs; "
                                            f"{MIN_RUNS}+ each to judge (one results file per run)")
        else:
            if comparison.base.noisy or comparison.new.noisy:
                comparison.notes.append(f"noisy in {_noisy_sides(comparison)}: judged on its run medians")
            tested.append(comparison)
    _judge_by_test(tested, threshold, alpha)
    removed = [name for name in base_benchmarks if name not in new_benchmarks]
    added = [name for name in new_benchmarks if name not in base_benchmarks]
    return comparisons, added, removed


def _judge_by_test(comparisons, threshold, alpha):
    tests = [welch_t_test(c.base.log_medians, c.new.log_medians) for c in comparisons]
    adjusted = holm_adjusted([test.p_value for test in tests])
    # The p a single benchmark must reach for Holm's first step: what decides whether the runs could
    # have shown a change of the threshold's size at all.
    per_test_alpha = alpha / max(1, len(comparisons))
    smallest_change = math.log1p(threshold)
    for comparison, test, p_value in zip(comparisons, tests, adjusted):
        comparison.p_value = p_value
        change = abs(math.log(comparison.ratio))
        if p_value < alpha and change > smallest_change:
            comparison.verdict = _direction(comparison.ratio)
            continue
        detectable = (student_t_quantile(per_test_alpha, test.degrees_of_freedom) * test.standard_error
                      if test.standard_error > 0 else 0.0)
        if p_value < alpha or detectable <= smallest_change:
            comparison.verdict = SAME
        else:
            comparison.verdict = CANNOT_JUDGE
            comparison.notes.append(f"runs too noisy to see {100 * threshold:g}%: "
                                    f"only changes over {100 * math.expm1(detectable):.0f}% would show")


def _order(comparison):
    # Regressions first: the reader of a pull-request comment looks at the top of the table.
    if comparison.regressed:
        return 0
    return {FASTER: 1, NOT_COMPARABLE: 2, CANNOT_JUDGE: 3, NO_TIMING: 4}.get(comparison.verdict, 5)


def _gate_text(comparison):
    text = f"{comparison.base_gate or '?'} -> {comparison.new_gate or '?'}"
    return text + " (REGRESSION)" if comparison.gate_regressed else text


def _p_text(p_value):
    if p_value is None:
        return "—"
    return f"{p_value:.2g}" if p_value >= 1e-3 else "< 0.001"


@dataclass
class RunProblems:
    """Whole-run reasons to fail: benchmarks that vanished, a new run that stopped early."""

    removed: list
    incomplete_new: list  # titles of new runs with complete: false
    incomplete_base: list
    allow_removed: bool = False
    allow_incomplete: bool = False

    @property
    def failing(self):
        return (bool(self.removed) and not self.allow_removed) or (bool(self.incomplete_new) and not self.allow_incomplete)


REGRESSION, NO_REGRESSION, NOTHING_JUDGED = "REGRESSION", "No regression", "CANNOT JUDGE"


def comparison_outcome(comparisons, problems):
    """REGRESSION when anything got slower, newly fails its gate, or the run lost benchmarks; CANNOT JUDGE
    when no benchmark could be judged either way (a pass on such a comparison would be a pass on nothing);
    else No regression."""
    if any(c.regressed for c in comparisons) or problems.failing:
        return REGRESSION
    if not any(c.verdict in (SLOWER, FASTER, SAME) for c in comparisons):
        return NOTHING_JUDGED
    return NO_REGRESSION


COLUMNS = [Column("benchmark"), Column("base", numeric=True), Column("new", numeric=True),
           Column("change", numeric=True), Column("verdict"), Column("p (Holm)", numeric=True),
           Column("gate base->new"), Column("note")]


def _row(c):
    verdict = c.verdict.upper() if c.verdict == SLOWER else c.verdict
    return [c.name, c.base.text() if c.base else "—", c.new.text() if c.new else "—", format_ratio(c.ratio),
            verdict, _p_text(c.p_value), _gate_text(c), "; ".join(c.notes)]


def _runs_text(runs):
    return "; ".join(f"{run.title} ({run.path})" for run in runs)


def comparison_document(comparisons, added, problems, base_runs, new_runs, threshold, alpha):
    document = Document("roofbench comparison")
    counts = {verdict: sum(c.verdict == verdict for c in comparisons)
              for verdict in (SLOWER, FASTER, SAME, CANNOT_JUDGE, NOT_COMPARABLE, NO_TIMING)}
    gate_regressions = sum(c.gate_regressed for c in comparisons)
    outcome = comparison_outcome(comparisons, problems)
    failing = outcome != NO_REGRESSION
    document.add(Paragraph(f"Base: {_runs_text(base_runs)}."))
    document.add(Paragraph(f"New: {_runs_text(new_runs)}."))
    summary = (f"{outcome}: {counts[SLOWER]} slower, {gate_regressions} "
               f"gate regression(s), {counts[FASTER]} faster, {counts[SAME]} unchanged, {counts[CANNOT_JUDGE]} "
               f"cannot judge, {counts[NOT_COMPARABLE]} not comparable; {len(added)} added, "
               f"{len(problems.removed)} removed.")
    if outcome == NOTHING_JUDGED:
        summary += (f" No benchmark could be judged: give each side {MIN_RUNS}+ runs, each its own process and "
                    "results file (--base FILE, --new FILE).")
    document.add(Paragraph(summary, emphasis=failing))
    for title in problems.incomplete_new:
        allowed = " (allowed by --allow-incomplete)" if problems.allow_incomplete else ": this fails the comparison (--allow-incomplete to accept)"
        document.add(Paragraph(f"The new run {title} is incomplete: it stopped before its last benchmark{allowed}.",
                               emphasis=not problems.allow_incomplete))
    for title in problems.incomplete_base:
        document.add(Paragraph(f"The base run {title} is incomplete: what it did not reach shows as added."))
    if problems.removed:
        allowed = " (allowed by --allow-removed)" if problems.allow_removed else "; this fails the comparison (--allow-removed to accept)"
        document.add(Paragraph(f"{len(problems.removed)} benchmark(s) of the base are missing from the new run{allowed}.",
                               emphasis=not problems.allow_removed))
    document.add(Paragraph(
        f"Judged on independent runs (one results file each; repetitions inside one file are one run): "
        f"with {MIN_RUNS}+ runs a side, Welch's t test on their logarithms, Holm-adjusted "
        f"over the benchmarks, p < {alpha:g} and a change over {threshold * 100:g}%; with fewer, only a change "
        f"beyond {OBVIOUS_FACTOR:g}x counts, and none for a result flagged noisy or unsettled (its fast samples "
        f"over {100 * (1 - UNSETTLED_FAST_EDGE):.0f}% under its median). ± is each side's noise."))
    ordered = sorted(comparisons, key=_order)
    shown = [c for c in ordered if c.verdict != SAME or c.gate_regressed]
    folded = [c for c in ordered if c.verdict == SAME and not c.gate_regressed]
    if shown:
        document.add(Table(COLUMNS, [_row(c) for c in shown]))
    if folded:
        document.add(Details(f"{len(folded)} unchanged", [Table(COLUMNS, [_row(c) for c in folded])]))
    for title, names in (("Added", added), ("Removed", problems.removed)):
        if names:
            document.add(Heading(3, f"{title} ({len(names)})"))
            document.add(BulletList(names))
    return document
