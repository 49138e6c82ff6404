"""Compares two results files benchmark by benchmark: a change counts only when the Mann-Whitney U test
says it is unlikely to be noise (p < alpha) AND the medians moved by more than the threshold, so that
neither a noisy big difference nor a significant tiny one raises an alarm."""

from dataclasses import dataclass

from .document import BulletList, Column, Document, Heading, Paragraph, Table
from .stats import mann_whitney_u
from .units import format_signed_percent, format_time

MIN_SAMPLES = 2
FAILED_GATES = ("fail", "error")

SLOWER, FASTER, SAME = "slower", "faster", "same"
TOO_FEW_SAMPLES = "same (too few samples)"
NO_TIMING = "no timing"


@dataclass(frozen=True)
class Comparison:
    name: str
    base_median: float
    new_median: float
    p_value: float
    verdict: str
    base_gate: str
    new_gate: str

    @property
    def change(self):
        """Relative change of the median time: +0.2 is 20 % slower."""
        if not self.base_median or self.new_median is None:
            return None
        return self.new_median / self.base_median - 1

    @property
    def gate_regressed(self):
        return self.base_gate == "pass" and self.new_gate in FAILED_GATES

    @property
    def regressed(self):
        return self.verdict == SLOWER or self.gate_regressed


def _verdict(base, new, threshold, alpha):
    """(verdict, p-value) for one benchmark present on both sides."""
    if base.median_seconds is None or new.median_seconds is None:
        return NO_TIMING, None
    base_samples, new_samples = base.timing_samples(), new.timing_samples()
    if len(base_samples) < MIN_SAMPLES or len(new_samples) < MIN_SAMPLES:
        return TOO_FEW_SAMPLES, None
    p_value = mann_whitney_u(base_samples, new_samples).p_value
    change = new.median_seconds / base.median_seconds - 1
    if p_value >= alpha or abs(change) <= threshold:
        return SAME, p_value
    return (SLOWER if change > 0 else FASTER), p_value


def compare_benchmarks(base_benchmarks, new_benchmarks, threshold, alpha):
    """Comparisons of the benchmarks in both, plus the names only in base (removed) and only in new (added)."""
    comparisons = []
    for name, base in base_benchmarks.items():
        new = new_benchmarks.get(name)
        if new is None:
            continue
        verdict, p_value = _verdict(base, new, threshold, alpha)
        comparisons.append(Comparison(name, base.median_seconds, new.median_seconds, p_value, verdict,
                                      base.gate, new.gate))
    removed = [name for name in base_benchmarks if name not in new_benchmarks]
    added = [name for name in new_benchmarks if name not in base_benchmarks]
    return comparisons, added, removed


def _order(comparison):
    # Regressions first: the reader of a pull-request comment looks at the top of the table.
    if comparison.regressed:
        return 0
    return 1 if comparison.verdict == FASTER else 2


def _gate_text(comparison):
    text = f"{comparison.base_gate or '?'} -> {comparison.new_gate or '?'}"
    return text + " (REGRESSION)" if comparison.gate_regressed else text


def _p_text(p_value):
    if p_value is None:
        return "—"
    return f"{p_value:.2g}" if p_value >= 1e-3 else "< 0.001"


def comparison_document(comparisons, added, removed, base_path, new_path, threshold, alpha):
    document = Document("roofbench comparison")
    regressions = sum(c.regressed for c in comparisons)
    counts = {verdict: sum(c.verdict == verdict for c in comparisons) for verdict in (SLOWER, FASTER)}
    gate_regressions = sum(c.gate_regressed for c in comparisons)
    document.add(Paragraph(f"Base: {base_path}. New: {new_path}. A change needs p < {alpha:g} (two-sided "
                           f"Mann-Whitney U) and a median moved by more than {threshold * 100:g} %."))
    document.add(Paragraph(
        f"{'REGRESSION' if regressions else 'No regression'}: {counts[SLOWER]} slower, {gate_regressions} "
        f"gate regression(s), {counts[FASTER]} faster, {len(comparisons) - counts[SLOWER] - counts[FASTER]} "
        f"unchanged; {len(added)} added, {len(removed)} removed.", emphasis=bool(regressions)))
    columns = [Column("benchmark"), Column("base median", numeric=True), Column("new median", numeric=True),
               Column("change", numeric=True), Column("p-value", numeric=True), Column("verdict"),
               Column("gate base->new")]
    rows = [
        [c.name, format_time(c.base_median), format_time(c.new_median),
         format_signed_percent(None if c.change is None else 100 * c.change), _p_text(c.p_value),
         c.verdict.upper() if c.verdict == SLOWER else c.verdict, _gate_text(c)]
        for c in sorted(comparisons, key=_order)
    ]
    document.add(Table(columns, rows))
    for title, names in (("Added", added), ("Removed", removed)):
        if names:
            document.add(Heading(3, f"{title} ({len(names)})"))
            document.add(BulletList(names))
    return document
