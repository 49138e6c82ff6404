"""The roofline plot of one device: log-log FLOP/s over arithmetic intensity, the measured memory
roofs (and a read-streaming one when measured) and compute roofs, ridge points, and the benchmarks
grouped by case: one marker shape per case, the points of a size sweep joined by a line (with a mark
where it crosses its roof's ridge), one label per group, and a key below the plot. Every point's tooltip
names its benchmark, time, noise and % of roof.

Sweeps: the points of one case whose params differ only in one axis are one line. That axis is the
result's roofbench.sweep_axis when the host writes it, else the one axis whose values vary inside a
group of otherwise equal params and whose values are all numbers (with several, the one with the most
values).
"""

import math
import re
from dataclasses import dataclass

from . import axes, palette
from .labels import Box, LabelPlacer, around_point, spread, text_box, truncate_middle
from .scales import LogScale
from .svg import Element, circle, figure, group, line, polyline, text, tooltip
from .units import format_number, format_percent, format_si, format_time

PLOT = axes.PlotArea(left=84, top=64, width=640, height=440)
LEGEND_LEFT = PLOT.right + 28
WIDTH = 960
POINT_RADIUS = 5
RIDGE_RADIUS = 4
LABEL_FONT_SIZE = 10
ROOF_LABEL_FONT_SIZE = 11
KEY_COLUMNS = 3
KEY_ROW_HEIGHT = 16
# Beyond this many groups the key and the in-plot labels stop (the tables list everything).
MAX_KEY_ENTRIES = 240
MAX_GROUP_LABELS = 80
MARKER_SHAPES = ("circle", "square", "triangle", "diamond", "triangle-down", "pentagon", "star", "hexagon")
# Ceilings closer than this share one line and one label (bf16 and fp16 usually have the same roof).
_SAME_ROOF_TOLERANCE = 0.01
# Room (in decades) around the ridges, so each compute roof shows a visible flat part.
_RIDGE_MARGIN = 1.0


@dataclass(frozen=True)
class Point:
    index: int
    benchmark: object
    intensity: float
    flops_per_s: float

    @property
    def colour(self):
        return palette.precision_colour(self.benchmark.precision)


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


def marker(shape, x, y, radius, **style):
    """A point's marker: the case's shape, centred on (x, y)."""
    if shape == "circle":
        return circle(x, y, radius, **style)
    r = radius * 1.15
    outlines = {
        "square": [(-r, -r), (r, -r), (r, r), (-r, r)],
        "triangle": [(0, -1.3 * r), (1.2 * r, 0.9 * r), (-1.2 * r, 0.9 * r)],
        "triangle-down": [(0, 1.3 * r), (1.2 * r, -0.9 * r), (-1.2 * r, -0.9 * r)],
        "diamond": [(0, -1.35 * r), (1.1 * r, 0), (0, 1.35 * r), (-1.1 * r, 0)],
    }
    if shape in outlines:
        corners = outlines[shape]
    else:
        sides = {"pentagon": 5, "hexagon": 6, "star": 10}[shape]
        corners = []
        for k in range(sides):
            reach = r * (0.5 if shape == "star" and k % 2 else 1.2)
            angle = -math.pi / 2 + 2 * math.pi * k / sides
            corners.append((reach * math.cos(angle), reach * math.sin(angle)))
    outline = " ".join(f"{x + dx:.2f},{y + dy:.2f}" for dx, dy in corners)
    return Element("polygon", points=outline, **style)


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


def plottable_points(device_results):
    """Benchmarks with a positive FLOP/s and AI, numbered from 1 in report order."""
    candidates = [b for benchmarks in device_results.plugins().values() for b in benchmarks]
    points = []
    for benchmark in candidates:
        intensity, rate = benchmark.counter("AI"), benchmark.counter("FLOP/s")
        if intensity and rate and intensity > 0 and rate > 0:
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


def _scales(points, roofs, bandwidth):
    intensities = [p.intensity for p in points]
    rates = [p.flops_per_s for p in points]
    if bandwidth:
        ridges = [roof.ridge(bandwidth) for roof in roofs] or [1.0]
        intensities += [min(ridges) / 10**_RIDGE_MARGIN, max(ridges) * 10**_RIDGE_MARGIN]
    # Headroom above the highest roof keeps its label inside the frame.
    rates += [roof.flops_per_s * 1.6 for roof in roofs]
    x_scale = LogScale.covering(intensities, PLOT.left, PLOT.right)
    y_scale = LogScale.covering(rates, PLOT.bottom, PLOT.top)
    return x_scale, y_scale


