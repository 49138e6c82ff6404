"""The roofline of one device as data: the benchmarks grouped by case (the points of a size sweep are one
line), the compute roofs of the precisions the points use, the memory roofs, the ridges, and where a sweep
crosses its ridge. static_plots.py draws it with matplotlib, interactive.py with Plotly; both name every
group in a legend and every point on hover, so nothing is numbered and nothing overprints.

Sweeps: the points of one case whose params differ only in one axis are one line. That axis is the
result's roofbench.sweep_axis when the host writes it, else the one axis whose values vary inside a
group of otherwise equal params and whose values are all numbers (with several, the one with the most
values).
"""

import math
import re
from dataclasses import dataclass, field

from . import palette
from .results import MAX_PLAUSIBLE_RATE
from .units import format_number, format_percent, format_si, format_time

MARKER_SHAPES = ("circle", "square", "triangle", "diamond", "triangle-down", "pentagon", "star", "hexagon")
# Beyond this many groups a plot draws one series per precision (hover still names each point), and the
# legend lists precisions: a legend of a thousand cases helps nobody, the tables list them.
MAX_LEGEND_GROUPS = 80
# Ceilings closer than this share one line and one label (bf16 and fp16 usually have the same roof).
_SAME_ROOF_TOLERANCE = 0.01


@dataclass(frozen=True)
class Point:
    index: int
    benchmark: object
    intensity: float
    flops_per_s: float

    @property
    def colour(self):
        return palette.precision_colour(self.benchmark.precision)


@dataclass(frozen=True)
class MeasuredPoint:
    """Where a benchmark sits by the hardware's counters (roofbench --counters): the FLOPs it executed over the
    DRAM bytes it moved, at the executed FLOPs per second of its median time. Drawn beside its modelled point."""

    point: Point
    intensity: float
    flops_per_s: float


def measured_points(points):
    """The measured point of each point whose benchmark has counters."""
    measured = []
    for point in points:
        intensity, flops = point.benchmark.counter("measured_ai"), point.benchmark.counter("measured_flops")
        median = point.benchmark.counter("time_median")
        if _plottable(intensity) and flops and median and _plottable(flops / median):
            measured.append(MeasuredPoint(point, intensity, flops / median))
    return measured


@dataclass
class Group:
    """The points of one case that differ only in its sweep axis (or a single point)."""

    index: int
    plugin: str
    case: str
    title: str  # "micro/matmul_bf16" or "micro/matmul_bf16 (layout:nt)"
    shape: str
    sweep_axis: str
    points: list

    @property
    def colour(self):
        return self.points[0].colour


def _number_or_text(value):
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def _sweep_axis(benchmarks):
    """The case's sweep axis: named by the host, else inferred from the params (module docstring)."""
    named = next((b.sweep_axis for b in benchmarks if b.sweep_axis), "")
    if named:
        return named
    axes = sorted({axis for b in benchmarks for axis in b.params})
    best, best_values = "", 1
    for axis in axes:
        # A size sweep: numeric values (a dtype or layout axis makes separate groups instead).
        if any(_number_or_text(b.params.get(axis, ""))[0] for b in benchmarks):
            continue
        groups = {}
        for b in benchmarks:
            rest = tuple(sorted((k, v) for k, v in b.params.items() if k != axis))
            groups.setdefault(rest, set()).add(b.params.get(axis, ""))
        values = max(len(v) for v in groups.values())
        if values > best_values:
            best, best_values = axis, values
    return best


def group_points(points):
    """Groups in first-seen order, each case with its own marker shape."""
    by_case = {}
    for point in points:
        by_case.setdefault((point.benchmark.plugin, point.benchmark.case), []).append(point)
    groups = []
    for case_number, ((plugin, case), case_points) in enumerate(by_case.items()):
        axis = _sweep_axis([p.benchmark for p in case_points])
        lines = {}
        for point in case_points:
            rest = tuple((k, v) for k, v in point.benchmark.params.items() if k != axis)
            lines.setdefault(rest, []).append(point)
        # A title names what tells the case's lines apart (conv_bf16's layer and impl, not its pass or
        # layout when the run holds one of each); a case drawn as one line keeps all its params.
        keys = {k for rest in lines for k, _ in rest}
        varying = {k for k in keys if len({dict(rest).get(k) for rest in lines}) > 1}
        for rest, members in lines.items():
            members.sort(key=lambda p: _number_or_text(p.benchmark.params.get(axis, "")))
            shown = [(k, v) for k, v in rest if k in varying] if varying else list(rest)
            title = f"{plugin}/{case}" + (f" ({', '.join(f'{k}:{v}' for k, v in shown)})" if shown else "")
            groups.append(Group(len(groups) + 1, plugin, case, title, MARKER_SHAPES[case_number % len(MARKER_SHAPES)],
                                axis if len(members) > 1 else "", members))
    return groups


