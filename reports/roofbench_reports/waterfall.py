"""The waterfall of one ladder: a bar of items/s per rung, in the order the rungs were declared, each
labelled with its ratio to its left neighbour (what that one change bought) and to the first rung (what
the whole stack bought), its peak memory under it, and a rung slower than its neighbour marked as negative.

A ladder can hold several series: roofbench's own rungs and figures from another framework on the same
device (scripts/torch_gpt_ladder.py writes PyTorch's, marked "source": "pytorch"), a framework's other
configurations each a series of their own where an entry names one ("series": "reduce-overhead", PyTorch's
strongest, so that the picture shows the figure a ratio is taken against, not only the case study's rung). Rungs
are matched by their number (R0_eager and R0_eager, R3_batch and R3_batch_reduce_overhead): each rung's slot
then holds one bar per series, and each series' ratios are to its own neighbour and its own first rung; a
named series, which starts part way up (no eager rung), takes its source's first rung as both."""

import re
from dataclasses import dataclass

from . import palette
from .units import format_si

_RUNG_NUMBER = re.compile(r"^(R\d+)(?:_|$)")
OTHER_SOURCES = {"pytorch": "PyTorch"}
# Another series' bars: the series' colours, lighter (the same meaning, another framework or configuration),
# each further series lighter still.
SERIES_OPACITY = (1.0, 0.45, 0.25)
# Under a bar, a line longer than this is broken at its first space.
FOOT_LINE_CHARACTERS = 12


@dataclass(frozen=True)
class Rung:
    benchmark: object
    rate: float  # items/s, None when the rung has no value (errored)

    @property
    def title(self):
        return self.benchmark.case

    @property
    def detail(self):
        """Its parameters (and its GPUs, when several), shown under the case name."""
        return self.benchmark.point

    @property
    def key(self):
        """What matches a rung across series: its number (R3 of R3_batch), else its case name."""
        match = _RUNG_NUMBER.match(self.title)
        return match.group(1) if match else self.title

    @property
    def peak_memory(self):
        """Peak device memory in bytes (the host's high-water mark, or the framework's), None if unknown."""
        return self.benchmark.counter("peak_mem")

    @property
    def energy(self):
        """Joules per run (--energy; PyTorch's script measures it the same way), None if not measured."""
        return self.benchmark.counter("energy_per_run")

    @property
    def clock(self):
        """The mean SM clock over its samples in MHz (both frameworks record it), None if not recorded: at the power
        limit a rung's rate follows it."""
        return self.benchmark.counter("sm_clock_mhz")


def source_of(benchmark):
    """'' for roofbench's own results, else the framework the figures come from ('pytorch')."""
    return str(benchmark._info("source") or "").lower()


def series_of(benchmark):
    """The series a rung's bar belongs to: its source, and the configuration it names if any
    ('pytorch/reduce-overhead')."""
    configuration = str(benchmark._info("series") or "")
    return source_of(benchmark) + (f"/{configuration}" if configuration else "")


def series_name(series):
    source, _, configuration = series.partition("/")
    name = OTHER_SOURCES.get(source, source) if source else "roofbench"
    return f"{name} {configuration}" if configuration else name


def rungs_of(benchmarks):
    return [Rung(benchmark, benchmark.counter(benchmark.items_counter) if benchmark.items_counter else None)
            for benchmark in benchmarks]


def ratio_labels(rungs, anchor=None):
    """Per rung: [] for no value, ['baseline'] for the first valued one, else [vs previous, vs first].
    anchor: the rate of a rung before these (a named series' source's first rung), which is then both the
    first rung's previous and every rung's first, and no rung is the baseline."""
    labels, first, previous = [], anchor, anchor
    for rung in rungs:
        if not rung.rate:
            labels.append([])
            continue
        if first is None:
            labels.append(["baseline"])
            first = rung.rate
        else:
            labels.append([f"×{rung.rate / previous:.2f} vs prev", f"×{rung.rate / first:.2f} vs first"])
        previous = rung.rate
    return labels


def negative_rungs(rungs, anchor=None):
    """Per rung: True when it is slower than the valued rung to its left (the case study's negative rung), the
    first one's left being `anchor` (ratio_labels')."""
    flags, previous = [], anchor
    for rung in rungs:
        flags.append(bool(rung.rate and previous and rung.rate < previous))
        if rung.rate:
            previous = rung.rate
    return flags


def series_anchor(series, name):
    """A named series ('pytorch/reduce-overhead') starts part way up its source's ladder (reduce-overhead has
    no eager rung): its ratios run from its source's first valued rung, the rate returned; None for the
    others."""
    source, _, configuration = name.partition("/")
    if not configuration:
        return None
    own = next((rungs for other, rungs in series if other == source), [])
    return next((rung.rate for rung in own if rung.rate), None)


def split_series(benchmarks):
    """[(series, [Rung, ...]), ...]: roofbench's own first, then each other source's, then the named series
    (series_of), each group in first-seen order.
    The first series keeps the results' order (the rungs' declared order); every other series is put in
    that order too, since its file lists rungs in whatever order its script ran them (a ratio "vs prev" is
    only meaningful along the ladder). Rungs the first series lacks follow, in their own order."""
    groups = {}
    for benchmark in benchmarks:
        groups.setdefault(series_of(benchmark), []).append(benchmark)
    ordered = sorted(groups, key=lambda name: (name != "", "/" in name))  # named series after every source
    series = [(source, rungs_of(groups[source])) for source in ordered]
    declared = [rung.key for rung in series[0][1]] if series else []

    def position(rung):
        return declared.index(rung.key) if rung.key in declared else len(declared)

    return series[:1] + [(source, sorted(rungs, key=position)) for source, rungs in series[1:]]