def _draw_axes(root, x_scale, y_scale):
    axes.draw_y_ticks(root, PLOT, [(y_scale(v), format_si(v)) for v in y_scale.decades()],
                      minor_pixels=[y_scale(v) for v in y_scale.minor_ticks()])
    axes.draw_x_ticks(root, PLOT, [(x_scale(v), format_number(v)) for v in x_scale.decades()],
                      minor_pixels=[x_scale(v) for v in x_scale.minor_ticks()])
    axes.draw_frame(root, PLOT)
    axes.draw_axis_titles(root, PLOT, "arithmetic intensity (FLOP/byte)", "performance (FLOP/s)")


def _memory_roof_segment(x_scale, y_scale, bandwidth, roofs):
    """Ends (in data units) of the visible part of the bandwidth slope, up to the highest ridge."""
    start = max(x_scale.lowest, y_scale.lowest / bandwidth)
    end = max(roof.ridge(bandwidth) for roof in roofs) if roofs else min(x_scale.highest, y_scale.highest / bandwidth)
    return (start, end) if start < end else None


def _draw_memory_roof(root, placer, x_scale, y_scale, bandwidth, roofs, read=False):
    segment = _memory_roof_segment(x_scale, y_scale, bandwidth, roofs)
    if not segment:
        return
    (x0, x1) = segment
    ends = [(x_scale(x0), y_scale(x0 * bandwidth)), (x_scale(x1), y_scale(x1 * bandwidth))]
    what = "read-streaming roof" if read else "memory roof"
    roof = root.add(polyline(ends, stroke=palette.MEMORY_ROOF, stroke_width=2 if read else 2.5,
                             stroke_dasharray="6 4" if read else None,
                             class_="read-memory-roof" if read else "memory-roof"))
    roof.add(tooltip(f"{what}: {format_si(bandwidth, 'B/s')}"
                     + (" (cases that mostly read are judged against it)" if read else "")))
    (px0, py0), (px1, py1) = ends
    angle = math.atan2(py1 - py0, px1 - px0)
    label = f"{'read' if read else 'memory'} {format_si(bandwidth, 'B/s')}"
    # Along the slope and above it (points sit below their roofs), a short way in from the lower end.
    normal = (math.sin(angle) * 9, -math.cos(angle) * 9)
    x, y = px0 + 0.1 * (px1 - px0) + normal[0], py0 + 0.1 * (py1 - py0) + normal[1]
    root.add(text(x, y, label, font_size=ROOF_LABEL_FONT_SIZE, fill=palette.MEMORY_ROOF,
                  transform=f"rotate({math.degrees(angle):.1f} {x:.1f} {y:.1f})", class_="roof-label"))
    _reserve_rotated_text(placer, x, y, angle, label, ROOF_LABEL_FONT_SIZE)


def _reserve_rotated_text(placer, x, y, angle, label, font_size):
    """Covers slanted text with small square boxes along its baseline, which keeps other labels off
    it without reserving the whole (mostly empty) bounding rectangle."""
    step = font_size * 0.6
    for position in range(len(label)):
        cx = x + math.cos(angle) * step * (position + 0.5) + math.sin(angle) * font_size * 0.35
        cy = y + math.sin(angle) * step * (position + 0.5) - math.cos(angle) * font_size * 0.35
        placer.reserve(Box(cx - step / 2, cy - font_size / 2, cx + step / 2, cy + font_size / 2))


def _roof_label_placement(start, baseline, label, point_boxes):
    """Right end of the roof, or its left end (just past the ridge) when fewer points hide there."""
    ends = [(PLOT.right - 4, "end"), (start + 10, "start")]
    crowding = [sum(text_box(x, baseline, label, ROOF_LABEL_FONT_SIZE, anchor).overlaps(box) for box in point_boxes)
                for x, anchor in ends]
    return ends[crowding.index(min(crowding))]


