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

from . import axes, palette
from .labels import text_width, truncate
from .scales import LinearScale, nice_ticks_from_zero
from .svg import figure, group, rect, text, tooltip
from .units import format_si

PLOT_LEFT = 84
PLOT_TOP = 76
PLOT_HEIGHT = 300
MIN_SLOT_WIDTH = 120
MIN_WIDTH = 560
BAR_FRACTION = 0.6
# With several series each slot holds a bar per series, each as wide as its labels need.
MIN_SERIES_SLOT_WIDTH = 170
SERIES_BAR_FRACTION = 0.84
LABEL_FONT_SIZE = 11
LABEL_LINE = 14
# Room above the tallest bar for its label lines.
_HEADROOM = 1.45
# Room under the axis: the rung's name, its point, and per bar its series, peak memory and energy per run.
_FOOT = 106
_RUNG_NUMBER = re.compile(r"^(R\d+)(?:_|$)")
OTHER_SOURCES = {"pytorch": "PyTorch"}
# Another series' bars: the series' colours, lighter (the same meaning, another framework or configuration),
# each further series lighter still.
_SERIES_OPACITY = (1.0, 0.45, 0.25)


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


def _bar_colour(negative, baseline):
    if baseline:
        return palette.WATERFALL_BASELINE
    return palette.WATERFALL_LOSS if negative else palette.WATERFALL_GAIN


def _memory_text(rung):
    peak = rung.peak_memory
    return f"{peak / 2**30:.2f} GiB" if peak else "peak ?"


def _energy_text(rung):
    return format_si(rung.energy, "J") + "/run" if rung.energy else None


def waterfall_figure(ladder_name, benchmarks, device_name):
    series = split_series(benchmarks)
    slots = []  # rung keys in declared order: roofbench's first, then any the other series add
    for _, rungs in series:
        for rung in rungs:
            if rung.key not in slots:
                slots.append(rung.key)
    every = [rung for _, rungs in series for rung in rungs]
    counter = next((b.items_counter for b in benchmarks if b.items_counter), "items/s")
    longest = max(max(len(r.title), len(r.detail)) for r in every)
    fraction = BAR_FRACTION if len(series) == 1 else SERIES_BAR_FRACTION
    minimum_slot = MIN_SLOT_WIDTH if len(series) == 1 else MIN_SERIES_SLOT_WIDTH * len(series)
    slot_width = max(minimum_slot, text_width("x" * longest, LABEL_FONT_SIZE) + 16)
    width = max(MIN_WIDTH, PLOT_LEFT + slot_width * len(slots) + 30)
    area = axes.PlotArea(PLOT_LEFT, PLOT_TOP, width - PLOT_LEFT - 30, PLOT_HEIGHT)
    slot_width = area.width / len(slots)  # a short ladder spreads over the minimum width
    root = figure(width, area.bottom + _FOOT)
    root.attributes["class"] = "waterfall"

    every_name = [series_name(source) for source, _ in series]
    names = " and ".join([", ".join(every_name[:-1]), every_name[-1]]) if len(series) > 1 else every_name[0]
    first_name = next((r.title for r in series[0][1] if r.rate), "the first rung")
    axes.draw_title(root, 24, 24, f"Ladder {ladder_name}: {counter} on {device_name}" +
                    (f" ({names})" if len(series) > 1 else ""),
                    f"cumulative rungs; labels: ratio to the previous rung and to the first ({first_name})")
    with_energy = any(r.energy for r in every)
    # Within the narrowest figure's width either way.
    legend = ("red: slower than its left neighbour; under each bar: peak memory and energy per run" if with_energy
              else "red: a negative rung, slower than its left neighbour; under each bar: its peak memory")
    root.add(text(24, 60, legend, font_size=LABEL_FONT_SIZE, fill=palette.MUTED_TEXT))
    ticks = nice_ticks_from_zero(max((r.rate for r in every if r.rate), default=1) * _HEADROOM)
    y_scale = LinearScale(0, ticks[-1], area.bottom, area.top)
    axes.draw_y_ticks(root, area, [(y_scale(v), format_si(v)) for v in ticks])
    axes.draw_frame(root, area)
    axes.draw_axis_titles(root, area, "", counter)

    bars = root.add(group(class_="bars", font_size=LABEL_FONT_SIZE, fill=palette.TEXT))
    bar_width = slot_width * fraction / len(series)
    max_chars = int(slot_width / 6.6)
    titled = {}  # slot -> the point its title names
    for series_index, (source, rungs) in enumerate(series):
        anchor = series_anchor(series, source)
        labels, negatives = ratio_labels(rungs, anchor), negative_rungs(rungs, anchor)
        first_valued = None if anchor else next((i for i, r in enumerate(rungs) if r.rate), None)
        for index, rung in enumerate(rungs):
            slot = slots.index(rung.key)
            centre = area.left + slot_width * (slot + 0.5)
            x = centre - slot_width * fraction / 2 + bar_width * series_index
            bar_centre = x + bar_width / 2
            if slot not in titled:  # the slot's name and point, from the first series that has it
                titled[slot] = rung.detail
                bars.add(text(centre, area.bottom + 16, truncate(rung.title, max_chars), text_anchor="middle",
                              font_weight="bold"))
                bars.add(text(centre, area.bottom + 30, truncate(rung.detail, max_chars), text_anchor="middle",
                              fill=palette.MUTED_TEXT))
            foot = [(_memory_text(rung), "memory")]
            if len(series) > 1:
                other_point = rung.detail and rung.detail != titled[slot]
                foot.insert(0, (series_name(source) + (f" {rung.detail}" if other_point else ""), None))
            if _energy_text(rung):
                foot.append((_energy_text(rung), "energy"))
            for line_index, (content, css_class) in enumerate(foot):
                bars.add(text(bar_centre, area.bottom + 46 + LABEL_LINE * line_index,
                              truncate(content, int(bar_width / 6)), text_anchor="middle",
                              fill=palette.MUTED_TEXT, class_=css_class))
            if not rung.rate:
                message = "; ".join(rung.benchmark.error_messages) or f"no {counter} counter"
                note = bars.add(text(bar_centre, area.bottom - 8, "no data", text_anchor="middle",
                                     fill=palette.WATERFALL_LOSS))
                note.add(tooltip(message))
                continue
            top = y_scale(rung.rate)
            opacity = _SERIES_OPACITY[min(series_index, len(_SERIES_OPACITY) - 1)]
            style = {"fill_opacity": opacity} if series_index > 0 else {}
            bar = bars.add(rect(x, top, bar_width, area.bottom - top,
                                fill=_bar_colour(negatives[index], index == first_valued), class_="bar", **style))
            memory = f", peak memory {_memory_text(rung)}" if rung.peak_memory else ""
            energy = f", {_energy_text(rung)}" if rung.energy else ""
            bar.add(tooltip(f"{rung.benchmark.name}: {format_si(rung.rate, counter)}{memory}{energy}"))
            lines = [format_si(rung.rate)] + labels[index] + (["negative rung"] if negatives[index] else [])
            for line_index, content in enumerate(lines):
                bars.add(text(bar_centre, top - 6 - LABEL_LINE * (len(lines) - 1 - line_index), content,
                              text_anchor="middle", font_weight="bold" if line_index == 0 else None,
                              fill=palette.WATERFALL_LOSS if content == "negative rung" else None))
    return root