def ladder_groups(device_results):
    """{title: [Benchmark, ...]} of the waterfalls to draw. results.ladders() compares rungs at equal
    parameters (one waterfall per point); a ladder whose every rung ran at a single point is instead one
    waterfall whatever those points are (gpt: R0-R2 at batch 64, R3 and R4 at batch 512), each bar naming
    its point under it. The benchmarks keep the order of the results files: the rungs' declared order."""
    per_point = device_results.ladders()
    by_ladder = {}
    for benchmark in device_results.benchmarks.values():
        if benchmark.ladder:
            by_ladder.setdefault(benchmark.ladder, []).append(benchmark)
    groups = {}
    for ladder, benchmarks in by_ladder.items():
        cases = [(benchmark.plugin, benchmark.case) for benchmark in benchmarks]
        if len(set(cases)) == len(cases):
            groups[ladder] = benchmarks
        else:
            groups.update((title, rungs) for title, rungs in per_point.items()
                          if title == ladder or title.startswith(ladder + " ("))
    return groups


def _memory_text(rung):
    peak = rung.peak_memory
    return f"{peak / 2**30:.2f} GiB" if peak else "peak ?"


def _energy_text(rung):
    return format_si(rung.energy, "J") + "/run" if rung.energy else ""


@dataclass(frozen=True)
class Bar:
    """One rung of one series, with everything both plots write on it, over it and under it."""

    slot: int
    series_index: int
    series: str  # its series' name ("roofbench", "PyTorch reduce-overhead")
    rung: Rung
    labels: list  # over the bar: its rate, then its ratios, then "negative rung" when it is one
    negative: bool
    baseline: bool
    foot: list  # under the bar: its series (with several), its point when it differs, peak memory, energy

    @property
    def colour(self):
        if self.baseline:
            return palette.WATERFALL_BASELINE
        return palette.WATERFALL_LOSS if self.negative else palette.WATERFALL_GAIN

    @property
    def opacity(self):
        return SERIES_OPACITY[min(self.series_index, len(SERIES_OPACITY) - 1)]

    @property
    def energy(self):
        return _energy_text(self.rung)

    @property
    def foot_lines(self):
        """foot, a long series name over two lines so that the labels of neighbouring bars do not touch."""
        lines = []
        for line in self.foot:
            lines += line.split(" ", 1) if len(line) > FOOT_LINE_CHARACTERS else [line]
        return lines

    def hover(self, counter):
        if not self.rung.rate:
            return f"{self.rung.benchmark.name}: " + ("; ".join(self.rung.benchmark.error_messages) or f"no {counter}")
        parts = [f"{self.rung.benchmark.name}: {format_si(self.rung.rate, counter)}"]
        if self.rung.peak_memory:
            parts.append(f"peak memory {_memory_text(self.rung)}")
        if self.energy:
            parts.append(self.energy)
        if self.rung.clock:
            parts.append(f"mean SM clock {self.rung.clock:.0f} MHz")
        return ", ".join(parts)


@dataclass
class Waterfall:
    title: str
    subtitle: str
    counter: str  # 'tokens/s'
    slots: list  # [(rung title, its point)] in declared order
    bars: list
    series_names: list

    @property
    def with_energy(self):
        return any(bar.energy for bar in self.bars)


def _bars_of(series, slots):
    bars, titled = [], {}
    for series_index, (source, rungs) in enumerate(series):
        anchor = series_anchor(series, source)
        labels, negatives = ratio_labels(rungs, anchor), negative_rungs(rungs, anchor)
        first_valued = None if anchor else next((i for i, r in enumerate(rungs) if r.rate), None)
        for index, rung in enumerate(rungs):
            slot = slots.index(rung.key)
            titled.setdefault(slot, rung.detail)
            foot = [series_name(source) if len(series) > 1 else ""]
            if rung.detail and rung.detail != titled[slot]:
                foot[0] = f"{foot[0]} {rung.detail}".strip()
            foot += [_memory_text(rung), _energy_text(rung)]
            over = ([format_si(rung.rate)] + labels[index] + (["negative rung"] if negatives[index] else [])
                    if rung.rate else ["no data"])
            bars.append(Bar(slot, series_index, series_name(source), rung, over, negatives[index],
                            index == first_valued, [line for line in foot if line]))
    return bars


def waterfall_of(ladder_name, benchmarks, device_name):
    series = split_series(benchmarks)
    slots = []  # rung keys in declared order: roofbench's first, then any the other series add
    for _, rungs in series:
        for rung in rungs:
            if rung.key not in slots:
                slots.append(rung.key)
    counter = next((b.items_counter for b in benchmarks if b.items_counter), "items/s")
    names = [series_name(source) for source, _ in series]
    joined = " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]
    first_name = next((r.title for r in series[0][1] if r.rate), "the first rung")
    bars = _bars_of(series, slots)
    slot_titles = [None] * len(slots)
    for bar in bars:
        if slot_titles[bar.slot] is None:
            slot_titles[bar.slot] = (bar.rung.title, bar.rung.detail)
    return Waterfall(f"Ladder {ladder_name}: {counter} on {device_name}" + (f" ({joined})" if len(names) > 1 else ""),
                     f"cumulative rungs; over each bar its ratio to the previous rung and to the first ({first_name}); "
                     "red: slower than its left neighbour; under each bar: peak memory"
                     + (" and energy per run" if any(bar.energy for bar in bars) else ""),
                     counter, slot_titles, bars, names)