def _draw_compute_roofs(root, placer, x_scale, y_scale, bandwidth, roofs, point_boxes):
    # A label sits just above its roof; when the next roof up is too close for that, it goes under its
    # own line instead. spread() then separates whatever still collides.
    line_ys = [y_scale(roof.flops_per_s) for roof in roofs]  # roofs are sorted highest first
    wanted = [
        y - 4 if index == 0 or y - line_ys[index - 1] > ROOF_LABEL_FONT_SIZE + 4 else y + ROOF_LABEL_FONT_SIZE + 2
        for index, y in enumerate(line_ys)
    ]
    label_baselines = spread(wanted, ROOF_LABEL_FONT_SIZE + 1, PLOT.top + ROOF_LABEL_FONT_SIZE + 2, PLOT.bottom - 2)
    for roof, y, baseline in zip(roofs, line_ys, label_baselines):
        start = x_scale(max(roof.ridge(bandwidth), x_scale.lowest)) if bandwidth else PLOT.left
        drawn = root.add(line(start, y, PLOT.right, y, stroke=roof.colour, stroke_width=2, class_="compute-roof"))
        drawn.add(tooltip(f"{roof.name} roof: {format_si(roof.flops_per_s, 'FLOP/s')}"))
        label = f"{roof.name} {format_si(roof.flops_per_s, 'FLOP/s')}"
        x, anchor = _roof_label_placement(start, baseline, label, point_boxes)
        root.add(text(x, baseline, label, font_size=ROOF_LABEL_FONT_SIZE, fill=roof.colour, text_anchor=anchor,
                      font_weight="bold", class_="roof-label"))
        placer.reserve(text_box(x, baseline, label, ROOF_LABEL_FONT_SIZE, anchor))


def _ridge_label_candidates():
    # Up and to the left of a ridge lies the empty space above the memory roof: try there first.
    offsets = around_point(RIDGE_RADIUS + 2, LABEL_FONT_SIZE)[:8]
    return [offsets[6], offsets[1], offsets[2], offsets[5], offsets[3], offsets[0], offsets[4], offsets[7]]


def _draw_ridges(root, placer, x_scale, y_scale, bandwidth, roofs):
    ridges = root.add(group(class_="ridges"))
    placed = []
    for roof in roofs:
        intensity = roof.ridge(bandwidth)
        if not x_scale.contains(intensity):
            continue
        x, y = x_scale(intensity), y_scale(roof.flops_per_s)
        dot = ridges.add(circle(x, y, RIDGE_RADIUS, fill=roof.colour, stroke=palette.TEXT, stroke_width=1,
                                class_="ridge"))
        dot.add(tooltip(f"ridge {roof.name}: {format_number(intensity)} FLOP/byte"))
        placer.reserve(_marker_box(x, y, RIDGE_RADIUS))
        placed.append((x, y, f"ridge {roof.name}: {format_number(intensity)} FLOP/B"))
    for x, y, label in placed:
        where = placer.place(x, y, label, LABEL_FONT_SIZE, _ridge_label_candidates())
        ridges.add(text(where.x, where.y, label, font_size=LABEL_FONT_SIZE, fill=palette.TEXT,
                        text_anchor=where.anchor, class_="ridge-label"))


def _marker_box(x, y, radius):
    return Box(x - radius, y - radius, x + radius, y + radius)


def _point_tooltip(point):
    benchmark = point.benchmark
    noise = benchmark.counter("noise")
    lines = [
        benchmark.name,
        f"time {format_time(benchmark.median_seconds)}, noise {format_percent(None if noise is None else 100 * noise, 2)}"
        + (" (NOISY)" if benchmark.noisy else ""),
        f"{format_percent(benchmark.counter('roof_pct'))} of roof" + (" (the read roof)" if benchmark.read_dominated else "")
        + f", {format_si(point.flops_per_s, 'FLOP/s')}, AI {format_number(point.intensity)} FLOP/B, "
        + (benchmark.precision or "precision ?"),
    ]
    lines += [f"{key}: {value}" for key, value in benchmark.facts.items()]
    return "\n".join(lines)


def _point_positions(x_scale, y_scale, points):
    return [(x_scale(p.intensity), y_scale(p.flops_per_s)) for p in points]


def _draw_groups(root, placer, x_scale, y_scale, groups, crossings):
    lines = root.add(group(class_="sweeps"))
    layer = root.add(group(class_="points"))
    positions = {id(p): (x_scale(p.intensity), y_scale(p.flops_per_s)) for g in groups for p in g.points}
    # Every marker is reserved before any label is placed, so no label hides a later point.
    for x, y in positions.values():
        placer.reserve(_marker_box(x, y, POINT_RADIUS))
    for g in groups:
        if len(g.points) > 1:
            drawn = lines.add(polyline([positions[id(p)] for p in g.points], stroke=g.colour, stroke_width=1.5,
                                       stroke_opacity=0.8, class_="sweep", data_plugin=g.plugin))
            drawn.add(tooltip(f"{g.title}: {g.sweep_axis} sweep, {len(g.points)} points"))
        for point in g.points:
            x, y = positions[id(point)]
            drawn = layer.add(marker(g.shape, x, y, POINT_RADIUS, fill=point.colour, stroke="white", stroke_width=1,
                                     class_="point", data_plugin=g.plugin))
            drawn.add(tooltip(_point_tooltip(point)))
    for crossing in crossings:
        drawn = layer.add(line(crossing.x, crossing.y - 7, crossing.x, crossing.y + 7, stroke=palette.TEXT,
                               stroke_width=2, class_="ridge-crossing", data_plugin=crossing.group.plugin))
        drawn.add(tooltip(crossing.text))
    labels = root.add(group(class_="point-labels", font_size=LABEL_FONT_SIZE, fill=palette.TEXT))
    for g in groups[:MAX_GROUP_LABELS]:
        x, y = positions[id(g.points[-1])]
        content = str(g.index)
        where = placer.place(x, y, content, LABEL_FONT_SIZE, around_point(POINT_RADIUS, LABEL_FONT_SIZE))
        labels.add(text(where.x, where.y, content, text_anchor=where.anchor, data_plugin=g.plugin))