@dataclass(frozen=True)
class Roof:
    precisions: tuple
    flops_per_s: float

    @property
    def name(self):
        return ", ".join(self.precisions)

    @property
    def colour(self):
        return palette.precision_colour(self.precisions[0])

    def ridge(self, bandwidth):
        """Arithmetic intensity where this roof meets the memory roof."""
        return self.flops_per_s / bandwidth


def _plottable(value):
    """A FLOP/s or FLOP/byte a log axis can hold: positive, and not beyond any device (a corrupt counter)."""
    return value is not None and 0 < value <= MAX_PLAUSIBLE_RATE


def plottable_points(device_results):
    """Benchmarks with a plottable FLOP/s and AI, numbered from 1 in report order."""
    candidates = [b for benchmarks in device_results.plugins().values() for b in benchmarks]
    points = []
    for benchmark in candidates:
        intensity, rate = benchmark.counter("AI"), benchmark.counter("FLOP/s")
        if _plottable(intensity) and _plottable(rate):
            points.append(Point(len(points) + 1, benchmark, intensity, rate))
    return points


def compute_roofs(ceilings, used_precisions=()):
    """One roof per distinct measured ceiling, highest first; equal ceilings merged. Given the precisions
    the run's points used, only their roofs: a roof no point can be held against only crowds the plot."""
    roofs = []
    wanted = set(used_precisions) & set(ceilings.flops)
    for precision in sorted(wanted or ceilings.flops, key=palette.precision_order):
        value = ceilings.flops[precision]
        if value <= 0:
            continue
        same = next((r for r in roofs if abs(r.flops_per_s - value) <= _SAME_ROOF_TOLERANCE * value), None)
        if same:
            roofs[roofs.index(same)] = Roof(same.precisions + (precision,), same.flops_per_s)
        else:
            roofs.append(Roof((precision,), value))
    return sorted(roofs, key=lambda roof: -roof.flops_per_s)


def measured_hover(measured):
    """What hovering a measured point shows: the counted figures and how far they are from the model."""
    benchmark = measured.point.benchmark
    lines = [benchmark.name + ", by the hardware's counters",
             f"{format_si(measured.flops_per_s, 'FLOP/s')} executed, AI {format_number(measured.intensity)} FLOP/B"]
    ratios = [f"{what} {format_number(value)}x the model" for what, value in
              (("DRAM bytes", benchmark.counter("measured_bytes_ratio")), ("FLOPs", benchmark.counter("measured_flops_ratio")))
              if value]
    return "\n".join(lines + ([", ".join(ratios)] if ratios else []))


def point_hover(point):
    """What hovering a point shows: its benchmark, time, noise, share of its roof, and its facts."""
    benchmark = point.benchmark
    noise = benchmark.counter("noise")
    lines = [
        benchmark.name,
        f"time {format_time(benchmark.median_seconds)}, noise {format_percent(None if noise is None else 100 * noise, 2)}"
        + (" (NOISY)" if benchmark.noisy else ""),
        f"{format_percent(benchmark.counter('roof_pct'))} of roof" + (f" (the {benchmark.roof_note} roof)" if benchmark.roof_note else "")
        + f", {format_si(point.flops_per_s, 'FLOP/s')}, AI {format_number(point.intensity)} FLOP/B, "
        + (benchmark.precision or "precision ?"),
    ]
    lines += [f"{key}: {value}" for key, value in benchmark.facts.items()]
    return "\n".join(lines)


@dataclass(frozen=True)
class RidgeCrossing:
    group: object
    intensity: float
    flops_per_s: float
    text: str


def ridge_crossings(groups, roofs, bandwidth, read_bandwidth):
    """Where a sweep passes the ridge of its precision's roof: memory-bound on one side, compute-bound
    on the other. A case is judged against the ridge of the memory roof it was placed under (the read
    roof's for a read-dominated case, the cache roof's for one whose data sat in cache)."""
    crossings = []
    for g in groups:
        if len(g.points) < 2:
            continue
        roof = next((r for r in roofs if g.points[0].benchmark.precision in r.precisions), None)
        first = g.points[0].benchmark
        slope = first.memory_roof_Bps or (read_bandwidth if first.read_dominated and read_bandwidth else bandwidth)
        if roof is None or not slope:
            continue
        ridge = roof.ridge(slope)
        for before, after in zip(g.points, g.points[1:]):
            low, high = sorted((before.intensity, after.intensity))
            if not low < ridge <= high:
                continue
            share = (math.log(ridge) - math.log(before.intensity)) / (math.log(after.intensity) - math.log(before.intensity))
            rate = math.exp(math.log(before.flops_per_s) + share * (math.log(after.flops_per_s) - math.log(before.flops_per_s)))
            axis = g.sweep_axis
            crossings.append(RidgeCrossing(g, ridge, rate, (
                f"{g.title} crosses the {roof.name} ridge ({format_number(ridge)} FLOP/B) between "
                f"{axis}:{before.benchmark.params.get(axis, '?')} and {axis}:{after.benchmark.params.get(axis, '?')}")))
    return crossings