@dataclass(frozen=True)
class RidgeCrossing:
    group: object
    x: float
    y: float
    text: str


def ridge_crossings(groups, roofs, bandwidth, read_bandwidth, x_scale, y_scale):
    """Where a sweep passes the ridge of its precision's roof: memory-bound on one side, compute-bound
    on the other. A read-dominated case is judged against the read roof's ridge."""
    crossings = []
    for g in groups:
        if len(g.points) < 2:
            continue
        roof = next((r for r in roofs if g.points[0].benchmark.precision in r.precisions), None)
        slope = read_bandwidth if g.points[0].benchmark.read_dominated and read_bandwidth else bandwidth
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
            crossings.append(RidgeCrossing(g, x_scale(ridge), y_scale(rate), (
                f"{g.title} crosses the {roof.name} ridge ({format_number(ridge)} FLOP/B) between "
                f"{axis}:{before.benchmark.params.get(axis, '?')} and {axis}:{after.benchmark.params.get(axis, '?')}")))
    return crossings


def _draw_legend(root, precisions, has_memory_roof, has_compute_roofs, has_read_roof=False):
    legend = root.add(group(class_="legend", font_size=11, fill=palette.TEXT))
    y = PLOT.top + 6
    legend.add(text(LEGEND_LEFT, y, "precision", font_weight="bold"))
    for precision in precisions:
        y += 18
        legend.add(circle(LEGEND_LEFT + 6, y - 4, POINT_RADIUS, fill=palette.precision_colour(precision)))
        legend.add(text(LEGEND_LEFT + 18, y, precision or "unknown"))
    y += 30
    legend.add(text(LEGEND_LEFT, y, "lines", font_weight="bold"))
    if has_memory_roof:
        y += 18
        legend.add(line(LEGEND_LEFT, y - 4, LEGEND_LEFT + 22, y - 4, stroke=palette.MEMORY_ROOF, stroke_width=2.5))
        legend.add(text(LEGEND_LEFT + 30, y, "memory roof (measured)"))
    if has_read_roof:
        y += 18
        legend.add(line(LEGEND_LEFT, y - 4, LEGEND_LEFT + 22, y - 4, stroke=palette.MEMORY_ROOF, stroke_width=2,
                        stroke_dasharray="6 4"))
        legend.add(text(LEGEND_LEFT + 30, y, "read-streaming roof"))
    if has_compute_roofs:
        y += 18
        legend.add(line(LEGEND_LEFT, y - 4, LEGEND_LEFT + 22, y - 4, stroke=palette.AXIS, stroke_width=2))
        legend.add(text(LEGEND_LEFT + 30, y, "compute roof (measured),"))
        y += 14
        legend.add(text(LEGEND_LEFT + 30, y, "coloured by precision"))
        y += 18
        legend.add(circle(LEGEND_LEFT + 11, y - 4, RIDGE_RADIUS, fill="white", stroke=palette.TEXT, stroke_width=1))
        legend.add(text(LEGEND_LEFT + 30, y, "ridge point"))
    y += 30
    legend.add(text(LEGEND_LEFT, y, "one shape per case,", fill=palette.MUTED_TEXT))
    legend.add(text(LEGEND_LEFT, y + 14, "a line per size sweep,", fill=palette.MUTED_TEXT))
    legend.add(text(LEGEND_LEFT, y + 28, "| where it crosses a ridge;", fill=palette.MUTED_TEXT))
    legend.add(text(LEGEND_LEFT, y + 42, "numbers: the key below", fill=palette.MUTED_TEXT))


def _key_column_width(columns):
    return (WIDTH - PLOT.left + 60) / columns


def _key_characters(columns):
    return int((_key_column_width(columns) - 44) / (11 * 0.6))


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


def _key_columns(groups):
    """Three columns, or two where some name would still be cut at three."""
    shown = groups[:MAX_KEY_ENTRIES]
    fits = not any("…" in name for name in key_names(shown, _key_characters(KEY_COLUMNS)))
    return KEY_COLUMNS if fits else KEY_COLUMNS - 1


def _key_height(groups, columns, has_note):
    rows = math.ceil(min(len(groups), MAX_KEY_ENTRIES) / columns)
    notes = int(has_note) + int(len(groups) > MAX_KEY_ENTRIES)
    return 28 + rows * KEY_ROW_HEIGHT + notes * KEY_ROW_HEIGHT


def _draw_key(root, top, groups, columns, unplotted_count):
    key = root.add(group(class_="key", font_size=11, fill=palette.TEXT))
    key.add(text(PLOT.left - 60, top, "key", font_weight="bold"))
    column_width = _key_column_width(columns)
    max_characters = _key_characters(columns)
    shown = groups[:MAX_KEY_ENTRIES]
    rows = math.ceil(len(shown) / columns)
    names = key_names(shown, max_characters)
    for position, (g, name) in enumerate(zip(shown, names)):
        # Column-major, so numbers read downwards like a printed index.
        column, row = divmod(position, rows)
        x = PLOT.left - 60 + column * column_width
        y = top + 20 + row * KEY_ROW_HEIGHT
        key.add(marker(g.shape, x + 4, y - 4, 4, fill=g.colour, data_plugin=g.plugin))
        key.add(text(x + 30, y, str(g.index), text_anchor="end", font_weight="bold", data_plugin=g.plugin))
        entry = key.add(text(x + 36, y, name, data_plugin=g.plugin))
        entry.add(tooltip("\n".join(p.benchmark.name for p in g.points)))
    y = top + 20 + rows * KEY_ROW_HEIGHT
    if len(groups) > len(shown):
        key.add(text(PLOT.left - 60, y, f"... and {len(groups) - len(shown)} more group(s): the tables below list "
                     "every benchmark.", fill=palette.MUTED_TEXT))
        y += KEY_ROW_HEIGHT
    if unplotted_count:
        key.add(text(PLOT.left - 60, y, f"{unplotted_count} benchmark(s) without "
                     "FLOP/s or arithmetic intensity (errored, or no FLOPs counted) are not plotted.",
                     fill=palette.MUTED_TEXT))


def roofline_figure(device_results):
    """The roofline of one device as a standalone SVG root element."""
    ceilings = device_results.ceilings
    bandwidth = ceilings.bandwidth_Bps
    read_bandwidth = ceilings.read_bandwidth_Bps
    points = plottable_points(device_results)
    groups = group_points(points)
    roofs = compute_roofs(ceilings, {point.benchmark.precision for point in points})
    unplotted = len(device_results.benchmarks) - len(points)
    key_top = PLOT.bottom + 72
    key_columns = _key_columns(groups)
    root = figure(WIDTH, key_top + _key_height(groups, key_columns, unplotted > 0))
    root.attributes["class"] = "roofline"

    device = device_results.device
    axes.draw_title(root, PLOT.left - 60, 24, f"Roofline: {device.name}",
                    f"{device.kind} · {len(points)} benchmark(s) in {len(groups)} group(s) · roofs are the "
                    "ceilings measured at run time")
    x_scale, y_scale = _scales(points, roofs, bandwidth)
    _draw_axes(root, x_scale, y_scale)
    placer = LabelPlacer(PLOT.box())
    if bandwidth:
        _draw_memory_roof(root, placer, x_scale, y_scale, bandwidth, roofs)
    if read_bandwidth and read_bandwidth != bandwidth:
        _draw_memory_roof(root, placer, x_scale, y_scale, read_bandwidth, roofs, read=True)
    positions = _point_positions(x_scale, y_scale, points)
    _draw_compute_roofs(root, placer, x_scale, y_scale, bandwidth, roofs,
                        [_marker_box(x, y, POINT_RADIUS) for x, y in positions])
    if bandwidth:
        _draw_ridges(root, placer, x_scale, y_scale, bandwidth, roofs)
    crossings = ridge_crossings(groups, roofs, bandwidth, read_bandwidth, x_scale, y_scale)
    _draw_groups(root, placer, x_scale, y_scale, groups, crossings)

    precisions = sorted({p.benchmark.precision for p in points} | {r.precisions[0] for r in roofs},
                        key=palette.precision_order)
    _draw_legend(root, precisions, bool(bandwidth), bool(roofs), bool(read_bandwidth and read_bandwidth != bandwidth))
    _draw_key(root, key_top, groups, key_columns, unplotted)
    return root