def key_names(groups, max_characters):
    """The groups' entries in the key, all shortened alike until every one fits: the plugin prefix, then
    the axis names, then the sweep note's words go before anything is cut (the middle, keeping both ends)."""
    def forms(g):
        sweep = f" ({g.sweep_axis} sweep, {len(g.points)})" if g.sweep_axis else ""
        title = g.title
        yield title + sweep
        title = title[len(g.plugin) + 1:] if title.startswith(g.plugin + "/") else title
        yield title + sweep
        title = re.sub(r"([(,] ?)[A-Za-z_][A-Za-z0-9_]*:", r"\1", title)
        yield title + sweep
        yield title + (f" ({g.sweep_axis} x{len(g.points)})" if g.sweep_axis else "")
    every = [list(forms(g)) for g in groups]
    distinct = len({f[0] for f in every})
    for level in range(4):
        names = [f[level] for f in every]
        # A shorter form must still tell the groups apart (two plugins may have a case of the same name).
        if all(len(name) <= max_characters for name in names) and len(set(names)) == distinct:
            return names
    return [truncate_middle(f[0 if len({f[-1] for f in every}) < distinct else -1], max_characters)
            for f in every]




def truncate_middle(content, max_characters):
    """Keeps both ends: benchmark names differ in their last parameters as often as in their first."""
    if len(content) <= max_characters:
        return content
    head = (max_characters - 1) // 2
    return content[:head] + "…" + content[len(content) - (max_characters - 1 - head):]


@dataclass
class Roofline:
    """What both plots draw for one device."""

    device_name: str
    groups: list
    roofs: list  # compute roofs, highest first
    bandwidth: float  # None when not measured
    read_bandwidth: float  # None, or the same as bandwidth: no second memory roof
    crossings: list
    unplotted: int  # benchmarks without a positive FLOP/s and AI
    measured: list = field(default_factory=list)  # MeasuredPoint: the points by the hardware's counters
    cache_bandwidth: float = None  # the cache roof, when a plotted benchmark was placed under it

    def memory_roofs(self):
        """(bandwidth, kind) of each memory roof to draw: "memory" (the copy roof), "read-streaming", "cache"."""
        kinds = ((self.bandwidth, "memory"), (self.read_bandwidth, "read-streaming"), (self.cache_bandwidth, "cache"))
        return [(bandwidth, kind) for bandwidth, kind in kinds if bandwidth]

    @property
    def points(self):
        return [point for group in self.groups for point in group.points]

    @property
    def grouped(self):
        """Whether the groups are few enough to draw and list one by one."""
        return len(self.groups) <= MAX_LEGEND_GROUPS

    def memory_roof_end(self, bandwidth):
        """The intensity where a memory roof stops: the highest ridge, or past the points without roofs."""
        if self.roofs:
            return max(roof.ridge(bandwidth) for roof in self.roofs)
        return max(self.intensities(), default=1.0) * 10

    def compute_roof_span(self, roof):
        """(start, end) intensities of a compute roof: from its ridge to a decade past every point."""
        start = roof.ridge(self.bandwidth) if self.bandwidth else self.memory_roof_start()
        end = max(self.intensities() + [r.ridge(self.bandwidth) for r in self.roofs if self.bandwidth]
                  + [1.0]) * 10
        return start, end

    def memory_roof_start(self):
        ridges = [roof.ridge(self.bandwidth) for roof in self.roofs] if self.bandwidth else []
        return min(self.intensities() + [r / 10 for r in ridges] + [1.0]) / 2

    def intensities(self):
        """Every plotted intensity, modelled and measured: the axes hold them all."""
        return [p.intensity for p in self.points] + [m.intensity for m in self.measured]

    def roof_label(self, roof):
        ridge = f", ridge {format_number(roof.ridge(self.bandwidth))} FLOP/B" if self.bandwidth else ""
        return f"{roof.name} {format_si(roof.flops_per_s, 'FLOP/s')}{ridge}"


def roofline_of(device_results):
    ceilings = device_results.ceilings
    points = plottable_points(device_results)
    groups = group_points(points)
    roofs = compute_roofs(ceilings, {point.benchmark.precision for point in points})
    read = ceilings.read_bandwidth_Bps if ceilings.read_bandwidth_Bps != ceilings.bandwidth_Bps else None
    # The host names the roof it placed each benchmark under: a cache roof is drawn when a point sits under it.
    cache = max((p.benchmark.memory_roof_Bps or 0 for p in points if p.benchmark.memory_roof == "cache"), default=0)
    return Roofline(device_results.device.name, groups, roofs, ceilings.bandwidth_Bps, read,
                    ridge_crossings(groups, roofs, ceilings.bandwidth_Bps, ceilings.read_bandwidth_Bps),
                    len(device_results.benchmarks) - len(points), measured_points(points), cache or None)
